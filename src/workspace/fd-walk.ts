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
// - memory is bounded: nothing is kept per entry, and the names of the directories open at once
//   (the path from the root to where the walk is) are held up to `maxHeldNames` in all. A
//   directory whose names would pass that is read as a stream and never held: the sandbox can make
//   millions of names for free (hard links use no inode; only their directory's blocks count
//   against the disk limit), and one such folder read whole and sorted used to take the controller
//   past Node's heap. In the sorted order (the default) such a directory is yielded with
//   `overfull` and a problem, and not walked; in order "any" its entries are visited as the
//   filesystem lists them, and past MAX_STREAMED such folders open at once the shallowest is paused
//   (dir-stream.ts) and resumed when the walk climbs back to it: depth costs neither fds nor
//   completeness (review, session 38: past 256 the next one was left unwalked);
// - an entry the walk cannot see through (unreadable directory, a name that is not UTF-8, a tree
//   deeper than `maxDepth`) is yielded with a `problem`, never skipped.
// At most OPEN_FD_WINDOW directory fds are held; deeper ones are reopened through ".." when the
// walk climbs back, checked by (dev, ino), so depth costs neither fds nor correctness.
import fs from "node:fs";
import { decodeName, hasUndecodedBytes, nameBytes } from "../util/name-bytes.js";
import { O_PATH } from "../util/o-path.js";
import { foldCase } from "./builtin-protections.js";
import { DirStream } from "./dir-stream.js";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const OPEN_FD_WINDOW = 64;
const DEFAULT_MAX_DEPTH = 4096;
/**
 * Names a walk holds at once unless told otherwise: about 140 MB with the longest names (255
 * bytes), a tenth of that with ordinary ones. Walks of the caller's own tree before a run pass
 * Infinity (its size is the caller's); walks of what a sandbox left pass a bound derived from it.
 */
const DEFAULT_MAX_HELD_NAMES = 500_000;
/** The same for walks in any order: they stream what they cannot hold, so they hold little. */
const DEFAULT_MAX_HELD_NAMES_ANY_ORDER = 65_536;
/** Directories read as a stream at once (each keeps two fds open); past it the shallowest is paused. */
const MAX_STREAMED = 256;
/** Directory entries read per getdents call. */
const DIR_BUFFER = 256;

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
  /**
   * Directories: it was swapped between its lstat and its open (now a symlink, not a directory,
   * or another inode): it has a problem and is not walked.
   */
  changed?: boolean;
  /**
   * Directories: it holds more names than the walk could hold (at least this many). In the
   * sorted order it is not walked (and has a problem); in order "any" its entries are streamed.
   */
  overfull?: number;
  /**
   * Directories: what is below it was not (all) walked, whatever `descend` said: it could not be
   * opened or read, it changed, or it lies deeper than maxDepth (`problem` says which). A streamed
   * directory whose walk could not go on is yielded a second time with this.
   */
  unwalked?: true;
}

/** What a walk saw, filled in as it goes. */
export interface WalkStats {
  /** The most names the walk held at once (the open directories' listings together). */
  peakHeldNames: number;
}

interface WalkOptions {
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
  /**
   * Names held at once, all open directories together (default DEFAULT_MAX_HELD_NAMES, in any
   * order DEFAULT_MAX_HELD_NAMES_ANY_ORDER). A directory whose names would pass it is `overfull`.
   */
  maxHeldNames?: number;
  /**
   * "sorted" (default): children by name, the order comparePaths defines (what a merge with a
   * snapshot needs); an overfull directory is yielded with a problem and not walked. "any": an
   * overfull directory's entries come as the filesystem lists them, none held (for walks that
   * visit every entry and need no order: hand-back, removal, counting).
   */
  order?: "sorted" | "any";
  /** Filled in as the walk goes. */
  stats?: WalkStats;
  /** Streams open at once (order "any"; default MAX_STREAMED): past it the shallowest is paused. */
  maxStreams?: number;
  /**
   * The caller removes every entry it is given (order "any"): a paused stream resumes at its first
   * name, since what it read is gone, instead of after the names it read.
   */
  removes?: boolean;
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
  /** An overfull directory read as a stream (order "any"): no names are held; its fd stays open unless paused. */
  stream?: DirStream;
  index: number;
  dev: number;
  ino: number;
  descended: boolean;
}

export class WalkError extends Error {}

/** The problem of an entry whose name is not valid UTF-8 (its `path` holds the bad bytes escaped: util/name-bytes.ts). */
export const NOT_UTF8 = "its name is not valid UTF-8";

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
  // A walked name that is not UTF-8 holds its bad bytes escaped (util/name-bytes.ts): the syscall
  // gets the bytes, never the U+FFFD Node would encode in their place (another file's name).
  const bytes = typeof name === "string" ? nameBytes(name) : name;
  if (typeof bytes === "string") return `/proc/self/fd/${dirFd}/${bytes}`;
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dirFd}/`), bytes]);
}

/** The directory fd an atPath() path resolves its name in (an entry's folder, as the walk holds it). */
export function folderFdOf(at: string | Buffer): number {
  const head = typeof at === "string" ? at : at.subarray(0, 40).toString("latin1");
  const match = /^\/proc\/self\/fd\/(\d+)\//.exec(head);
  if (!match) throw new WalkError("not a path below a directory fd");
  return Number(match[1]);
}

/**
 * atPath for a name that is UTF-8 by construction (copy mode's apply: a returned tar's names, whose
 * others were refused, and the host tree's, whose others were never sent): one that is not throws.
 */
export function atTextPath(dirFd: number, name: string): string {
  if (hasUndecodedBytes(name)) throw new WalkError("a name that is not UTF-8 reached a step that names it as text");
  return `/proc/self/fd/${dirFd}/${name}`;
}

/** Opens a directory relative to a directory fd, never following a symlink. */
export function openDirAt(dirFd: number, name: string | Buffer): number {
  return fs.openSync(atPath(dirFd, name), DIR_FLAGS);
}

/** Opens the root of a walk: a real directory, not a symlink to one. */
export function openRoot(root: string | Buffer): number {
  return fs.openSync(root, DIR_FLAGS);
}

/**
 * Whether a directory's child names look like a git directory (what git itself checks, by name),
 * in any case: a tree checked out on a case-insensitive disk (a branch or patch on macOS or
 * Windows) makes `head`, `OBJECTS` and `Refs` the names git looks up (review, session 35: such a
 * folder with a `config` naming core.pager ran it at the user's next `git branch` there).
 */
export function looksLikeGitDir(names: readonly string[]): boolean {
  const set = new Set(names.map(foldCase));
  return set.has("head") && ((set.has("objects") && set.has("refs")) || set.has("commondir"));
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

type Listing = { names: string[]; raw?: Map<number, Buffer> } | { overfull: number };

/**
 * A directory's names, sorted, read as a stream that stops past `cap` names (then only how many
 * were read is returned: the directory is overfull). A large directory is counted before its names
 * are kept: the names of one the walk cannot hold are never all in memory at once.
 */
function readNames(fd: number, cap: number): Listing {
  const first = listNames(fd, Math.min(cap, KEEP_WHILE_COUNTING));
  if (first.complete) return sortedListing(fd, first.names, first.undecodable, cap);
  if (cap <= KEEP_WHILE_COUNTING) return { overfull: cap + 1 };
  // More than a few thousand: count first, then read them again only if they fit.
  const counted = countNames(fd, cap);
  if (counted > cap) return { overfull: counted };
  const again = listNames(fd, cap);
  if (!again.complete) return { overfull: cap + 1 };
  return sortedListing(fd, again.names, again.undecodable, cap);
}

/** Names kept while a directory is read the first time; past this it is counted before it is kept. */
const KEEP_WHILE_COUNTING = 4096;

/** Up to `max` names (complete: the directory has no more). */
function listNames(fd: number, max: number): { names: string[]; complete: boolean; undecodable: boolean } {
  const names: string[] = [];
  let undecodable = false;
  const dir = fs.opendirSync(`/proc/self/fd/${fd}`, { bufferSize: DIR_BUFFER });
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (names.length >= max) return { names, complete: false, undecodable };
      names.push(entry.name);
      // Node decodes names as UTF-8 and replaces what is not with U+FFFD: only then read raw bytes.
      if (!undecodable && entry.name.includes("\uFFFD")) undecodable = true;
    }
  } finally {
    dir.closeSync();
  }
  return { names, complete: true, undecodable };
}

/** How many entries a directory has, up to cap + 1. */
function countNames(fd: number, cap: number): number {
  let count = 0;
  const dir = fs.opendirSync(`/proc/self/fd/${fd}`, { bufferSize: DIR_BUFFER });
  try {
    while (count <= cap && dir.readSync() !== null) count++;
  } finally {
    dir.closeSync();
  }
  return count;
}

function sortedListing(fd: number, names: string[], undecodable: boolean, cap: number): Listing {
  names.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  if (!undecodable) return { names };
  const decoded: Array<{ name: string; raw: Buffer | undefined }> = [];
  const rawDir = fs.opendirSync(`/proc/self/fd/${fd}`, {
    bufferSize: DIR_BUFFER,
    encoding: "buffer" as BufferEncoding,
  });
  try {
    for (let entry = rawDir.readSync(); entry !== null; entry = rawDir.readSync()) {
      if (decoded.length >= cap) return { overfull: decoded.length + 1 };
      const raw = entry.name as unknown as Buffer;
      const { name, exact } = decodeName(raw);
      decoded.push({ name, raw: exact ? undefined : raw });
    }
  } finally {
    rawDir.closeSync();
  }
  decoded.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  const raw = new Map<number, Buffer>();
  decoded.forEach((d, i) => {
    if (d.raw) raw.set(i, d.raw);
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
  const streaming = options.order === "any";
  const maxHeld = options.maxHeldNames ?? (streaming ? DEFAULT_MAX_HELD_NAMES_ANY_ORDER : DEFAULT_MAX_HELD_NAMES);
  const descend = (entry: WalkEntry) => (options.descend ? options.descend(entry) : !entry.problem);
  const repair = options.repairAccess === true;
  let rootFd: number;
  try {
    rootFd = openRoot(root);
  } catch (error) {
    throw new WalkError(`cannot open ${String(root)} as a directory: ${errorCode(error)}`);
  }
  const stack: Frame[] = [];
  /** Frames below this index have their fd closed (the window), streamed ones excepted. */
  let firstOpen = 0;
  /** Names the frames hold, and the frames whose stream is open, shallowest first. */
  const load: Load = { held: 0, streams: [], firstStream: 0 };
  /** Pauses the shallowest open stream (closing its fd too where the window already would). */
  const pauseOne = () => {
    const frame = load.streams[load.firstStream++]!;
    frame.stream!.pause(frame.fd);
    if (frame.depth < firstOpen) {
      fs.closeSync(frame.fd);
      frame.fd = -1;
    }
    if (load.firstStream > 1024 && load.firstStream * 2 > load.streams.length) {
      load.streams = load.streams.slice(load.firstStream);
      load.firstStream = 0;
    }
  };
  const maxStreams = Math.max(1, options.maxStreams ?? MAX_STREAMED);
  const openStream = (fd: number): DirStream => {
    if (load.streams.length - load.firstStream >= maxStreams) pauseOne();
    return new DirStream(fd);
  };
  /** Lists a directory within what the walk may still hold; overfull in order "any": as a stream. */
  const list = (fd: number, entry: WalkEntry): ListResult => {
    const listed = tryList(fd, Math.max(0, maxHeld - load.held), repair);
    if ("problem" in listed) return listed;
    // Listed, yet its names may not be reachable: a folder left 0444 or 0600 (review, session 38).
    const unsearchable = ("overfull" in listed || listed.names.length > 0) && searchProblem(fd, repair);
    if (unsearchable) return { problem: unsearchable };
    if (!("overfull" in listed)) return listed;
    entry.overfull = listed.overfull;
    if (streaming) {
      try {
        return { stream: openStream(fd) };
      } catch (error) {
        return { problem: listProblem(error) };
      }
    }
    return {
      problem: `it holds more entries than the walk can read (over ${listed.overfull - 1}, more than a walk holds at once)`,
    };
  };
  /** Opens a paused stream again (its frame is the top); the walk's problem entry if it cannot go on. */
  const resume = (frame: Frame): WalkEntry | undefined => {
    if (load.streams.length - load.firstStream >= maxStreams) pauseOne();
    const problem = frame.stream!.resume(frame.fd, options.removes === true);
    if (!problem) {
      load.streams.push(frame);
      return undefined;
    }
    frame.descended = false;
    const name = frame.path.slice(frame.path.lastIndexOf("/") + 1);
    // The directory itself, through its own fd (checked by dev/ino when it was opened or reopened).
    const at = `/proc/self/fd/${frame.fd}/.`;
    return {
      path: frame.path,
      name,
      depth: frame.depth,
      kind: "directory",
      stat: fs.fstatSync(frame.fd),
      at,
      problem,
      unwalked: true,
    };
  };
  try {
    const rootStat = fs.fstatSync(rootFd);
    const rootEntry: WalkEntry = {
      path: "",
      name: "",
      depth: 0,
      kind: "directory",
      stat: rootStat,
      at: root,
      fd: rootFd,
    };
    const listed = list(rootFd, rootEntry);
    rootEntry.gitLike = listed.names ? looksLikeGitDir(listed.names) : undefined;
    rootEntry.problem = listed.problem;
    if (listed.problem) rootEntry.unwalked = true;
    stack.push(frameOf(rootFd, "", 0, root, listed, rootStat, load, options.stats));
    yield rootEntry;
    if (!canDescend(listed) || !descend(rootEntry)) stack[0]!.descended = false;

    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.descended && top.stream?.paused) {
        const stuck = resume(top);
        if (stuck) {
          yield stuck;
          continue;
        }
      }
      const next = top.descended ? nextName(top) : undefined;
      if (!next) {
        firstOpen = climb(stack, firstOpen, options, load);
        continue;
      }
      const { name, raw: rawName } = next;
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
      if (rawName) entry.problem = NOT_UTF8;
      if (kind !== "directory") {
        yield entry;
        continue;
      }
      if (entry.depth > maxDepth) {
        entry.problem = `deeper than ${maxDepth} levels`;
        entry.unwalked = true;
        yield entry;
        continue;
      }
      let fd: number;
      try {
        fd = openDirectory(at, repair);
      } catch (error) {
        const code = errorCode(error);
        if (code === "ELOOP" || code === "ENOTDIR") entry.changed = true;
        entry.problem ??= `cannot open the directory: ${code}`;
        entry.unwalked = true;
        yield entry;
        continue;
      }
      const opened = fs.fstatSync(fd);
      if (opened.ino !== stat.ino || opened.dev !== stat.dev) {
        fs.closeSync(fd);
        entry.changed = true;
        entry.problem ??= "it changed while being walked";
        entry.unwalked = true;
        yield entry;
        continue;
      }
      // Removing needs to list (r), reach (x) and unlink in (w) the directory.
      if (options.repairAccess && (opened.mode & 0o700) !== 0o700) fs.fchmodSync(fd, 0o700);
      const childListed = list(fd, entry);
      entry.fd = fd;
      entry.gitLike = childListed.names ? looksLikeGitDir(childListed.names) : undefined;
      entry.problem ??= childListed.problem;
      if (childListed.problem) entry.unwalked = true;
      // Pushed before the yield, so the fd is closed even if the consumer stops here.
      stack.push(frameOf(fd, path, entry.depth, rawName ?? name, childListed, opened, load, options.stats));
      yield entry;
      if (!canDescend(childListed) || !descend(entry)) stack[stack.length - 1]!.descended = false;
      if (stack.length - firstOpen > OPEN_FD_WINDOW) {
        // A streamed directory keeps its fd while its stream is open (the stream reads through it).
        const oldest = stack[firstOpen]!;
        if (oldest.fd >= 0 && (!oldest.stream || oldest.stream.paused)) {
          fs.closeSync(oldest.fd);
          oldest.fd = -1;
        }
        firstOpen++;
      }
    }
  } finally {
    for (const frame of stack) {
      frame.stream?.close();
      if (frame.fd >= 0) fs.closeSync(frame.fd);
    }
  }
}

interface Load {
  held: number;
  /** Frames whose stream is open, shallowest first, from `firstStream` on (the ones before were paused). */
  streams: Frame[];
  firstStream: number;
}

type ListResult = { names?: string[]; raw?: Map<number, Buffer>; stream?: DirStream; problem?: string };

const canDescend = (listed: ListResult) => listed.names !== undefined || listed.stream !== undefined;

function nextName(frame: Frame): { name: string; raw?: Buffer } | undefined {
  if (frame.stream) return frame.stream.next();
  if (frame.index >= frame.names.length) return undefined;
  const i = frame.index++;
  return { name: frame.names[i]!, raw: frame.raw?.get(i) };
}

function frameOf(
  fd: number,
  path: string,
  depth: number,
  name: string | Buffer,
  listed: ListResult,
  stat: fs.Stats,
  load: Load,
  stats: WalkStats | undefined,
): Frame {
  const names = listed.names ?? [];
  load.held += names.length;
  if (stats && load.held > stats.peakHeldNames) stats.peakHeldNames = load.held;
  const frame: Frame = {
    fd,
    path,
    depth,
    name,
    names,
    raw: listed.raw,
    stream: listed.stream,
    index: 0,
    dev: stat.dev,
    ino: stat.ino,
    descended: true,
  };
  if (listed.stream) load.streams.push(frame);
  return frame;
}

function tryList(fd: number, cap: number, repair: boolean): Listing | { problem: string } {
  try {
    return readNames(fd, cap);
  } catch (error) {
    if (repair && errorCode(error) === "EACCES") {
      try {
        fs.fchmodSync(fd, 0o700);
        return readNames(fd, cap);
      } catch {}
    }
    return { problem: listProblem(error) };
  }
}

/**
 * Why the names of the directory `fd` holds cannot be reached (no search permission: its
 * children's lstat would fail), or undefined. Resolving "." inside it asks the kernel itself, so
 * ACLs and capabilities count as they do for the walk.
 */
function searchProblem(fd: number, repair: boolean): string | undefined {
  const probe = () => fs.statSync(`/proc/self/fd/${fd}/.`);
  try {
    probe();
    return undefined;
  } catch (error) {
    if (repair && errorCode(error) === "EACCES") {
      try {
        fs.fchmodSync(fd, 0o700);
        probe();
        return undefined;
      } catch {}
    }
    return `cannot search the directory: ${errorCode(error)}`;
  }
}

function openDirectory(at: string | Buffer, repair: boolean): number {
  try {
    return fs.openSync(at, DIR_FLAGS);
  } catch (error) {
    if (!repair || errorCode(error) !== "EACCES") throw error;
    chmodDirectory(at, 0o700);
    return fs.openSync(at, DIR_FLAGS);
  }
}

/**
 * Sets the mode of the directory at `at` (a name in a folder held by fd), never through a symlink:
 * opened O_PATH (no read permission needed) without following a link, then changed through that
 * fd. A chmod by name would follow a link swapped in since the lstat (a root caller's tree may hold
 * folders of other users, who can rename names in them).
 */
export function chmodDirectory(at: string | Buffer, mode: number): void {
  const fd = fs.openSync(at, O_PATH | fs.constants.O_DIRECTORY | O_NOFOLLOW);
  try {
    fs.chmodSync(`/proc/self/fd/${fd}`, mode);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Pops the top frame: reopens its parent through ".." if the window closed it (checked by
 * dev/ino), calls leave, closes it. Returns the new first open index.
 */
function climb(stack: Frame[], firstOpen: number, options: WalkOptions, load: Load): number {
  const done = stack.pop()!;
  load.held -= done.names.length;
  if (done.stream) {
    // The deepest open stream, if its own is open: the last in the list.
    if (!done.stream.paused) load.streams.pop();
    done.stream.close();
    done.stream = undefined;
  }
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
  return Math.min(firstOpen, stack.length);
}

export function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error);
}

/** Entries handled between yields to the event loop (~1-2 ms of work). */
export const YIELD_EVERY = 512;

// Lets other work in this process (other runs' event streams) through during a long walk.
export { yieldToEventLoop } from "../util/stepwise.js";

/** Why a directory could not be listed; running out of fds is the host's limit, and said so. */
function listProblem(error: unknown): string {
  const code = errorCode(error);
  if (code === "EMFILE" || code === "ENFILE")
    return `cannot list the directory: ${code}, too many open files (raise the limit: \`ulimit -n 4096\`)`;
  return `cannot list the directory: ${code}`;
}
