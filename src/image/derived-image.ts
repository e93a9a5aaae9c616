// The runner image carries bash, git, ripgrep, coreutils and Node; a repository's own tests
// often need more (python3, make, a compiler). `sandbox-run image build --apt <packages>`
// derives an image from the runner image with those Debian packages added, as root at build
// time only: the sandbox still runs as the same non-root user, and setuid bits the packages
// bring are stripped again, as in the runner image.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import tar from "tar-fs";
import type { Engine } from "../engine/engine.js";
import { usageError } from "../errors.js";
import { IMAGE_LABEL_APT_PACKAGES, SANDBOX_UID } from "../sandbox-contract.js";
import type { RunnerPlatform } from "../util/platform.js";
import type { Progress } from "./base-image.js";
import { runnerImageSpec } from "./runner-image.js";

export const DERIVED_REPOSITORY = "sandbox-run/pi-apt";

/** Debian package names (policy manual 5.6.1), optionally with =version; nothing a shell would read. */
const PACKAGE_RE = /^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$/;

export function parseAptPackages(list: string[]): string[] {
  const packages = [...new Set(list.flatMap((item) => item.split(/[\s,]+/)).filter(Boolean))].sort();
  const bad = packages.filter((name) => !PACKAGE_RE.test(name));
  if (bad.length > 0) {
    throw usageError(
      `Not Debian package names: ${bad.map((b) => JSON.stringify(b)).join(", ")}.`,
      "Pass names like python3 or build-essential (optionally name=version), separated by commas or spaces.",
    );
  }
  if (packages.length === 0)
    throw usageError(
      "--apt needs at least one package name.",
      "For example: sandbox-run image build --apt python3,make",
    );
  return packages;
}

/**
 * `sandbox-run/pi-apt:<runner version>-<hash of the package list>`: one tag per runner version (which
 * names the platform: `...-arm64`) and list.
 */
export function derivedImageTag(packages: string[], platform?: RunnerPlatform): string {
  const runnerTag = runnerImageSpec(platform).tag;
  const runner = runnerTag.slice(runnerTag.indexOf(":") + 1);
  const hash = crypto.createHash("sha256").update(packages.join("\n")).digest("hex").slice(0, 8);
  return `${DERIVED_REPOSITORY}:${runner}-${hash}`;
}

export function derivedDockerfile(runnerTag: string, packages: string[]): string {
  return [
    `FROM ${runnerTag}`,
    "USER root",
    "RUN apt-get update \\",
    ` && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${packages.join(" ")} \\`,
    " && rm -rf /var/lib/apt/lists/* \\",
    " && (find / -xdev -perm /6000 -type f -exec chmod ug-s {} + 2>/dev/null || true)",
    `USER ${SANDBOX_UID}:${SANDBOX_UID}`,
    "",
  ].join("\n");
}

export async function buildDerivedImage(
  engine: Engine,
  options: { aptPackages: string[]; platform?: RunnerPlatform; progress?: Progress },
): Promise<{ tag: string; packages: string[] }> {
  const progress = options.progress ?? (() => {});
  const packages = parseAptPackages(options.aptPackages);
  const tag = derivedImageTag(packages, options.platform);
  const runnerTag = runnerImageSpec(options.platform).tag;
  progress(`Building ${tag}: ${runnerTag} plus ${packages.join(" ")} ...`);
  // The build context is just the Dockerfile, in a folder of its own that is removed afterwards.
  const context = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-apt-"));
  try {
    fs.writeFileSync(path.join(context, "Dockerfile"), derivedDockerfile(runnerTag, packages));
    await engine.buildImage(tar.pack(context) as unknown as Readable, {
      tag,
      labels: { [IMAGE_LABEL_APT_PACKAGES]: packages.join(" ") },
      // Another platform's apt-get runs under the engine's emulator.
      ...(options.platform ? { platform: options.platform } : {}),
      onProgress: progress,
    });
  } finally {
    fs.rmSync(context, { recursive: true, force: true });
  }
  return { tag, packages };
}
