// Removing what a run left, and looking at a path below a root, through directory fds: the
// tree is what the sandbox made it (any name may be a symlink, any directory unreadable), so
// nothing here follows a link or resolves a long path as a string.
import fs from "node:fs";
import { drain, drainYielding } from "../util/stepwise.js";
import { atPath, chmodDirectory, errorCode, openDirAt, walkTree } from "./fd-walk.js";

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/** lstat of a path below the root, resolved one directory fd at a time (no symlink followed). */
export function lstatBelow(rootFd: number, path: string): fs.Stats | undefined {
  const parts = path.split("/");
  let fd = openDirAt(rootFd, ".");
  try {
    for (const part of parts.slice(0, -1)) {
      const next = openDirAt(fd, part);
      fs.closeSync(fd);
      fd = next;
    }
    return lstatOrUndefined(atPath(fd, parts[parts.length - 1]!));
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

/** An fd for the directory at `path` below the root ("" is the root), no symlink followed; undefined if there is none. */
export function openDirBelow(rootFd: number, path: string): number | undefined {
  let fd = openDirAt(rootFd, ".");
  if (path === "") return fd;
  for (const part of path.split("/")) {
    let next: number;
    try {
      next = openDirAt(fd, part);
    } catch (error) {
      fs.closeSync(fd);
      if (["ENOENT", "ENOTDIR", "ELOOP"].includes(errorCode(error))) return undefined;
      throw error;
    }
    fs.closeSync(fd);
    fd = next;
  }
  return fd;
}

/** An fd for reading the regular file `name` in the directory `dirFd` (no symlink followed, no FIFO waited on); undefined if it is not one. */
export function openFileAt(dirFd: number, name: string): number | undefined {
  try {
    const fd = fs.openSync(atPath(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fs.fstatSync(fd).isFile()) return fd;
    fs.closeSync(fd);
    return undefined;
  } catch {
    return undefined;
  }
}

export function lstatOrUndefined(at: string | Buffer): fs.Stats | undefined {
  try {
    return fs.lstatSync(at);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Removes the entry `name` in the directory `dirFd` and, for a directory, everything below
 * it, at any depth, including what the run made unreadable. Returns whether anything was there.
 */
export function removeAt(dirFd: number, name: string | Buffer): boolean {
  return drain(removing(dirFd, name));
}

/**
 * removeAt for trees of any size: the event loop gets a turn as it goes (util/stepwise.ts; a folder
 * the sandbox filled with millions of hard links takes seconds to empty).
 */
export function removeAtYielding(dirFd: number, name: string | Buffer): Promise<boolean> {
  return drainYielding(removing(dirFd, name));
}

/** The removal, one step per entry removed below `name` (the caller decides when to pause). */
export function* removing(dirFd: number, name: string | Buffer): Generator<void, boolean> {
  const at = atPath(dirFd, name);
  const stat = lstatOrUndefined(at);
  if (!stat) return false;
  if (!stat.isDirectory()) {
    fs.unlinkSync(at);
    return true;
  }
  if ((stat.mode & 0o700) !== 0o700) chmodDirectory(at, 0o700); // never through a link swapped in since the lstat
  // In any order: a folder of more names than a walk holds is streamed (and emptied as it goes).
  for (const entry of walkTree(at, {
    maxDepth: Number.POSITIVE_INFINITY,
    descend: () => true,
    repairAccess: true,
    order: "any",
    removes: true,
    leave: ({ at: child }) => fs.rmdirSync(child),
  })) {
    if (entry.path !== "" && entry.kind !== "directory") fs.unlinkSync(entry.at);
    yield;
  }
  fs.rmdirSync(at);
  return true;
}
