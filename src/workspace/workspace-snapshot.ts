// What a run changed on the host: a snapshot of a directory tree before the run and a diff
// against the tree after it. The container is stopped when the second pass runs, so nothing
// moves under our feet.
//
// Per entry we keep size, mtime, ctime, mode and inode, and a content hash for small regular
// files. A change is judged by content where both sides have a hash (so `git checkout` of an
// identical file is not a change, and a write that keeps size and mtime is), and by metadata
// where they do not. ctime is in the metadata on purpose: the sandbox can reset mtime with
// `touch -d`, but any write or utimes call moves ctime, which user space cannot set back.
// Bulky trees whose files are written once and named by content (.git/objects, node_modules)
// are compared by metadata only: hashing them on every run would cost seconds for nothing.
import crypto from "node:crypto";
import type { Dirent, Stats } from "node:fs";
import fsSync from "node:fs";
import path from "node:path";

export interface EntryState {
  kind: "file" | "symlink" | "other";
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  /** Permission and type bits (st_mode). */
  mode: number;
  ino: number;
  /** sha256 of a small regular file's content, or a symlink's target. */
  hash?: string;
}

/** Relative path (with "/") -> state, for every non-directory entry below the root. */
export type Snapshot = Map<string, EntryState>;

export interface ChangedFiles {
  created: string[];
  modified: string[];
  deleted: string[];
}

export interface SnapshotOptions {
  /** Regular files up to this size get a content hash; default 1 MiB. */
  hashMaxBytes?: number;
  /** Relative paths whose content is never hashed (metadata only). */
  skipHash?: (relativePath: string) => boolean;
  /** The snapshot this one will be compared with: unchanged metadata reuses its hash. */
  previous?: Snapshot;
}

export const DEFAULT_HASH_MAX_BYTES = 1024 * 1024;

/** .git/objects, .git/lfs and node_modules anywhere: metadata is enough there. */
export function defaultSkipHash(relativePath: string): boolean {
  return /^\.git\/(objects|lfs)\//.test(relativePath) || /(^|\/)node_modules\//.test(relativePath);
}

/** How many files are hashed or stat'ed at once. */
/** Entries handled between yields to the event loop (~1-2 ms of work). */
const YIELD_EVERY = 256;

export async function takeSnapshot(root: string, options: SnapshotOptions = {}): Promise<Snapshot> {
  const hashMaxBytes = options.hashMaxBytes ?? DEFAULT_HASH_MAX_BYTES;
  const skipHash = options.skipHash ?? defaultSkipHash;
  const snapshot: Snapshot = new Map();
  const directories = [""];
  let sinceYield = 0;
  while (directories.length > 0) {
    const dir = directories.pop()!;
    let entries: Dirent[];
    try {
      entries = fsSync.readdirSync(path.join(root, dir), { withFileTypes: true });
    } catch {
      continue; // gone or unreadable: nothing we can compare
    }
    for (const entry of entries) {
      const rel = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        directories.push(rel);
        continue;
      }
      const state = entryState(root, rel, { hashMaxBytes, skipHash, previous: options.previous?.get(rel) });
      if (state) snapshot.set(rel, state);
      // Synchronous calls are several times cheaper than promise-based ones per file; yielding
      // now and then keeps other runs in this process (their event streams) flowing.
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }
  return snapshot;
}

function entryState(
  root: string,
  rel: string,
  options: { hashMaxBytes: number; skipHash: (rel: string) => boolean; previous?: EntryState },
): EntryState | undefined {
  const absolute = path.join(root, rel);
  let stat: Stats;
  try {
    stat = fsSync.lstatSync(absolute);
  } catch {
    return undefined;
  }
  if (stat.isDirectory()) return undefined; // a race with a rename; directories are walked, not recorded
  const kind = stat.isFile() ? "file" : stat.isSymbolicLink() ? "symlink" : "other";
  const state: EntryState = {
    kind,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
    ctimeMs: stat.ctimeMs,
    mode: stat.mode,
    ino: stat.ino,
  };
  const prev = options.previous;
  if (prev && prev.hash !== undefined && sameMetadata(prev, state)) {
    state.hash = prev.hash; // untouched since the first pass: no need to read it again
  } else if (kind === "symlink") {
    state.hash = tryOrUndefined(() => fsSync.readlinkSync(absolute));
  } else if (kind === "file" && stat.size <= options.hashMaxBytes && !options.skipHash(rel)) {
    state.hash = hashFile(absolute);
  }
  return state;
}

function tryOrUndefined<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

function hashFile(file: string): string | undefined {
  // Unreadable for this user: metadata decides.
  return tryOrUndefined(() => crypto.createHash("sha256").update(fsSync.readFileSync(file)).digest("hex"));
}

function sameMetadata(a: EntryState, b: EntryState): boolean {
  return (
    a.kind === b.kind &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ctimeMs === b.ctimeMs &&
    a.ino === b.ino &&
    a.mode === b.mode
  );
}

/** Whether an entry that exists on both sides changed. */
export function entryChanged(before: EntryState, after: EntryState): boolean {
  if (before.kind !== after.kind || before.mode !== after.mode) return true;
  if (before.kind === "file" && before.size !== after.size) return true;
  if (before.hash !== undefined && after.hash !== undefined) return before.hash !== after.hash;
  return !sameMetadata(before, after);
}

export function diffSnapshots(before: Snapshot, after: Snapshot): ChangedFiles {
  const created: string[] = [];
  const modified: string[] = [];
  const deleted: string[] = [];
  for (const [rel, state] of after) {
    const old = before.get(rel);
    if (!old) created.push(rel);
    else if (entryChanged(old, state)) modified.push(rel);
  }
  for (const rel of before.keys()) if (!after.has(rel)) deleted.push(rel);
  return { created: created.sort(), modified: modified.sort(), deleted: deleted.sort() };
}
