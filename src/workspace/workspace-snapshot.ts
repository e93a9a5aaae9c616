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
import fs from "node:fs/promises";
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
const PARALLEL = 16;

export async function takeSnapshot(root: string, options: SnapshotOptions = {}): Promise<Snapshot> {
  const hashMaxBytes = options.hashMaxBytes ?? DEFAULT_HASH_MAX_BYTES;
  const skipHash = options.skipHash ?? defaultSkipHash;
  const snapshot: Snapshot = new Map();
  const directories = [""];
  while (directories.length > 0) {
    const dir = directories.pop()!;
    let entries: Dirent[];
    try {
      entries = await fs.readdir(path.join(root, dir), { withFileTypes: true });
    } catch {
      continue; // gone or unreadable: nothing we can compare
    }
    const files: string[] = [];
    for (const entry of entries) {
      const rel = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) directories.push(rel);
      else files.push(rel);
    }
    for (let i = 0; i < files.length; i += PARALLEL) {
      await Promise.all(
        files.slice(i, i + PARALLEL).map(async (rel) => {
          const state = await entryState(root, rel, { hashMaxBytes, skipHash, previous: options.previous?.get(rel) });
          if (state) snapshot.set(rel, state);
        }),
      );
    }
  }
  return snapshot;
}

async function entryState(
  root: string,
  rel: string,
  options: { hashMaxBytes: number; skipHash: (rel: string) => boolean; previous?: EntryState },
): Promise<EntryState | undefined> {
  const absolute = path.join(root, rel);
  let stat: Stats;
  try {
    stat = await fs.lstat(absolute);
  } catch {
    return undefined;
  }
  if (stat.isDirectory()) return undefined; // a race with a rename; directories are walked, not recorded
  const kind = stat.isFile() ? "file" : stat.isSymbolicLink() ? "symlink" : "other";
  const state: EntryState = { kind, size: stat.size, mtimeMs: stat.mtimeMs, ctimeMs: stat.ctimeMs, mode: stat.mode, ino: stat.ino };
  const prev = options.previous;
  if (prev && prev.hash !== undefined && sameMetadata(prev, state)) {
    state.hash = prev.hash; // untouched since the first pass: no need to read it again
  } else if (kind === "symlink") {
    state.hash = await fs.readlink(absolute).catch(() => undefined);
  } else if (kind === "file" && stat.size <= options.hashMaxBytes && !options.skipHash(rel)) {
    state.hash = await hashFile(absolute);
  }
  return state;
}

function hashFile(file: string): Promise<string | undefined> {
  return fs
    .readFile(file)
    .then((data) => crypto.createHash("sha256").update(data).digest("hex"))
    .catch(() => undefined); // unreadable for this user: metadata decides
}

function sameMetadata(a: EntryState, b: EntryState): boolean {
  return a.kind === b.kind && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs && a.ino === b.ino && a.mode === b.mode;
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
