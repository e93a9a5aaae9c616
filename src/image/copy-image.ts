// Moves an image from one engine to another as `docker save | docker load` does, streamed: the
// tar flows from one engine's response into the other's request and is never held whole here
// (a runner image is ~670 MB). The tag and its labels travel inside the tar; only the requested
// tag may (image-tar-check.ts): the source engine's tar is its word. A tar from a file (the
// GitHub Action's cache) is loaded the same way: whoever could write that file chose its tags.
import type { Readable } from "node:stream";
import type { Engine } from "../engine/engine.js";
import { onlyTagging } from "./image-tar-check.js";

export async function copyImage(from: Engine, to: Engine, ref: string, signal?: AbortSignal): Promise<void> {
  await loadTagging(to, await from.saveImage(ref, signal), ref, `Engine "${from.name}"`, signal);
}

/** Loads `tar` onto `to` if it tags `ref` and nothing else (else nothing is loaded); `source` names it in errors. */
export async function loadTagging(
  to: Engine,
  tar: Readable,
  ref: string,
  source: string,
  signal?: AbortSignal,
): Promise<void> {
  const checked = onlyTagging(tar, ref, source);
  // A refused tar ends the load request (the engine applies nothing of an unfinished tar).
  const load = new AbortController();
  let refused: Error | undefined;
  checked.on("error", (error) => {
    refused = error;
    load.abort(error);
  });
  const stop = () => load.abort(signal?.reason);
  signal?.addEventListener("abort", stop, { once: true });
  try {
    await to.loadImage(checked, load.signal);
  } catch (error) {
    throw refused ?? error;
  } finally {
    signal?.removeEventListener("abort", stop);
    // A load that failed half-way must not leave the source open.
    tar.destroy();
    checked.destroy();
  }
  if (refused) throw refused;
}
