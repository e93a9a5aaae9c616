// Disk accounting for the trees a run may write (the workspace and extra writable roots live
// on the host's filesystems, outside every container limit). Exact, but not free: the
// allocated size of a tree (st_blocks * 512, hard-linked inodes once) needs a walk. So while
// the run is live the watch polls cheaply: every ~250 ms one statfs per filesystem. Only when
// a filesystem's used bytes grew by more than the limit since the start (whoever wrote them)
// does it walk the trees, and it trips when their allocated size grew past the limit. After the
// run, `check` gives the exact answer (pass the after-walk's bytes to skip a walk).
//
// How fast it trips: within one poll of the filesystem growing past the limit plus one walk of
// the trees (about 1 s per 300,000 entries here); the sandbox can write faster than that, so a
// fast writer overshoots by what it writes in that time (RLIMIT_FSIZE bounds one file).
import fs from "node:fs";
import { walkTree, YIELD_EVERY, yieldToEventLoop } from "./fd-walk.js";
import { AllocatedBytes } from "./workspace-snapshot.js";

/** Allocated bytes of a tree, streamed through the fd walk (never follows a symlink). */
export async function measureTreeBytes(root: string, signal?: AbortSignal): Promise<number> {
  const bytes = new AllocatedBytes();
  let sinceYield = 0;
  for (const entry of walkTree(root, { descend: (e) => e.fd !== undefined })) {
    bytes.add(entry);
    if (++sinceYield >= YIELD_EVERY) {
      sinceYield = 0;
      await yieldToEventLoop();
      signal?.throwIfAborted();
    }
  }
  return bytes.total;
}

export interface DiskTrip {
  grownBytes: number;
  limitBytes: number;
}

export interface DiskWatchOptions {
  /** The writable trees (canonical paths). */
  roots: readonly string[];
  limitBytes: number;
  /** Their allocated bytes before the run, if already known (WorkspaceWatch.allocatedBytesBefore). */
  baselineBytes?: number;
  /** Poll interval; default 250 ms. */
  intervalMs?: number;
  /** Called at most once, while the run is live, when the trees grew past the limit. */
  onExceeded(trip: DiskTrip): void;
}

function usedBytes(root: string): number {
  const s = fs.statfsSync(root);
  return (s.blocks - s.bfree) * s.bsize;
}

export class DiskWatch {
  private timer?: NodeJS.Timeout;
  private measuring = false;
  private tripped = false;
  private stopped = false;
  /** Filesystem growth at which the next walk happens. */
  private nextWalkAt: number;
  private readonly abort = new AbortController();

  private constructor(
    private readonly options: DiskWatchOptions,
    private readonly baselineBytes: number,
    /** One root per filesystem, with that filesystem's used bytes at the start. */
    private readonly filesystems: Array<{ root: string; used: number }>,
  ) {
    this.nextWalkAt = options.limitBytes;
  }

  static async start(options: DiskWatchOptions): Promise<DiskWatch> {
    const byDevice = new Map<number, { root: string; used: number }>();
    for (const root of options.roots) {
      const dev = fs.statSync(root).dev;
      if (!byDevice.has(dev)) byDevice.set(dev, { root, used: usedBytes(root) });
    }
    const baseline = options.baselineBytes ?? (await sumTrees(options.roots));
    const watch = new DiskWatch(options, baseline, [...byDevice.values()]);
    watch.timer = setInterval(() => void watch.poll(), options.intervalMs ?? 250);
    watch.timer.unref();
    return watch;
  }

  /** Stops polling (and any walk in progress). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.abort.abort();
  }

  /** The exact answer after the run: the trip if the trees grew past the limit. */
  async check(afterBytes?: number): Promise<DiskTrip | undefined> {
    const after = afterBytes ?? (await sumTrees(this.options.roots));
    const grownBytes = after - this.baselineBytes;
    return grownBytes > this.options.limitBytes ? { grownBytes, limitBytes: this.options.limitBytes } : undefined;
  }

  private async poll(): Promise<void> {
    if (this.measuring || this.tripped || this.stopped) return;
    let grown = 0;
    for (const fsys of this.filesystems) grown += Math.max(0, usedBytes(fsys.root) - fsys.used);
    if (grown <= this.nextWalkAt) return;
    this.measuring = true;
    try {
      const trip = await this.measure();
      if (trip && !this.stopped) {
        this.tripped = true;
        this.stop();
        this.options.onExceeded(trip);
      } else {
        // Others write to the same filesystem: walk again only after it grew by another quarter limit.
        this.nextWalkAt = grown + Math.max(this.options.limitBytes / 4, 1024 * 1024);
      }
    } catch {
      // a walk of a tree that is changing under it may fail; the next poll tries again
    } finally {
      this.measuring = false;
    }
  }

  private async measure(): Promise<DiskTrip | undefined> {
    const after = await sumTrees(this.options.roots, this.abort.signal);
    const grownBytes = after - this.baselineBytes;
    return grownBytes > this.options.limitBytes ? { grownBytes, limitBytes: this.options.limitBytes } : undefined;
  }
}

async function sumTrees(roots: readonly string[], signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (const root of roots) total += await measureTreeBytes(root, signal);
  return total;
}
