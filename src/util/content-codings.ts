// The codings an HTTP body went through, and their decoders: what the egress proxy and the model
// gateway undo before they scrub a body of secrets (scrubber.ts finds a value only uncompressed).
import type { Transform } from "node:stream";
import zlib from "node:zlib";

/** The codings a Content-Encoding or Transfer-Encoding header lists, in the order they were applied. */
export function codings(header: string | string[] | number | undefined): string[] {
  const values = Array.isArray(header) ? header : header === undefined ? [] : [String(header)];
  return values
    .flatMap((value) => value.split(","))
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "" && coding !== "identity");
}

/**
 * The most codings a body is undone through: an upstream listing `gzip` 2,500 times made as many
 * decoder streams per answer (+150 MB over 16 connections: review, session 44). Past it, a body is
 * refused as one nothing here can undo.
 */
export const MAX_CODING_LAYERS = 4;

/** A decompressor for an encoding; undefined for identity; null when there is none. */
export function decoderFor(encoding: string): Transform | undefined | null {
  if (encoding === "identity" || encoding === "") return undefined;
  if (encoding === "gzip" || encoding === "x-gzip" || encoding === "deflate") return zlib.createUnzip();
  if (encoding === "br") return zlib.createBrotliDecompress();
  return null;
}
