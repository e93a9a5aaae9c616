// The base the runner image builds FROM. Where a registry is reachable that is
// node:24-bookworm-slim; where none is (air-gapped CI, this project's machines) we make a
// Debian bookworm base offline with debootstrap and `docker import`.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Engine } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";

export const REGISTRY_BASE = "node:24-bookworm-slim";
export const OFFLINE_BASE = "sandbox-run/base:bookworm";

export type Progress = (line: string) => void;

/** Picks (and if needed makes) a base image: an explicit one, a local one, a pulled one, or an offline one. */
export async function resolveBaseImage(engine: Engine, requested: string, progress: Progress): Promise<string> {
  if (requested !== "auto") return requested;
  for (const ref of [REGISTRY_BASE, OFFLINE_BASE]) if (await engine.imageLabels(ref)) return ref;
  progress(`Pulling ${REGISTRY_BASE} ...`);
  if (await engine.pullImage(REGISTRY_BASE, 30_000)) return REGISTRY_BASE;
  progress(`No registry reachable; building the offline base ${OFFLINE_BASE} with debootstrap (about a minute) ...`);
  await buildOfflineBase(engine, progress);
  return OFFLINE_BASE;
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

async function buildOfflineBase(engine: Engine, progress: Progress): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new SandboxRunError("image-missing", "Building the offline base image needs root (debootstrap).", {
      hint: `Run \`sudo sandbox-run image build\` once, or pass --base <image> with a Debian bookworm image you have (e.g. ${REGISTRY_BASE}).`,
    });
  }
  if (!fs.existsSync("/usr/sbin/debootstrap")) {
    throw new SandboxRunError("image-missing", "No base image is available and debootstrap is not installed.", {
      hint: "Install it (`apt-get install debootstrap`) or pass --base <image>.",
    });
  }
  const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rootfs-"));
  try {
    const mirror = debianMirror();
    await runLoggedProcess("/usr/sbin/debootstrap", ["--variant=minbase", "bookworm", rootfs, mirror], progress).catch(
      (error: Error) => {
        throw new SandboxRunError(
          "image-missing",
          `Making the offline base image with debootstrap from ${mirror} failed.`,
          {
            hint: "Check that the Debian mirror is reachable (or set SANDBOX_RUN_DEBIAN_MIRROR), or pass --base <image> with a Debian bookworm image you have.",
            cause: error,
          },
        );
      },
    );
    progress(`Importing ${OFFLINE_BASE} ...`);
    const tar = spawn("tar", ["-C", rootfs, "-c", "."], { stdio: ["ignore", "pipe", "inherit"] });
    await engine.importImage(tar.stdout, OFFLINE_BASE);
  } finally {
    fs.rmSync(rootfs, { recursive: true, force: true });
  }
}

/** Runs a host command, handing each output line to `progress`; rejects with the output's tail. */
export function runLoggedProcess(command: string, args: string[], progress: Progress, cwd?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split("\n")) if (line.trim()) progress(line.trimEnd());
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} ${args.join(" ")} failed (exit ${code}):\n${tail}`)),
    );
  });
}
