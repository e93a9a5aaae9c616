// Walks a host directory tree that code in the sandbox shaped, through directory file
// descriptors. The tree is hostile: any name may be a symlink, any directory may be swapped.
// Node has no openat(2), but "/proc/self/fd/<dir fd>/<name>" resolves <name> inside the
// directory that fd holds, whatever its path is now. So:
// - each directory is opened with O_DIRECTORY|O_NOFOLLOW relative to its parent's fd, and every
//   child is lstat'ed relative to it: no symlink is ever followed, and path length never
//   matters (each syscall sees a short path);
// - the walk is depth-first, pre-order, children sorted by name (UTF-16 code units), so two
//   walks of the same tree yield entries in the same order (`comparePaths`), and a walk can be
//   merged with a recorded one;
// - memory is bounded by the depth times the widest directory: nothing is kept per entry;
// - an entry the walk cannot see through (unreadable directory, a name that is not UTF-8, a tree
//   deeper than `maxDepth`) is yielded with a `problem`, never skipped.
// At most OPEN_FD_WINDOW directory fds are held; deeper ones are reopened through ".." when the
// walk climbs back, checked by (dev, ino), so depth costs neither fds nor correctness.
import fs from "node:fs";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const OPEN_FD_WINDOW = 64;
export const DEFAULT_MAX_DEPTH = 4096;

export type EntryKind = "file" | "directory" | "symlink" | "fifo" | "socket" | "device" | "unknown";

export interface WalkEntry {
  /** Relative to the root, "/"-separated; "" for the root itself. */
  path: string;
  name: string;
  depth: number;
  kind: EntryKind;
  /** lstat of the entry; absent only for kind "unknown" (lstat failed). */
  stat?: fs.Stats;
  /** A path for syscalls on this entry ("/proc/self/fd/<parent fd>/<name>"); valid only during the visit. */
  at: string | Buffer;
  /** Directories: an open fd (valid during the visit), unless the directory could not be opened. */
  fd?: number;
  /** Directories: the names inside look like a git directory (HEAD with objects+refs, or HEAD with commondir). */
  gitLike?: boolean;
  /** Why the walk cannot see this entry (or what is below it). */
  problem?: string;
}

export interface WalkOptions {
  /** Return false to not descend into a directory (its fd is closed). */
  descend?: (entry: WalkEntry) => boolean;
  /** Called post-order for every directory descended into, with a path valid for the call. */
  leave?: (entry: { path: string; at: string | Buffer; fd: number }) => void;
  /** Directories below this depth are reported as a problem, not walked. */
  maxDepth?: number;
  /**
   * Give the owner read/search permission on a directory it cannot open or list, then retry
   * (for removing a tree the sandbox made unreadable; it is about to go).
   */
  repairAccess?: boolean;
}

interface Frame {
  fd: number;
  path: string;
  depth: number;
  /** Where the directory is, relative to its parent (for leave()). */
  name: string | Buffer;
  names: string[];
  /** Raw names of entries whose name is not valid UTF-8, by index in `names`. */
  raw?: Map<number, Buffer>;
  index: number;
  dev: number;
  ino: number;
  descended: boolean;
}

export class WalkError extends Error {}

export function kindOf(stat: fs.Stats): EntryKind {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  if (stat.isSymbolicLink()) return "symlink";
  if (stat.isFIFO()) return "fifo";
  if (stat.isSocket()) return "socket";
  return "device";
}

/** "/proc/self/fd/<fd>/<name>" as a string, or a Buffer when the raw name is not UTF-8. */
export function atPath(dirFd: number, name: string | Buffer): string | Buffer {
  if (typeof name === "string") return `/proc/self/fd/${dirFd}/${name}`;
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dirFd}/`), name]);
}

/** Opens a directory relative to a directory fd, never following a symlink. */
export function openDirAt(dirFd: number, name: string | Buffer): number {
  return fs.openSync(atPath(dirFd, name), DIR_FLAGS);
}

/** Opens the root of a walk: a real directory, not a symlink to one. */
export function openRoot(root: string | Buffer): number {
  return fs.openSync(root, DIR_FLAGS);
}

/** Whether a directory's child names look like a git directory (what git itself checks, by name). */
export function looksLikeGitDir(names: readonly string[]): boolean {
  const set = new Set(names);
  return set.has("HEAD") && ((set.has("objects") && set.has("refs")) || set.has("commondir"));
}

/**
 * The order of a walk: component by component, names by UTF-16 code units. ("a/b" comes
 * before "a-c", because "a" comes before "a-c".)
 */
export function comparePaths(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x === 47) return -1; // "/" sorts before any character of a name
    if (y === 47) return 1;
    return x - y;
  }
  return a.length - b.length;
}

function readNames(fd: number): { names: string[]; raw?: Map<number, Buffer> } {
  const dir = `/proc/self/fd/${fd}`;
  const names = fs.readdirSync(dir);
  names.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  // Node decodes names as UTF-8 and replaces what is not with U+FFFD: only then read raw bytes.
  if (!names.some((n) => n.includes("\uFFFD"))) return { names };
  const decoded = fs
    .readdirSync(dir, { encoding: "buffer" })
    .map((raw) => ({ name: raw.toString("utf8"), raw }))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  const raw = new Map<number, Buffer>();
  decoded.forEach((d, i) => {
    if (d.name.includes("\uFFFD") && !Buffer.from(d.name, "utf8").equals(d.raw)) raw.set(i, d.raw);
  });
  return { names: decoded.map((d) => d.name), raw };
}

/**
 * Walks `root` (a canonical path to a real directory), yielding the root ("") and then every
 * entry below it. Throws WalkError only when the root itself cannot be opened or the tree
 * moved under the walk (a climb back through ".." found another directory).
 */
// One generator on purpose: its stack of open directory fds must live in one frame, so that its
// finally closes every fd whether the caller finishes, breaks or throws.
export function* walkTree(root: string | Buffer, options: WalkOptions = {}): Generator<WalkEntry> {
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const descend = (entry: WalkEntry) => (options.descend ? options.descend(entry) : !entry.problem);
  let rootFd: number;
  try {
    rootFd = openRoot(root);
  } catch (error) {
    throw new WalkError(`cannot open ${String(root)} as a directory: ${errorCode(error)}`);
  }
  const stack: Frame[] = [];
  /** Frames below this index have their fd closed (the window). */
  let firstOpen = 0;
  try {
    const rootStat = fs.fstatSync(rootFd);
    const listed = tryList(rootFd, options.repairAccess);
    const rootEntry: WalkEntry = {
      path: "",
      name: "",
      depth: 0,
      kind: "directory",
      stat: rootStat,
      at: root,
      fd: rootFd,
      gitLike: listed.names ? looksLikeGitDir(listed.names) : undefined,
      problem: listed.problem,
    };
    stack.push(frameOf(rootFd, "", 0, root, listed, rootStat));
    yield rootEntry;
    if (!listed.names || !descend(rootEntry)) stack[0]!.descended = false;

    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (!top.descended || top.index >= top.names.length) {
        firstOpen = climb(stack, firstOpen, options);
        continue;
      }
      const i = top.index++;
      const name = top.names[i]!;
      const rawName = top.raw?.get(i);
      const path = top.path === "" ? name : `${top.path}/${name}`;
      const at = atPath(top.fd, rawName ?? name);
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(at);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") continue; // gone: nothing to see
        yield { path, name, depth: top.depth + 1, kind: "unknown", at, problem: `cannot lstat: ${errorCode(error)}` };
        continue;
      }
      const kind = kindOf(stat);
      const entry: WalkEntry = { path, name, depth: top.depth + 1, kind, stat, at };
      if (rawName) entry.problem = "its name is not valid UTF-8";
      if (kind !== "directory") {
        yield entry;
        continue;
      }
      if (entry.depth > maxDepth) {
        entry.problem = `deeper than ${maxDepth} levels`;
        yield entry;
        continue;
      }
      let fd: number;
      try {
        fd = openDirectory(at, options.repairAccess);
      } catch (error) {
        entry.problem ??= `cannot open the directory: ${errorCode(error)}`;
        yield entry;
        continue;
      }
      const opened = fs.fstatSync(fd);
      if (opened.ino !== stat.ino || opened.dev !== stat.dev) {
        fs.closeSync(fd);
        entry.problem ??= "it changed while being walked";
        yield entry;
        continue;
      }
      // Removing needs to list (r), reach (x) and unlink in (w) the directory.
      if (options.repairAccess && (opened.mode & 0o700) !== 0o700) fs.fchmodSync(fd, 0o700);
      const childListed = tryList(fd, options.repairAccess);
      entry.fd = fd;
      entry.gitLike = childListed.names ? looksLikeGitDir(childListed.names) : undefined;
      entry.problem ??= childListed.problem;
      // Pushed before the yield, so the fd is closed even if the consumer stops here.
      stack.push(frameOf(fd, path, entry.depth, rawName ?? name, childListed, opened));
      yield entry;
      if (!childListed.names || !descend(entry)) stack[stack.length - 1]!.descended = false;
      if (stack.length - firstOpen > OPEN_FD_WINDOW) {
        const oldest = stack[firstOpen]!;
        fs.closeSync(oldest.fd);
        oldest.fd = -1;
        firstOpen++;
      }
    }
  } finally {
    for (const frame of stack) if (frame.fd >= 0) fs.closeSync(frame.fd);
  }
}

function frameOf(
  fd: number,
  path: string,
  depth: number,
  name: string | Buffer,
  listed: { names?: string[]; raw?: Map<number, Buffer> },
  stat: fs.Stats,
): Frame {
  const names = listed.names ?? [];
  return { fd, path, depth, name, names, raw: listed.raw, index: 0, dev: stat.dev, ino: stat.ino, descended: true };
}

function tryList(fd: number, repair = false): { names?: string[]; raw?: Map<number, Buffer>; problem?: string } {
  try {
    return readNames(fd);
  } catch (error) {
    if (repair && errorCode(error) === "EACCES") {
      try {
        fs.fchmodSync(fd, 0o700);
        return readNames(fd);
      } catch {}
    }
    return { problem: `cannot list the directory: ${errorCode(error)}` };
  }
}

function openDirectory(at: string | Buffer, repair = false): number {
  try {
    return fs.openSync(at, DIR_FLAGS);
  } catch (error) {
    if (!repair || errorCode(error) !== "EACCES") throw error;
    // lstat just said it is a directory, and nothing else moves the tree now.
    fs.chmodSync(at, 0o700);
    return fs.openSync(at, DIR_FLAGS);
  }
}

/**
 * Pops the top frame: reopens its parent through ".." if the window closed it (checked by
 * dev/ino), calls leave, closes it. Returns the new first open index.
 */
function climb(stack: Frame[], firstOpen: number, options: WalkOptions): number {
  const done = stack.pop()!;
  const parentIndex = stack.length - 1;
  const parent = stack[parentIndex];
  try {
    if (parent && parent.fd < 0) {
      const fd = fs.openSync(`/proc/self/fd/${done.fd}/..`, DIR_FLAGS);
      const stat = fs.fstatSync(fd);
      if (stat.dev !== parent.dev || stat.ino !== parent.ino) {
        fs.closeSync(fd);
        throw new WalkError(`the tree moved while it was walked (at ${parent.path || "."})`);
      }
      parent.fd = fd;
      firstOpen = parentIndex;
    }
    if (parent && done.descended && options.leave)
      options.leave({ path: done.path, at: atPath(parent.fd, done.name), fd: done.fd });
  } finally {
    fs.closeSync(done.fd);
    done.fd = -1;
  }
  return firstOpen;
}

export function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error);
}

/** Entries handled between yields to the event loop (~1-2 ms of work). */
export const YIELD_EVERY = 512;

/** Lets other work in this process (other runs' event streams) through during a long walk. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
