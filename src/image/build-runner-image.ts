// Builds the runner image for a platform: Pi and the platform's Node are installed with npm on
// the host (where the registry and its TLS set-up already work) into a cached staging folder,
// which becomes the build context; inside the build only Debian's mirror is used. Another
// platform's build runs its steps under the engine's emulator: apt-get, a few links, and the
// bounded compile-cache warm-up; never npm (Node under old qemu crashes now and then in heavy steps).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import tar from "tar-fs";
import type { Engine } from "../engine/engine.js";
import { ownPlatformOf } from "../engine/engine-kind.js";
import { checkPlatformSupport, type HostKernel } from "../engine/platform-support.js";
import { SandboxRunError } from "../errors.js";
import {
  IMAGE_LABEL_BASE,
  IMAGE_LABEL_CONTENT_HASH,
  IMAGE_LABEL_NODE_VERSION,
  IMAGE_LABEL_PI_VERSION,
} from "../sandbox-contract.js";
import { buildCacheDir } from "../util/build-cache.js";
import { HostDir, HostDirError } from "../util/host-dir.js";
import { ARCH_NAMES, RUNNER_PLATFORMS, type RunnerPlatform } from "../util/platform.js";
import { type Progress, resolveBaseImage, runLoggedProcess } from "./base-image.js";
import { IMAGE_DIR, runnerImageSpec } from "./runner-image.js";

interface BuildRunnerImageOptions {
  /** "auto" (default): a local or pulled node:24-bookworm-slim, else an offline debootstrap base. */
  base?: string;
  /** The platform to build for; default: the engine's own. */
  platform?: RunnerPlatform;
  progress?: Progress;
  cacheDir?: string;
  /** Under emulation: how long the compile-cache warm-up may take before the image ships without it. */
  emulatedWarmUpSeconds?: number;
  /** This machine's kernel facts (its binfmt_misc emulators); default: read from it. */
  host?: HostKernel;
}

interface BuiltRunnerImage {
  tag: string;
  base: string;
  platform: RunnerPlatform;
  /** Built for another platform than the engine's own (its steps ran under an emulator). */
  emulated: boolean;
}

/**
 * The warm-up task took 129 s under qemu here (2 cores, load 18; 4 s natively): the bound leaves
 * room for a slower machine and still ends a hung step.
 */
const EMULATED_WARM_UP_SECONDS = 600;

export async function buildRunnerImage(
  engine: Engine,
  options: BuildRunnerImageOptions = {},
): Promise<BuiltRunnerImage> {
  const progress = options.progress ?? (() => {});
  const info = await engine.info();
  const platform = options.platform ?? ownPlatformOf(info);
  if (!platform) {
    throw new SandboxRunError(
      "image-missing",
      `Engine "${engine.name}" runs on ${info.architecture}, for which sandbox-run has no runner image.`,
      { hint: `Build for ${RUNNER_PLATFORMS.join(" or ")} with --platform, on an engine that can run it (emulated).` },
    );
  }
  // Up front, before any download: an engine that cannot run the platform's programs cannot build it either.
  const target = checkPlatformSupport(platform, info, { engineName: engine.name, host: options.host });
  const base = await resolveBaseImage(engine, options.base ?? "auto", progress, {
    platform,
    native: !target.emulated,
  });
  const context = await prepareContext(options.cacheDir ?? buildCacheDir(), platform, progress);
  try {
    const warmUp: Record<string, string> = target.emulated
      ? {
          WARM_CACHE: "optional",
          WARM_CACHE_SECONDS: String(options.emulatedWarmUpSeconds ?? EMULATED_WARM_UP_SECONDS),
        }
      : {};
    const tag = await buildFromContext(engine, context.dir, base, platform, warmUp, progress);
    return { tag, base, platform, emulated: target.emulated };
  } finally {
    context.dispose();
  }
}

async function buildFromContext(
  engine: Engine,
  context: string,
  base: string,
  platform: RunnerPlatform,
  warmUp: Record<string, string>,
  progress: Progress,
): Promise<string> {
  const spec = runnerImageSpec(platform);
  progress(`Building ${spec.tag} (${platform}: Pi ${spec.piVersion}, Node ${spec.nodeVersion}) on ${base} ...`);
  // The context links to the shared dependency cache: those two links are followed, and nothing
  // else is (a link inside the cache is packed as a link, never as the host file it names).
  const contextLinks = new Set(["app", "node"].map((name) => path.join(context, name)));
  const stat = (file: string, done: (error: NodeJS.ErrnoException | null, stats: fs.Stats) => void) =>
    (contextLinks.has(path.resolve(file)) ? fs.stat : fs.lstat)(file, done);
  // tar-fs takes its own `fs` (its types leave the option out).
  const packed = tar.pack(context, { dereference: true, fs: { ...fs, stat } } as tar.PackOptions);
  await engine.buildImage(packed as unknown as Readable, {
    tag: spec.tag,
    platform,
    buildArgs: { BASE_IMAGE: base, ...warmUp },
    onProgress: progress,
    labels: {
      [IMAGE_LABEL_CONTENT_HASH]: spec.contentHash,
      [IMAGE_LABEL_PI_VERSION]: spec.piVersion,
      [IMAGE_LABEL_NODE_VERSION]: spec.nodeVersion,
      [IMAGE_LABEL_BASE]: base,
    },
  });
  // The tag promises the platform: an engine's build cache or a base of another platform must not break that.
  const built = await engine.imageDetails(spec.tag);
  if (built?.platform !== platform) {
    await engine.removeImage(spec.tag).catch(() => {});
    throw new SandboxRunError(
      "image-missing",
      `Building ${spec.tag} made a ${built?.platform ?? "missing"} image, not ${platform}.`,
      { hint: `Check that the base image ${base} is ${platform} (\`docker image inspect ${base}\`), or pass --base.` },
    );
  }
  return spec.tag;
}

/**
 * The build context: Dockerfile, launcher, extension, node/bin/node and app/node_modules. The npm
 * install depends only on images/pi's package files, so it is cached by their hash and shared by
 * every image built from them (installed in a temporary folder, then renamed into place, so
 * concurrent builds never see half a cache). Each build gets its own context folder.
 */
async function prepareContext(
  cacheDir: string,
  platform: RunnerPlatform,
  progress: Progress,
): Promise<{ dir: string; dispose: () => void }> {
  const lock = crypto.createHash("sha256");
  for (const file of ["package.json", "package-lock.json"]) lock.update(fs.readFileSync(path.join(IMAGE_DIR, file)));
  const arch = ARCH_NAMES[platform];
  // linux/amd64 keeps the folder name it always had, so an existing cache is used as it is.
  const suffix = platform === "linux/amd64" ? "" : `-${arch.docker}`;
  const deps = path.join(cacheDir, `deps-${lock.digest("hex").slice(0, 16)}${suffix}`);
  const nodePackageName = runnerImageSpec(platform).nodePackage;
  checkCacheFolder(cacheDir);
  if (!fs.existsSync(path.join(deps, ".ready"))) {
    const staging = fs.mkdtempSync(path.join(cacheDir, "staging-"));
    try {
      const app = path.join(staging, "app");
      fs.mkdirSync(app);
      for (const file of ["package.json", "package-lock.json"])
        fs.copyFileSync(path.join(IMAGE_DIR, file), path.join(app, file));
      progress(`Installing Pi and Node for the ${platform} image with npm (cached after the first build) ...`);
      // --cpu and --os (npm 10.1 and later) pick the platform's optional packages, whatever this host is.
      await runLoggedProcess(
        "npm",
        [
          "ci",
          "--omit=dev",
          "--ignore-scripts",
          "--no-audit",
          "--no-fund",
          "--loglevel=error",
          `--cpu=${arch.node}`,
          "--os=linux",
        ],
        progress,
        app,
      ).catch((error: Error) => {
        throw new SandboxRunError("image-missing", "Installing Pi for the runner image with npm failed.", {
          hint: "Check that npm can reach its registry from this machine (`npm view @earendil-works/pi-coding-agent version`).",
          cause: error,
        });
      });
      // Only the node binary of the platform's package is needed; keep it out of node_modules.
      const nodePackage = path.join(app, "node_modules", nodePackageName);
      if (!fs.existsSync(path.join(nodePackage, "bin", "node"))) {
        throw new SandboxRunError("image-missing", `npm did not install ${nodePackageName} for ${platform}.`, {
          hint: `Use npm 10.1 or later (it understands --cpu and --os; this one is \`npm --version\`).`,
        });
      }
      fs.mkdirSync(path.join(staging, "node", "bin"), { recursive: true });
      fs.copyFileSync(path.join(nodePackage, "bin", "node"), path.join(staging, "node", "bin", "node"));
      fs.chmodSync(path.join(staging, "node", "bin", "node"), 0o755);
      for (const other of RUNNER_PLATFORMS.map((p) => runnerImageSpec(p).nodePackage))
        fs.rmSync(path.join(app, "node_modules", other), { recursive: true, force: true });
      fs.rmSync(path.join(app, "node_modules", ".bin"), { recursive: true, force: true });
      // The sandbox runs as another uid: everything must be readable by all, whatever the host's umask.
      makeWorldReadable(staging);
      fs.writeFileSync(path.join(staging, ".ready"), new Date().toISOString());
      try {
        fs.renameSync(staging, deps);
      } catch {
        // Another build finished the same install first; use theirs.
      }
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }
  const dir = fs.mkdtempSync(path.join(cacheDir, "context-"));
  fs.symlinkSync(path.join(deps, "app"), path.join(dir, "app"));
  fs.symlinkSync(path.join(deps, "node"), path.join(dir, "node"));
  // Every other file of images/pi goes into the context as it is now.
  for (const file of fs.readdirSync(IMAGE_DIR)) {
    if (file === "package.json" || file === "package-lock.json" || file === "node_modules") continue;
    fs.copyFileSync(path.join(IMAGE_DIR, file), path.join(dir, file));
  }
  return { dir, dispose: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The cache is baked into every image: it must be the caller's (or root's), writable by no one
 * else, reached through no other user's link (HostDir's checks; a missing one is made here). No sandbox may have held it
 * either: lending it, or a folder holding it, is refused (lentFolderProblem).
 */
function checkCacheFolder(cacheDir: string): void {
  try {
    HostDir.open(cacheDir, { create: true }).close();
  } catch (error) {
    if (!(error instanceof HostDirError)) throw error;
    throw new SandboxRunError("image-missing", `Cannot use ${cacheDir} as the image build's cache: ${error.message}.`, {
      hint: "Point XDG_CACHE_HOME at a folder of yours that no one else can write, or remove that folder and build again.",
    });
  }
}

function makeWorldReadable(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (entry.isSymbolicLink()) continue;
    const mode = fs.statSync(file).mode & 0o7777;
    const wanted = entry.isDirectory() || mode & 0o111 ? mode | 0o555 : mode | 0o444;
    if (wanted !== mode) fs.chmodSync(file, wanted);
  }
  fs.chmodSync(dir, 0o755);
}
