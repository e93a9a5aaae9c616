// Disk and entry accounting for the trees a run may write (the workspace and extra writable roots
// live on the host's filesystems, outside every container limit). Exact, but not free: the
// allocated size of a tree (st_blocks * 512, hard-linked inodes once) and its number of entries
// need a walk. So while the run is live the watch polls cheaply: every ~250 ms one statfs per
// filesystem, for its used bytes and used inodes. When a filesystem's used bytes grew by more
// than the disk limit, or its used inodes by more than the entry limit, since the start (whoever
// wrote them), it walks the trees, and it trips when their allocated size or their entries grew
// past the limit. Entries are also counted now and then whatever statfs says (every
// COUNT_EVERY_MS, or ten times the last walk's duration if that is longer): hard links add
// names without inodes (and a filesystem may keep no inode count at all, e.g. btrfs), so only a
// count sees them. A count stops as soon as the trees have more entries than the limit allows,
// and reads a folder too large to hold as a stream (fd-walk.ts, order "any"): its time and memory
// stay bounded whatever the sandbox made. After the run, `check` gives the exact answer (pass the
// after-walk's figures to skip a walk).
//
// How fast it trips: within one poll (or one count interval, for hard links) of the trees growing
// past the limit, plus one walk (about 1 s per 300,000 entries here); the sandbox can write faster
// than that, so a fast writer overshoots by what it writes in that time (RLIMIT_FSIZE bounds one
// file; the after-run walk removes what it added to a folder too full to walk).
//
// What a walk cannot see into is judged by the filesystem instead. A non-root caller's sandbox
// runs as the caller and owns the folders it makes: one it makes unreadable (`chmod 000`, the
// root too) hid what it wrote there from the walks (review, round 3, session 38: 1200 MiB and
// 3,000 entries under a 64 MiB / 2,000-entry limit, caught only after the run). Giving the owner
// read back while the run is live changed the modes the after-run check judges, so the watch
// changes nothing: a walk that met a folder it could not open, read or follow (or one swapped
// while it was walked, or deeper than the walk goes) counts as blind, and a blind walk trips when
// the filesystem's own growth since the start (statfs, whoever wrote it) is past the limit. Its
// cost: where another program writes to the same filesystem at the same time, such a run may be
// stopped early; the message says so.
//
// Files the sandbox removed but keeps open (or mapped, or made with O_TMPFILE) take the host's disk
// and have no name any walk could find (review, round 3, session 39: 600 MiB held under a 64 MiB
// limit, the run ok). When the filesystem grew past the limit and a walk does not account for it,
// the watch asks the container's processes on this host what nameless files they hold
// (held-files.ts) and counts those too.
import fs from "node:fs";
import { performance } from "node:perf_hooks";
import { setTimeout } from "node:timers/promises";
import { type WalkEntry, WalkError, walkTree, YIELD_EVERY, yieldToEventLoop } from "./fd-walk.js";
import { type HeldFiles, heldNamelessFiles } from "./held-files.js";
import { shownPath } from "./violation-message.js";
import { AllocatedBytes } from "./workspace-snapshot.js";

/** A tree's allocated bytes and entries (every name the walk sees, the root included). */
interface TreeSize {
  bytes: number;
  entries: number;
  /** The walk stopped once it had seen more entries than asked (`stopAfter`): both are lower bounds. */
  stopped?: boolean;
  /** The first entry the walk could not see into, relative to its root ("" the root): both are lower bounds. */
  unseen?: string;
}

/**
 * Allocated bytes and entries of a tree, streamed through the fd walk (never follows a symlink, in
 * any order, so a folder of any size is counted in bounded memory). `stopAfter`: stop once more
 * entries than this were seen.
 */
export async function measureTree(
  root: string,
  signal?: AbortSignal,
  stopAfter = Number.POSITIVE_INFINITY,
): Promise<TreeSize> {
  const bytes = new AllocatedBytes();
  let entries = 0;
  let sinceYield = 0;
  let unseen: string | undefined;
  const walk = walkTree(root, { descend: (e) => e.fd !== undefined, order: "any" });
  for (const entry of rootAsProblem(walk, root)) {
    if (unseen === undefined && hides(entry)) unseen = entry.path;
    bytes.add(entry);
    entries++;
    if (entries > stopAfter) return { bytes: bytes.total, entries, stopped: true };
    if (++sinceYield >= YIELD_EVERY) {
      sinceYield = 0;
      await yieldToEventLoop();
      signal?.throwIfAborted();
    }
  }
  return { bytes: bytes.total, entries, ...(unseen === undefined ? {} : { unseen }) };
}

/**
 * The walk's entries; a root that is there but cannot be opened (the sandbox made it 000) is
 * yielded as an unwalked entry instead of thrown. A root that is gone still throws.
 */
function* rootAsProblem(walk: Generator<WalkEntry>, root: string): Generator<WalkEntry> {
  let first: IteratorResult<WalkEntry>;
  try {
    first = walk.next();
  } catch (error) {
    if (!(error instanceof WalkError) || !fs.existsSync(root)) throw error;
    yield { path: "", name: "", depth: 0, kind: "directory", at: root, problem: error.message, unwalked: true };
    return;
  }
  if (first.done) return;
  yield first.value;
  yield* walk;
}

/** An entry below which the walk saw nothing, for a reason other than its being removed meanwhile. */
function hides(entry: WalkEntry): boolean {
  const vanished = entry.problem?.includes("ENOENT") === true;
  if (entry.kind === "unknown") return !vanished; // its lstat failed
  return entry.unwalked === true && !vanished;
}

/** Allocated bytes of a tree (see measureTree). */
export async function measureTreeBytes(root: string, signal?: AbortSignal): Promise<number> {
  return (await measureTree(root, signal)).bytes;
}

export type DiskTrip =
  | {
      limit: "disk";
      grownBytes: number;
      limitBytes: number;
      /** Of grownBytes, what files with no name the sandbox's processes hold took (their number and bytes). */
      held?: { files: number; bytes: number };
    }
  | {
      limit: "entries";
      grownEntries: number;
      limitEntries: number;
      /** The count stopped once past the limit: the trees grew by at least grownEntries. */
      atLeast?: true;
    };

/**
 * A trip judged by the filesystem's growth (grownBytes or grownEntries: statfs since the start)
 * because the walk could not see into `unseen` (a path as a message shows it, the root's own
 * path first).
 */
export type BlindTrip = DiskTrip & { unseen: string; blindTo: "a folder" | "held files" };

interface DiskWatchOptions {
  /** The writable trees (canonical paths). */
  roots: readonly string[];
  limitBytes: number;
  /** Entries the trees may gain (net); absent: not watched. */
  limitEntries?: number;
  /** Their allocated bytes before the run, if already known (WorkspaceWatch.allocatedBytesBefore). */
  baselineBytes?: number;
  /** Their entries before the run, if already known (WorkspaceWatch.entriesBefore). */
  baselineEntries?: number;
  /** Poll interval; default 250 ms. */
  intervalMs?: number;
  /** Called at most once, while the run is live, when the trees grew past a limit. */
  onExceeded(trip: DiskTrip | BlindTrip): void;
}

interface Filesystem {
  root: string;
  dev: number;
  used: number;
  /** Used inodes at the start; undefined when the filesystem keeps no count. */
  inodes?: number;
}

/** Between counts of the trees' entries: at least this, or ten walks' time. */
const COUNT_EVERY_MS = 2_000;
/** Scans of the held files before an unreadable one counts, and the pause after the first (then twice it). */
const HELD_SCAN_TRIES = 3;
const HELD_RETRY_MS = 100;
/** A walk's time per entry on a slow 2-core machine, to place the first count after a known baseline. */
const WALK_MS_PER_ENTRY = 0.015;

function usage(root: string): { used: number; inodes?: number } {
  const s = fs.statfsSync(root);
  return { used: (s.blocks - s.bfree) * s.bsize, ...(s.files > 0 ? { inodes: s.files - s.ffree } : {}) };
}

export class DiskWatch {
  private timer?: NodeJS.Timeout;
  private measuring = false;
  private tripped = false;
  private stopped = false;
  /** Filesystem growth at which the next walk happens. */
  private nextWalkAt: number;
  private nextWalkAtInodes: number;
  /** When to count the trees' entries next (performance.now()). */
  private nextCount = 0;
  private readonly abort = new AbortController();
  /** The container's processes on this host, once it exists (watchHolders). */
  private holders?: () => Promise<readonly number[]>;

  private constructor(
    private readonly options: DiskWatchOptions,
    private readonly baseline: TreeSize,
    /** One root per filesystem, with that filesystem's use at the start. */
    private readonly filesystems: Filesystem[],
  ) {
    this.nextWalkAt = options.limitBytes;
    this.nextWalkAtInodes = options.limitEntries ?? Number.POSITIVE_INFINITY;
  }

  static async start(options: DiskWatchOptions): Promise<DiskWatch> {
    const byDevice = new Map<number, Filesystem>();
    for (const root of options.roots) {
      const dev = fs.statSync(root).dev;
      if (!byDevice.has(dev)) byDevice.set(dev, { root, dev, ...usage(root) });
    }
    const known = options.baselineBytes !== undefined && options.baselineEntries !== undefined;
    const measured = known ? undefined : await sumTrees(options.roots);
    const baseline = {
      bytes: options.baselineBytes ?? measured!.bytes,
      entries: options.baselineEntries ?? measured!.entries,
    };
    const watch = new DiskWatch(options, baseline, [...byDevice.values()]);
    // A baseline the snapshot just counted is not counted again at the first poll, beside the
    // container's start (review, session 27: 0.3-0.7 CPU-s a run on 20,000-40,000 entries).
    if (known)
      watch.nextCount = performance.now() + Math.max(COUNT_EVERY_MS, 10 * baseline.entries * WALK_MS_PER_ENTRY);
    watch.timer = setInterval(() => void watch.poll(), options.intervalMs ?? 250);
    watch.timer.unref();
    return watch;
  }

  /**
   * From now on, a walk that does not account for the filesystem's growth past the limit also
   * counts the nameless files these processes hold (the container's, on this host).
   */
  watchHolders(pids: () => Promise<readonly number[]>): void {
    this.holders = pids;
  }

  /** Stops polling (and any walk in progress). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.abort.abort();
  }

  /** The exact answer after the run: the trip if the trees grew past a limit. */
  async check(after?: TreeSize): Promise<DiskTrip | undefined> {
    return this.judge(after ?? (await sumTrees(this.options.roots)));
  }

  private async poll(): Promise<void> {
    if (this.measuring || this.tripped || this.stopped) return;
    let grown = 0;
    let grownInodes = 0;
    for (const fsys of this.filesystems) {
      let now: { used: number; inodes?: number };
      try {
        now = usage(fsys.root);
      } catch {
        return; // the root went away (the run is ending, or its caller removed it): check() judges
      }
      grown += Math.max(0, now.used - fsys.used);
      if (fsys.inodes !== undefined && now.inodes !== undefined) grownInodes += Math.max(0, now.inodes - fsys.inodes);
    }
    const limitEntries = this.options.limitEntries;
    // Hard links use no inode, and some filesystems keep no count: entries are counted now and then anyway.
    const countDue = limitEntries !== undefined && performance.now() >= this.nextCount;
    const grewPast = grown > this.nextWalkAt || grownInodes > this.nextWalkAtInodes;
    if (!grewPast && !countDue) return;
    this.measuring = true;
    const started = performance.now();
    try {
      // Past this many entries the trip is certain: the walk stops there.
      const stopAfter = limitEntries === undefined ? undefined : this.baseline.entries + limitEntries;
      // A count that is only due judges entries: the bytes of a file being written (delayed
      // allocation) may pass the limit for a moment; a byte trip waits for statfs to see it.
      const measured = await sumTrees(this.options.roots, this.abort.signal, stopAfter);
      // Bytes are judged whenever statfs shows the growth past the limit, a count that is only due
      // included (a file named after the last byte walk stayed for the run: fix review 2, session 45).
      const trip =
        this.judge(measured, grewPast || grown > this.options.limitBytes) ??
        this.judgeBlind(measured, grown, grownInodes) ??
        (grown > this.options.limitBytes ? await this.judgeHeldNow(grown, grownInodes, stopAfter) : undefined);
      if (trip && !this.stopped) {
        this.tripped = true;
        this.stop();
        this.options.onExceeded(trip);
      } else {
        // Others write to the same filesystem: walk again only after it grew by another quarter limit.
        if (grown > this.nextWalkAt) this.nextWalkAt = grown + Math.max(this.options.limitBytes / 4, 1024 * 1024);
        if (grownInodes > this.nextWalkAtInodes)
          this.nextWalkAtInodes = grownInodes + Math.max((limitEntries ?? 0) / 4, 1000);
      }
    } catch {
      // a walk of a tree that is changing under it may fail; the next poll tries again
    } finally {
      this.measuring = false;
      const took = performance.now() - started;
      this.nextCount = performance.now() + Math.max(COUNT_EVERY_MS, 10 * took);
    }
  }

  /** A walk that could not see everything: the filesystem's growth stands in for the trees'. */
  private judgeBlind(measured: TreeSize, grown: number, grownInodes: number): BlindTrip | undefined {
    if (measured.unseen === undefined) return undefined;
    const unseen = measured.unseen;
    if (grown > this.options.limitBytes)
      return { limit: "disk", grownBytes: grown, limitBytes: this.options.limitBytes, unseen, blindTo: "a folder" };
    const limitEntries = this.options.limitEntries;
    if (limitEntries !== undefined && grownInodes > limitEntries)
      return { limit: "entries", grownEntries: grownInodes, limitEntries, unseen, blindTo: "a folder" };
    return undefined;
  }

  /**
   * What the container's processes hold with no name on the watched filesystems (none known:
   * undefined). A scan that could not read everything is tried again: a process that is ending
   * cannot be read for a moment (its leader a zombie while its threads exit, its folders root's
   * once its memory is gone), and on a busy filesystem that moment tripped a run blind (CI,
   * session 44). What stays unreadable at every try is blind.
   */
  private async heldFiles(): Promise<HeldFiles | undefined> {
    if (!this.holders) return undefined;
    const devices = new Set(this.filesystems.map((f) => f.dev));
    for (let attempt = 1; ; attempt++) {
      const pids = await this.holders();
      this.abort.signal.throwIfAborted();
      const held = await heldNamelessFiles(pids, devices);
      this.abort.signal.throwIfAborted();
      if (held.unreadable === 0 || held.capped || attempt === HELD_SCAN_TRIES) return held;
      await setTimeout(HELD_RETRY_MS * attempt, undefined, { signal: this.abort.signal, ref: false });
    }
  }

  /**
   * The held files judged with a walk of the trees taken after the scan: between an earlier walk
   * and the scan (or its retries' pauses) the sandbox could give a held file a name in a walked
   * folder, where neither saw it (fix reviews, session 45: 2 GiB preallocated, linked in as the
   * host's walk closed the root).
   */
  private async judgeHeldNow(
    grown: number,
    grownInodes: number,
    stopAfter: number | undefined,
  ): Promise<DiskTrip | BlindTrip | undefined> {
    const held = await this.heldFiles();
    if (!held) return undefined;
    const after = await sumTrees(this.options.roots, this.abort.signal, stopAfter);
    return this.judge(after) ?? this.judgeBlind(after, grown, grownInodes) ?? this.judgeHeld(after, held, grown);
  }

  /**
   * The trees' growth with the nameless files the sandbox holds. A scan that could not read all it
   * looked at, or stopped at its cap, is blind: the filesystem's growth (already past the limit
   * when this is asked) stands in.
   */
  private judgeHeld(after: TreeSize, held: HeldFiles, grown: number): DiskTrip | BlindTrip | undefined {
    const limitBytes = this.options.limitBytes;
    if (held.unreadable > 0 || held.capped) {
      const why = held.capped
        ? `more than ${held.read} of their open files and mappings`
        : `${held.unreadable} of their open files, mappings or threads could not be read`;
      return {
        limit: "disk",
        grownBytes: grown,
        limitBytes,
        unseen: `what the container's processes hold (${why})`,
        blindTo: "held files",
      };
    }
    const grownBytes = after.bytes + held.bytes - this.baseline.bytes;
    if (held.files === 0 || grownBytes <= limitBytes) return undefined;
    return { limit: "disk", grownBytes, limitBytes, held: { files: held.files, bytes: held.bytes } };
  }

  private judge(after: TreeSize, bytes = true): DiskTrip | undefined {
    const grownBytes = after.bytes - this.baseline.bytes;
    if (bytes && grownBytes > this.options.limitBytes)
      return { limit: "disk", grownBytes, limitBytes: this.options.limitBytes };
    const limitEntries = this.options.limitEntries;
    const grownEntries = after.entries - this.baseline.entries;
    if (limitEntries !== undefined && grownEntries > limitEntries)
      return { limit: "entries", grownEntries, limitEntries, ...(after.stopped ? { atLeast: true as const } : {}) };
    return undefined;
  }
}

async function sumTrees(
  roots: readonly string[],
  signal?: AbortSignal,
  stopAfter = Number.POSITIVE_INFINITY,
): Promise<TreeSize> {
  const total: TreeSize = { bytes: 0, entries: 0 };
  for (const root of roots) {
    const size = await measureTree(root, signal, stopAfter - total.entries);
    total.bytes += size.bytes;
    total.entries += size.entries;
    if (size.stopped) return { ...total, stopped: true };
    if (size.unseen !== undefined && total.unseen === undefined)
      total.unseen = shownPath(size.unseen === "" ? root : `${root}/${size.unseen}`);
  }
  return total;
}
