// Reading an open file whole, for the small host-side reads of files the sandbox may have shaped
// (their callers open them no-follow and non-blocking and check kind and size first).
import fs from "node:fs";

/** The first `size` bytes of an open file, read from its start (fewer if it is shorter). */
export function readAll(fd: number, size: number): Buffer {
  const buffer = Buffer.alloc(size);
  let at = 0;
  while (at < size) {
    const n = fs.readSync(fd, buffer, at, size - at, at);
    if (n === 0) break;
    at += n;
  }
  return buffer.subarray(0, at);
}
