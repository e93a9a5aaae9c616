// `sandbox-run image build` and `image prune` as library operations, on the engine DOCKER_HOST
// names: the runner image (and an --apt image derived from it) built, or the runner images of other
// sandbox-run versions removed.
import { DockerEngine } from "../engine/docker-engine.js";
import { type BuiltImages, buildImages as build } from "../image/build-images.js";
import { type PruneResult, pruneRunnerImages } from "../image/prune-images.js";
import { runnerImageSpec } from "../image/runner-image.js";
import type { RunnerPlatform } from "../util/platform.js";

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
