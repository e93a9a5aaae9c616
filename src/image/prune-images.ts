// Old runner images pile up as sandbox-run is upgraded: every change to images/pi gives a new
// tag, and each image is ~670 MB. Pruning removes the runner tags other than the one this
// version uses, and the `--apt` images derived from those; an image still used by a container
// is left alone (Docker refuses).
import type { Engine } from "../engine/engine.js";
import { DERIVED_REPOSITORY } from "./derived-image.js";
import { IMAGE_REPOSITORY } from "./runner-image.js";

export interface PruneResult {
  removed: string[];
  /** Tags Docker would not remove, with its reason (e.g. a container still uses the image). */
  kept: Array<{ tag: string; reason: string }>;
}

export async function pruneRunnerImages(engine: Engine, currentTag: string): Promise<PruneResult> {
  const version = currentTag.slice(currentTag.indexOf(":") + 1);
  const keep = (tag: string) => tag === currentTag || tag.startsWith(`${DERIVED_REPOSITORY}:${version}-`);
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
