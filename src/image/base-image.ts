// The base the runner image builds FROM, per platform. Where a registry is reachable that is
// node:24-bookworm-slim; where none is (air-gapped CI, this project's machines) we make a Debian
// bookworm base offline with debootstrap and load it as an image of that platform. Another
// platform's base comes from Debian's packages for it: debootstrap's first stage unpacks them
// here, the second stage runs their scripts under the emulator (binfmt_misc) in a chroot.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Engine } from "../engine/engine.js";
import { emulatorFor, registerEmulatorHint, thisHost } from "../engine/platform-support.js";
import { SandboxRunError, usageError } from "../errors.js";
import { hostProgramEnv } from "../util/host-programs.js";
import { ARCH_NAMES, hostPlatform, platformArch, type RunnerPlatform } from "../util/platform.js";
import { loadRootfsImage } from "./rootfs-image.js";

const REGISTRY_BASE = "node:24-bookworm-slim";
const OFFLINE_BASE = "sandbox-run/base:bookworm";
/** The emulated second stage took about 2 minutes here (2 cores); far past that something hangs. */
const EMULATED_SECOND_STAGE_MS = 30 * 60_000;

export type Progress = (line: string) => void;

/** The offline base of a platform: `sandbox-run/base:bookworm` (linux/amd64, as it always was), `...-arm64`. */
export function offlineBaseTag(platform: RunnerPlatform): string {
  return platform === "linux/amd64" ? OFFLINE_BASE : `${OFFLINE_BASE}-${platformArch(platform)}`;
}

interface BaseTarget {
  platform: RunnerPlatform;
  /** The engine's own platform: a registry base may be pulled (the pull gives the engine's own). */
  native: boolean;
}

/**
 * Picks (and if needed makes) a base image of the target platform: an explicit one (checked to be
 * of that platform when the engine has it), a local one, a pulled one, or an offline one. A pull
 * never replaces a local node:24-bookworm-slim with another platform's (the tag is the user's too).
 */
export async function resolveBaseImage(
  engine: Engine,
  requested: string,
  progress: Progress,
  target: BaseTarget = { platform: "linux/amd64", native: true },
): Promise<string> {
  const { platform } = target;
  if (requested !== "auto") {
    const details = await engine.imageDetails(requested);
    if (details && details.platform !== platform) {
      throw usageError(
        `The base image ${requested} is ${details.platform}, not ${platform}.`,
        `Pass --base an image of ${platform}, or leave --base out (auto).`,
      );
    }
    return requested;
  }
  for (const ref of [REGISTRY_BASE, offlineBaseTag(platform)]) {
    if ((await engine.imageDetails(ref))?.platform === platform) return ref;
  }
  if (target.native && !(await engine.imageDetails(REGISTRY_BASE))) {
    progress(`Pulling ${REGISTRY_BASE} ...`);
    if (await engine.pullImage(REGISTRY_BASE, 30_000)) return REGISTRY_BASE;
  }
  const ref = offlineBaseTag(platform);
  progress(
    `Building the offline base ${ref} with debootstrap (${platform === hostPlatform() ? "about a minute" : "a few minutes: its second stage runs under emulation"}) ...`,
  );
  await buildOfflineBase(engine, platform, progress);
  return ref;
}

/** The host's Debian mirror (from apt's active sources, comments skipped), or deb.debian.org. */
export function debianMirror(sources: string[] = readAptSources()): string {
  if (process.env.SANDBOX_RUN_DEBIAN_MIRROR) return process.env.SANDBOX_RUN_DEBIAN_MIRROR;
  for (const text of sources) {
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (line.startsWith("#")) continue;
      // deb822 ("URIs: http://.../debian") or one-line ("deb http://.../debian bookworm main").
      const match = /^(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(https?:\/\/\S+\/debian)\/?(?:\s|$)/.exec(line);
      if (match?.[1]) return match[1];
    }
  }
  return "http://deb.debian.org/debian";
}

function readAptSources(): string[] {
  const files = ["/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"];
  return files.filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f, "utf8"));
}

/** The Debian archive's keys (debian-archive-keyring), which every Release file must be signed with. */
export const DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg";

/**
 * debootstrap's runs for a platform: one for this host's own, first and second stage for another.
 * The mirror is usually plain http: without a keyring debootstrap only warns and installs whatever
 * the network served, so the signature check is forced, against the archive's keyring by name.
 */
export function debootstrapSteps(
  platform: RunnerPlatform,
  rootfs: string,
  mirror: string,
  host: RunnerPlatform = hostPlatform(),
  keyring = DEBIAN_KEYRING,
): Array<{ command: string; args: string[]; timeoutMs?: number }> {
  const arch = `--arch=${ARCH_NAMES[platform].docker}`;
  const signed = ["--force-check-gpg", `--keyring=${keyring}`];
  if (platform === host)
    return [
      { command: "/usr/sbin/debootstrap", args: ["--variant=minbase", ...signed, arch, "bookworm", rootfs, mirror] },
    ];
  return [
    {
      command: "/usr/sbin/debootstrap",
      args: ["--variant=minbase", ...signed, arch, "--foreign", "bookworm", rootfs, mirror],
    },
    {
      command: "/usr/sbin/chroot",
      args: [rootfs, "/debootstrap/debootstrap", "--second-stage"],
      timeoutMs: EMULATED_SECOND_STAGE_MS,
    },
  ];
}

/** The keyring debootstrap checks the mirror's Release against must be there: without it nothing is checked. */
export function assertDebianKeyring(keyring = DEBIAN_KEYRING): void {
  if (fs.existsSync(keyring)) return;
  throw new SandboxRunError(
    "image-missing",
    `Debian's archive keyring ${keyring} is missing: the offline base's packages could not be checked against Debian's signatures.`,
    { hint: "Install it (`apt-get install debian-archive-keyring`) or pass --base <image>." },
  );
}

async function buildOfflineBase(engine: Engine, platform: RunnerPlatform, progress: Progress): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new SandboxRunError("image-missing", "Building the offline base image needs root (debootstrap).", {
      hint: `Run \`sudo sandbox-run image build\` once, or pass --base <image> with a Debian bookworm image of ${platform} you have (e.g. ${REGISTRY_BASE}).`,
    });
  }
  if (!fs.existsSync("/usr/sbin/debootstrap")) {
    throw new SandboxRunError("image-missing", "No base image is available and debootstrap is not installed.", {
      hint: "Install it (`apt-get install debootstrap`) or pass --base <image>.",
    });
  }
  assertDebianKeyring();
  if (platform !== hostPlatform() && !emulatorFor(platform, thisHost.binfmtEntries())) {
    throw new SandboxRunError(
      "image-missing",
      `The offline ${platform} base runs Debian's ${ARCH_NAMES[platform].docker} package scripts under an emulator, and none is registered on this machine.`,
      { hint: registerEmulatorHint(platform) },
    );
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rootfs-"));
  const rootfs = path.join(work, "rootfs");
  try {
    const mirror = debianMirror();
    for (const step of debootstrapSteps(platform, rootfs, mirror)) {
      await runLoggedProcess(step.command, step.args, progress, undefined, step.timeoutMs).catch((error: Error) => {
        throw new SandboxRunError(
          "image-missing",
          `Making the offline ${platform} base image with debootstrap from ${mirror} failed.`,
          {
            hint: "Check that the Debian mirror is reachable (or set SANDBOX_RUN_DEBIAN_MIRROR), or pass --base <image> with a Debian bookworm image you have.",
            cause: error,
          },
        );
      });
    }
    const ref = offlineBaseTag(platform);
    progress(`Loading ${ref} (${platform}) ...`);
    await loadRootfsImage(engine, {
      rootfs,
      workDir: work,
      ref,
      platform,
      comment: `sandbox-run offline base: debootstrap --variant=minbase bookworm (${mirror})`,
    });
  } finally {
    removeRootfs(work);
  }
}

/**
 * Removes the work folder, after unmounting what debootstrap's second stage mounts inside the
 * chroot (proc, sys, devpts) if a killed run left them: a recursive removal must never walk into
 * the host's /proc or /dev.
 */
function removeRootfs(work: string): void {
  const mounted = () =>
    fs
      .readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((point) => point.startsWith(`${work}/`))
      .sort((a, b) => b.length - a.length);
  for (const point of mounted()) spawnSync("umount", ["-l", point], { stdio: "ignore", env: hostProgramEnv() });
  const left = mounted();
  if (left.length > 0) {
    process.emitWarning(`sandbox-run: left ${work} in place: ${left.join(", ")} still mounted there`);
    return;
  }
  fs.rmSync(work, { recursive: true, force: true });
}

/** Runs a host command, handing each output line to `progress`; rejects with the output's tail. */
export function runLoggedProcess(
  command: string,
  args: string[],
  progress: Progress,
  cwd?: string,
  timeoutMs?: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"], env: hostProgramEnv() });
    let tail = "";
    const timer = timeoutMs
      ? setTimeout(() => {
          tail += `\n(stopped after ${timeoutMs / 1000} s)`;
          child.kill("SIGKILL");
        }, timeoutMs)
      : undefined;
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split("\n")) if (line.trim()) progress(line.trimEnd());
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(" ")} failed (exit ${code}):\n${tail}`));
    });
  });
}
