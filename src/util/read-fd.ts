// Reading small files whole, for the host-side reads of files the sandbox may have shaped: opened
// non-blocking (a FIFO cannot hang the open), no-follow unless the caller follows on purpose, and
// read only when the open file is a regular file of at most the size asked.
import fs from "node:fs";
import { O_PATH } from "./o-path.js";

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
 * An fd for reading `file`, opened only once it is known to be a regular file: the path is first
 * opened with O_PATH (which opens nothing: no FIFO blocks, no device's open routine runs; a tape
 * rewinds, a watchdog arms on open), its kind checked, and only then the file itself reopened
 * through /proc/self/fd. Without `follow`, a link at the name is an error (ELOOP). Errors carry the
 * errno code, or "not a regular file".
 */
export function openRegularFile(file: string, follow = false): { fd: number; stat: fs.Stats } {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  const pathFd = fs.openSync(file, O_PATH | (follow ? 0 : O_NOFOLLOW));
  try {
    // O_PATH|O_NOFOLLOW on a link gives an fd of the link itself: refused as open(O_NOFOLLOW) would.
    const kind = fs.fstatSync(pathFd);
    if (kind.isSymbolicLink()) throw Object.assign(new Error(`${file}: a symbolic link`), { code: "ELOOP" });
    if (!kind.isFile()) throw Object.assign(new Error("not a regular file"), { code: "not a regular file" });
    const fd = fs.openSync(`/proc/self/fd/${pathFd}`, O_RDONLY | O_NONBLOCK);
    return { fd, stat: fs.fstatSync(fd) };
  } finally {
    fs.closeSync(pathFd);
  }
}

/**
 * A small regular file by path: its bytes when it is a regular file of at most `maxBytes`; null
 * when nothing is there; undefined when it is something else, too big, or cannot be opened (a
 * symlink, unless `follow`). Read errors throw.
 */
export function readSmallFile(file: string, maxBytes: number, follow = false): Buffer | null | undefined {
  let opened: { fd: number; stat: fs.Stats };
  try {
    opened = openRegularFile(file, follow);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? null : undefined;
  }
  const { fd, stat } = opened;
  try {
    if (stat.size > maxBytes) return undefined;
    return readAll(fd, stat.size);
  } finally {
    fs.closeSync(fd);
  }
}
