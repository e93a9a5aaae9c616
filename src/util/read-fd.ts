// Reading small files whole, for the host-side reads of files the sandbox may have shaped: opened
// non-blocking (a FIFO cannot hang the open), no-follow unless the caller follows on purpose, and
// read only when the open file is a regular file of at most the size asked.
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

/**
 * A small regular file by path: its bytes when it is a regular file of at most `maxBytes`; null
 * when nothing is there; undefined when it is something else, too big, or cannot be opened (a
 * symlink, unless `follow`). Read errors throw.
 */
export function readSmallFile(file: string, maxBytes: number, follow = false): Buffer | null | undefined {
  const { O_RDONLY, O_NONBLOCK, O_NOFOLLOW } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? null : undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    return readAll(fd, stat.size);
  } finally {
    fs.closeSync(fd);
  }
}
