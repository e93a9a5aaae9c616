// What a run changed on the host: a snapshot of a tree before the run (streamed to a file in
// the run's private folder, see snapshot-record.ts) and a merge of it with a walk of the tree
// after the run. The container is stopped when the second walk runs. Both walks go through
// directory fds (fd-walk.ts): no symlink is followed, depth and size cost no memory.
//
// Per entry we keep size, mtime, ctime, mode and inode, and a content hash for small regular
// files. A change is judged by content where both sides have a hash (so `git checkout` of an
// identical file is not a change, and a write that keeps size and mtime is), and by metadata
// where they do not. ctime is in the metadata on purpose: the sandbox can reset mtime with
// `touch -d`, but any write or utimes call moves ctime, which user space cannot set back.
// Bulky trees whose files are written once and named by content (.git/objects, node_modules)
// are compared by metadata only: hashing them on every run would cost seconds for nothing.
// So are sparse files: a run can leave thousands for free (`truncate -s 1M`), and hashing their
// zeros would cost every later run their apparent size (protected ones are still hashed: their
// kept copy reads them, see onEntry).
import crypto from "node:crypto";
import fs from "node:fs";
import { comparePaths, type WalkEntry, type WalkStats, walkTree, YIELD_EVERY, yieldToEventLoop } from "./fd-walk.js";
import { SnapshotReader, SnapshotWriter } from "./snapshot-record.js";
import { type EntryFacts, type EntryPair, sameMetadata } from "./workspace-rules.js";

export interface ChangedFiles {
  created: string[];
  modified: string[];
  deleted: string[];
  /** Present when the lists were cut (MAX_LISTED_CHANGES each, MAX_LISTED_CHANGE_BYTES of paths in all): the full counts. */
  truncated?: { created: number; modified: number; deleted: number };
}

const DEFAULT_HASH_MAX_BYTES = 1024 * 1024;
/**
 * Names the walk before the run may hold at once (the caller's own tree: a folder of two million
 * entries is walked; a larger one stops the run from starting, with a message, instead of taking
 * the controller's memory).
 */
const SNAPSHOT_MAX_HELD_NAMES = 2_000_000;
/** Each changedFiles list names at most this many paths; the counts stay exact. */
const MAX_LISTED_CHANGES = 10_000;

/** .git/objects, .git/lfs and node_modules anywhere: metadata is enough there. */
function defaultSkipHash(relativePath: string): boolean {
  return /(^|\/)\.git\/(objects|lfs)\//.test(relativePath) || /(^|\/)node_modules\//.test(relativePath);
}

/**
 * Whether a kept copy's hash of a regular file of this path and size can stand in for the
 * snapshot's (DiffOptions.keptHash, with the default hashMaxBytes): the walk before the run may
 * have left it without one (under node_modules or .git/objects, sparse, or larger than the
 * snapshot hashes). False only where the snapshot surely hashed it.
 */
export function keptHashWanted(relativePath: string, size: number): boolean {
  return defaultSkipHash(relativePath) || size > SPARSE_MIN_BYTES;
}

/** Below this size a file is never taken for sparse: small files may have no blocks at all (ext4 inline data, tmpfs). */
const SPARSE_MIN_BYTES = 64 * 1024;

/** Whether a file's allocated blocks hold well under half its apparent size: mostly holes, cheap to make, dear to read. */
export function isSparse(stat: Pick<fs.Stats, "size" | "blocks">): boolean {
  return stat.size > SPARSE_MIN_BYTES && stat.blocks * 512 < stat.size / 2;
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/** The walked inode opened for reading (no link followed, no FIFO waited on), or undefined. */
function openWalkedFile(at: string | Buffer, expected: fs.Stats): { fd: number; size: number } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.isFile() && stat.ino === expected.ino && stat.dev === expected.dev) return { fd, size: stat.size };
  } catch {}
  fs.closeSync(fd);
  return undefined;
}

/** One read buffer for hashing: the process is single-threaded and hashing never yields mid-file. */
let hashChunk: Buffer | undefined;

/**
 * sha256 of a regular file read through an O_NOFOLLOW fd that is checked to be the walked inode,
 * streamed in 1 MiB reads (a guarded file may be a 100 MB binary), or undefined past maxBytes.
 */
export function hashFileAt(at: string | Buffer, expected: fs.Stats, maxBytes: number): string | undefined {
  if (expected.size > maxBytes) return undefined;
  const file = openWalkedFile(at, expected);
  if (!file) return undefined;
  try {
    hashChunk ??= Buffer.allocUnsafe(1 << 20);
    const hash = crypto.createHash("sha256");
    let length = 0;
    for (;;) {
      const n = fs.readSync(file.fd, hashChunk, 0, hashChunk.length, null);
      if (n === 0) break;
      length += n;
      if (length > maxBytes) return undefined; // it grew: not what was stat'ed
      hash.update(hashChunk.subarray(0, n));
    }
    return hash.digest("hex");
  } catch {
    return undefined;
  } finally {
    fs.closeSync(file.fd);
  }
}

/** A regular file's content (at most maxBytes), or undefined if it cannot be read as that inode. */
export function readFileAt(at: string | Buffer, expected: fs.Stats, maxBytes: number): Buffer | undefined {
  if (expected.size > maxBytes) return undefined;
  const file = openWalkedFile(at, expected);
  if (!file) return undefined;
  try {
    const buffer = Buffer.allocUnsafe(Math.min(file.size, maxBytes) + 1);
    let length = 0;
    for (;;) {
      const n = fs.readSync(file.fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
      if (length > maxBytes) return undefined; // it grew: not what was stat'ed
    }
    return buffer.subarray(0, length);
  } catch {
    return undefined;
  } finally {
    fs.closeSync(file.fd);
  }
}

/** Facts of a walked entry, without a content hash. */
function baseFacts(entry: WalkEntry): EntryFacts {
  const s = entry.stat;
  const facts: EntryFacts = s
    ? {
        kind: entry.kind,
        mode: s.mode,
        size: s.size,
        mtimeMs: s.mtimeMs,
        ctimeMs: s.ctimeMs,
        ino: s.ino,
        nlink: s.nlink,
      }
    : { kind: "unknown", mode: 0, size: 0 };
  if (entry.gitLike) facts.gitLike = true;
  if (entry.problem) facts.problem = entry.problem;
  return facts;
}

function linkTarget(entry: WalkEntry): string | undefined {
  try {
    return fs.readlinkSync(entry.at, "utf8");
  } catch {
    return undefined;
  }
}

interface SnapshotOptions {
  /** Regular files up to this size get a content hash; default 1 MiB. */
  hashMaxBytes?: number;
  /** Relative paths whose content is never hashed (metadata only). */
  skipHash?: (relativePath: string) => boolean;
  /**
   * Sees every entry before it is recorded and may supply its content hash (the kept copy of
   * protected files reads them anyway).
   */
  onEntry?: (entry: WalkEntry) => string | undefined;
}

interface SnapshotSummary {
  entries: number;
  /** st_blocks * 512 over the tree, hard-linked inodes once. */
  allocatedBytes: number;
  /** Entries the walk could not see (at most 100 listed; `problemCount` counts all). */
  problems: Array<{ path: string; problem: string }>;
  problemCount: number;
  /** The most names the walk held at once (along one path of the tree): the after-walk's budget starts there. */
  peakHeldNames: number;
}

/** Walks `root` and writes its snapshot to `file` (created, 0600). */
export async function takeSnapshot(
  root: string,
  file: string,
  options: SnapshotOptions = {},
): Promise<SnapshotSummary> {
  const hashMaxBytes = options.hashMaxBytes ?? DEFAULT_HASH_MAX_BYTES;
  const skipHash = options.skipHash ?? defaultSkipHash;
  const writer = new SnapshotWriter(file);
  const summary: SnapshotSummary = { entries: 0, allocatedBytes: 0, problems: [], problemCount: 0, peakHeldNames: 0 };
  const bytes = new AllocatedBytes();
  const stats: WalkStats = { peakHeldNames: 0 };
  try {
    let sinceYield = 0;
    for (const entry of walkTree(root, { maxHeldNames: SNAPSHOT_MAX_HELD_NAMES, stats })) {
      const facts = baseFacts(entry);
      const supplied = options.onEntry?.(entry);
      if (supplied !== undefined) facts.hash = supplied;
      else if (entry.kind === "symlink") facts.hash = linkTarget(entry);
      else if (
        entry.kind === "file" &&
        entry.stat!.size <= hashMaxBytes &&
        !isSparse(entry.stat!) &&
        !skipHash(entry.path)
      )
        facts.hash = hashFileAt(entry.at, entry.stat!, hashMaxBytes);
      if (entry.problem) {
        summary.problemCount++;
        if (summary.problems.length < 100) summary.problems.push({ path: entry.path, problem: entry.problem });
      }
      bytes.add(entry);
      writer.write(entry.depth, entry.name, facts);
      summary.entries++;
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldToEventLoop();
      }
    }
  } finally {
    writer.close();
  }
  summary.allocatedBytes = bytes.total;
  summary.peakHeldNames = stats.peakHeldNames;
  return summary;
}

/** Sums allocated bytes, counting an inode with several links once. */
export class AllocatedBytes {
  total = 0;
  /** dev -> inodes with more than one link already counted. */
  private readonly linked = new Map<number, Set<number>>();
  add(entry: WalkEntry): void {
    const s = entry.stat;
    if (!s) return;
    if (s.nlink > 1 && entry.kind !== "directory") {
      let seen = this.linked.get(s.dev);
      if (!seen) this.linked.set(s.dev, (seen = new Set()));
      if (seen.has(s.ino)) return;
      seen.add(s.ino);
    }
    this.total += s.blocks * 512;
  }
}

/**
 * The most bytes of paths the lists hold in all: 1,300 paths 2,000 folders of 255-byte names deep
 * made a list no JSON string could hold, and a batch ended on it (review, session 45).
 */
export const MAX_LISTED_CHANGE_BYTES = 32 * 1024 * 1024;

/** Collects changed paths, each list capped (by count, and all of them by bytes), counts exact. */
export class ChangeCollector {
  private readonly lists: ChangedFiles = { created: [], modified: [], deleted: [] };
  private readonly counts = { created: 0, modified: 0, deleted: 0 };
  private listedBytes = 0;
  constructor(
    private readonly max = MAX_LISTED_CHANGES,
    private readonly maxBytes = MAX_LISTED_CHANGE_BYTES,
  ) {}

  add(kind: "created" | "modified" | "deleted", path: string): void {
    this.counts[kind]++;
    this.list(kind, path);
  }

  private list(kind: "created" | "modified" | "deleted", path: string): void {
    if (this.lists[kind].length >= this.max || this.listedBytes + path.length > this.maxBytes) return;
    this.lists[kind].push(path);
    this.listedBytes += path.length;
  }

  /** Adds the non-directory changes a pair stands for (a file replaced by a directory: deleted). */
  addPair(pair: EntryPair, changed: boolean, prefix = ""): void {
    const b = pair.before && pair.before.kind !== "directory" ? pair.before : undefined;
    const a = pair.after && pair.after.kind !== "directory" ? pair.after : undefined;
    if (a && !b) this.add("created", prefix + pair.path);
    else if (b && !a) this.add("deleted", prefix + pair.path);
    else if (a && b && changed) this.add("modified", prefix + pair.path);
  }

  /**
   * A listed entry removed after the walk (a FIFO or socket the run left): not there, so not
   * created; where it replaced a file, that file is deleted. Before, `changedFiles` listed removed
   * FIFOs as created (review, session 29).
   */
  removed(path: string): void {
    for (const kind of ["created", "modified"] as const) {
      const i = this.lists[kind].indexOf(path);
      if (i < 0) continue;
      this.lists[kind].splice(i, 1);
      this.listedBytes -= path.length;
      this.counts[kind]--;
      if (kind === "modified") this.add("deleted", path);
      return;
    }
  }

  get total(): number {
    return this.counts.created + this.counts.modified + this.counts.deleted;
  }

  /** Adds what another collector holds (its lists as far as this one's caps allow, its counts whole). */
  absorb(other: ChangeCollector): void {
    for (const kind of ["created", "modified", "deleted"] as const) {
      this.counts[kind] += other.counts[kind];
      for (const path of other.lists[kind]) this.list(kind, path);
    }
  }

  /** The lists, sorted unless `sorted` is false (then in the order added: copy mode lists tree by tree). */
  result(sorted = true): ChangedFiles {
    const list = (paths: string[]) => (sorted ? [...paths].sort() : [...paths]);
    const out: ChangedFiles = {
      created: list(this.lists.created),
      modified: list(this.lists.modified),
      deleted: list(this.lists.deleted),
    };
    const { created, modified, deleted } = this.counts;
    if (created > out.created.length || modified > out.modified.length || deleted > out.deleted.length)
      out.truncated = { created, modified, deleted };
    return out;
  }
}

interface DiffOptions {
  hashMaxBytes?: number;
  /**
   * Names the after-walk may hold at once: a directory that would take more is `overfull` (not
   * walked; its recorded entries are not reported as deleted). Default: the walk's default.
   */
  maxHeldNames?: number;
  /**
   * The content hash of a recorded regular file the snapshot did not hash, from elsewhere (the
   * kept copy of a protected file: protected-copy.ts contentHashes), or undefined. It must be the
   * hash of the file as `before` records it (the caller checks inode, size, times and mode). With
   * one, the file is judged by content as a hashed one is (the after side is hashed through the
   * walked entry's no-follow fd, at most `before.size` bytes): a byte-identical rewrite, or the
   * restore's own rewrite, is no change; any other kind, content or mode is.
   */
  keptHash?: (path: string, before: EntryFacts) => string | undefined;
  /** Every pair in walk order, unchanged ones included (the rules need ancestors). */
  onPair(pair: EntryPair, entry: WalkEntry | undefined): void;
}

const isInside = (ancestor: string, path: string) =>
  ancestor === "" ? path !== "" : path.startsWith(ancestor) && path.charCodeAt(ancestor.length) === 47;

/**
 * Walks `root` again and merges it with the snapshot in `file`: every path of either side
 * becomes one pair, in walk order. Below a directory the walk cannot see, the recorded
 * entries are not reported as deleted (they are unknown; the directory is the violation).
 * Returns the allocated bytes of the tree as walked.
 */
export async function diffAgainstSnapshot(root: string, file: string, options: DiffOptions): Promise<number> {
  const hashMaxBytes = options.hashMaxBytes ?? DEFAULT_HASH_MAX_BYTES;
  const reader = new SnapshotReader(file);
  const bytes = new AllocatedBytes();
  try {
    let recorded = reader.next();
    let sinceYield = 0;
    for (const entry of walkTree(root, { maxHeldNames: options.maxHeldNames })) {
      while (recorded && comparePaths(recorded.path, entry.path) < 0) {
        options.onPair({ path: recorded.path, before: recorded.facts }, undefined);
        recorded = reader.next();
      }
      let before: EntryFacts | undefined;
      if (recorded && recorded.path === entry.path) {
        before = recorded.facts;
        recorded = reader.next();
        if (before.kind === "file" && before.hash === undefined && options.keptHash) {
          const kept = options.keptHash(entry.path, before);
          if (kept !== undefined) before.hash = kept; // the after side is hashed up to before.size
        }
      }
      const after = afterFacts(entry, before, hashMaxBytes);
      options.onPair({ path: entry.path, before, after }, entry);
      bytes.add(entry);
      if (entry.kind === "directory" && entry.problem) {
        while (recorded && isInside(entry.path, recorded.path)) recorded = reader.next();
      }
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldToEventLoop();
      }
    }
    for (; recorded; recorded = reader.next())
      options.onPair({ path: recorded.path, before: recorded.facts }, undefined);
  } finally {
    reader.close();
  }
  return bytes.total;
}

/** The names of a directory's entries as the snapshot recorded them (undefined: the directory was not there). */
export function recordedChildren(file: string, dir: string): Set<string> | undefined {
  const reader = new SnapshotReader(file);
  try {
    let found = false;
    const names = new Set<string>();
    for (let recorded = reader.next(); recorded; recorded = reader.next()) {
      if (recorded.path === dir) found = recorded.facts.kind === "directory";
      else if (found && isInside(dir, recorded.path)) {
        const rest = recorded.path.slice(dir === "" ? 0 : dir.length + 1);
        if (!rest.includes("/")) names.add(rest);
      } else if (found) break;
    }
    return found ? names : undefined;
  } finally {
    reader.close();
  }
}

/** The mode (permission bits) the snapshot recorded for the tree's root. */
export function recordedRootMode(file: string): number {
  const reader = new SnapshotReader(file);
  try {
    const root = reader.next();
    if (root?.path !== "" || root.facts.kind !== "directory") throw new Error(`${file} records no root directory`);
    return root.facts.mode & 0o7777;
  } finally {
    reader.close();
  }
}

/** The after side: a hash only where the before side has one to compare with (a link's target always). */
function afterFacts(entry: WalkEntry, before: EntryFacts | undefined, hashMaxBytes: number): EntryFacts {
  const facts = baseFacts(entry);
  // A link's target is read even where none was before: the rules report a new link leading out of the tree.
  if (entry.kind === "symlink" && (before?.kind !== "symlink" || before.hash === undefined)) {
    facts.hash = linkTarget(entry);
    return facts;
  }
  if (!before || before.hash === undefined || before.kind !== entry.kind) return facts;
  if (sameMetadata(before, facts))
    facts.hash = before.hash; // untouched since the first walk
  else if (entry.kind === "symlink") facts.hash = linkTarget(entry);
  else if (entry.kind === "file") facts.hash = hashFileAt(entry.at, entry.stat!, Math.max(hashMaxBytes, before.size));
  return facts;
}
