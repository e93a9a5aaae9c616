// Moves an image from one engine to another as `docker save | docker load` does, streamed: the
// tar flows from one engine's response into the other's request and is never held whole here
// (a runner image is ~670 MB). The tag and its labels travel inside the tar.
import type { Engine } from "../engine/engine.js";

export async function copyImage(from: Engine, to: Engine, ref: string, signal?: AbortSignal): Promise<void> {
  const tar = await from.saveImage(ref, signal);
  try {
    await to.loadImage(tar, signal);
  } finally {
    // A load that failed half-way must not leave the source's response open.
    tar.destroy();
  }
}
