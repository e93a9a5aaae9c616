// `sandbox-run image build` and `image prune` as library operations, on the engine DOCKER_HOST
// names: the runner image (and an --apt image derived from it) built, or the runner images of other
// sandbox-run versions removed.
import fs from "node:fs";
import { DockerEngine } from "../engine/docker-engine.js";
import { usageError } from "../errors.js";
import { type BuiltImages, buildImages as build } from "../image/build-images.js";
import { loadTagging } from "../image/copy-image.js";
import { type PruneResult, pruneRunnerImages } from "../image/prune-images.js";
import { runnerImageSpec } from "../image/runner-image.js";
import type { RunnerPlatform } from "../util/platform.js";
import { openRegularFile } from "../util/read-fd.js";

export interface BuildImagesOptions {
  /** Base image: "auto" (default), node:24-bookworm-slim, or any Debian bookworm image. */
  base?: string;
  /** Also build an image with these Debian packages added (each entry may list several, comma-separated). */
  apt?: string[];
  /** linux/amd64 or linux/arm64 (default: the engine's own; another one is built under emulation). */
  platform?: RunnerPlatform;
  onProgress?: (line: string) => void;
}

export type { BuiltImages } from "../image/build-images.js";
export type { PruneResult } from "../image/prune-images.js";

export async function buildImages(options: BuildImagesOptions = {}): Promise<BuiltImages> {
  const engine = new DockerEngine();
  await engine.ping();
  return build(engine, {
    base: options.base,
    apt: options.apt,
    platform: options.platform,
    progress: (line) => options.onProgress?.(line),
  });
}

/** Removes the runner images (and --apt images) of other sandbox-run versions; this version's stay. */
export async function pruneImages(): Promise<PruneResult & { current: string }> {
  const engine = new DockerEngine();
  await engine.ping();
  const current = runnerImageSpec().tag;
  return { ...(await pruneRunnerImages(engine, current)), current };
}

/**
 * Loads an image from a `docker save` tar file (a cache's, a CI artifact's) onto the engine, if it
 * tags `tag` (default: this version's runner image) and nothing else: `docker load` would apply
 * every tag the file names, retagging any image later steps run. Nothing is loaded otherwise.
 */
export async function loadImageTar(file: string, tag: string = runnerImageSpec().tag): Promise<void> {
  let fd: number;
  try {
    ({ fd } = openRegularFile(file));
  } catch (error) {
    throw usageError(
      `Cannot read the image tar ${file}: ${(error as Error).message}.`,
      "Give the file `docker save` wrote.",
    );
  }
  const engine = new DockerEngine();
  await engine.ping();
  await loadTagging(engine, fs.createReadStream("", { fd }), tag, `The file ${file}`);
}
