// Old runner images pile up as sandbox-run is upgraded: every change to images/pi gives a new
// tag, and each image is ~670 MB. Pruning removes the runner tags other than the ones this
// version uses (one per platform), and the `--apt` images derived from those; an image still
// used by a container is left alone (Docker refuses).
import type { Engine } from "../engine/engine.js";
import { platformArch, RUNNER_PLATFORMS } from "../util/platform.js";
import { DERIVED_REPOSITORY } from "./derived-image.js";
import { IMAGE_REPOSITORY } from "./runner-image.js";

export interface PruneResult {
  removed: string[];
  /** Tags Docker would not remove, with its reason (e.g. a container still uses the image). */
  kept: Array<{ tag: string; reason: string }>;
}

/**
 * Removes runner images of other versions. `currentTags`: this version's runner image; its other
 * platforms' images (`sandbox-run/pi:<v>-arm64` beside `sandbox-run/pi:<v>`) and the `--apt` images
 * built on any of them (`sandbox-run/pi-apt:<v>-...`, which covers `<v>-arm64-...`) stay too.
 */
export async function pruneRunnerImages(engine: Engine, currentTags: string | string[]): Promise<PruneResult> {
  const given = typeof currentTags === "string" ? [currentTags] : currentTags;
  const current = given.flatMap((tag) => [tag, ...RUNNER_PLATFORMS.map((p) => `${tag}-${platformArch(p)}`)]);
  const versions = current.map((tag) => tag.slice(tag.indexOf(":") + 1));
  const keep = (tag: string) =>
    current.includes(tag) || versions.some((version) => tag.startsWith(`${DERIVED_REPOSITORY}:${version}-`));
  const ours = (tag: string) => tag.startsWith(`${IMAGE_REPOSITORY}:`) || tag.startsWith(`${DERIVED_REPOSITORY}:`);
  const images = await engine.listImages([`${IMAGE_REPOSITORY}:*`, `${DERIVED_REPOSITORY}:*`]);
  const stale = [...new Set(images.flatMap((image) => image.tags))].filter((tag) => ours(tag) && !keep(tag));
  const result: PruneResult = { removed: [], kept: [] };
  for (const tag of stale.sort()) {
    try {
      await engine.removeImage(tag);
      result.removed.push(tag);
    } catch (error) {
      result.kept.push({ tag, reason: (error as Error).message });
    }
  }
  return result;
}
