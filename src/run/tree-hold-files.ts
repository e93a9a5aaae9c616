// Tree holds across processes: the runs of other sandbox-run processes of this user on this host
// (two `sandbox-run` calls on one workspace from two terminals, two CI steps on one checkout) are
// kept apart like the runs of one process (tree-holds.ts). Each run that holds trees publishes a
// file `hold-<runId>` in the private run-folder parent (run-dirs.ts: 0700, this user's, checked
// before every use), and waits for the overlapping runs published before it: Lamport's bakery
// algorithm, between the runs that share a tree. A run first publishes that it is choosing, then
// takes a ticket one above every ticket it sees and publishes it (each write a rename, so a reader
// sees a whole file or the previous one); it then waits while an overlapping run is choosing, and
// while one holds a lower ticket (the run id breaks a tie). A file whose process is gone is ignored
// and removed. Runs of another user, or with another TMPDIR, are not seen (docs/security.md W8).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pidnsField } from "../util/own-pid-namespace.js";
import { HOLD_FILE_PREFIX, ownerGone, privateRunDirsParent } from "./run-dirs.js";
import { type HeldTrees, holdTrees, sharedTree, type TreeHold, type TreeWait, tryHoldTrees } from "./tree-holds.js";

/** How often a waiting run looks again. */
const POLL_MS = 200;
/** A hold file is a few paths; a larger one is not ours. */
const MAX_HOLD_BYTES = 1024 * 1024;

interface HoldFile extends HeldTrees {
  pid: number;
  host: string;
  /** The owner's PID namespace (run-dirs.ts ownerGone). */
  pidns?: string;
  /** Absent while the run is choosing its ticket. */
  ticket?: number;
}

export interface HoldOptions {
  signal?: AbortSignal;
  onWaiting?: (wait: TreeWait) => void;
  /** The run-folder parent's own parent (default: the temp dir), for tests. */
  tmpDir?: string;
}

/**
 * Holds the run's trees against the other runs of this process, then against those of other
 * processes of this user on this host; the hold is given back by release(), once.
 */
export async function holdTreesOnHost(trees: HeldTrees, options: HoldOptions = {}): Promise<TreeHold> {
  let waitingSaid = false;
  const onWaiting = (wait: TreeWait) => {
    if (!waitingSaid) options.onWaiting?.(wait);
    waitingSaid = true;
  };
  const inProcess = await holdTrees(trees, { signal: options.signal, onWaiting });
  if (trees.writable.length === 0 && trees.readOnly.length === 0) return inProcess;
  const ticketed = new Ticketed(trees, inProcess, options.tmpDir);
  try {
    for (;;) {
      const before = ticketed.runBefore();
      if (!before) break;
      onWaiting(before);
      await pause(POLL_MS, options.signal);
    }
  } catch (error) {
    ticketed.release();
    throw error;
  }
  return ticketed;
}

/**
 * Holds the trees now, against this process's runs and then other processes', or says which run
 * holds (or is taking) an overlapping one, holding nothing: for a reaper, which writes a tree only
 * while no run holds it and never waits for one. Once its ticket is published, a run that comes
 * later waits for it, as it would for any run.
 */
export function tryHoldTreesOnHost(trees: HeldTrees, tmpDir?: string): TreeHold | TreeWait {
  const inProcess = tryHoldTrees(trees);
  if (!("release" in inProcess)) return inProcess;
  const ticketed = new Ticketed(trees, inProcess, tmpDir);
  try {
    // Not only earlier tickets: one still choosing may take a lower one, and this does not wait to see.
    const before = ticketed.runBefore();
    if (!before) return ticketed;
    ticketed.release();
    return before;
  } catch (error) {
    ticketed.release();
    throw error;
  }
}

/** The trees held for a reaper (named after the dead run it reaps for), or why not now (a run in progress holds one). */
export function holdForReaper(runId: string, roots: readonly string[], tmpDir?: string): TreeHold | string {
  const hold = tryHoldTreesOnHost(
    { runId: `${runId}-reap-${process.pid}`, writable: [...roots], readOnly: [] },
    tmpDir,
  );
  return "release" in hold ? hold : `run ${hold.heldBy}, in progress, holds it`;
}

/** A run's published hold file with its ticket (the bakery's), given back once with the in-process hold. */
class Ticketed implements TreeHold {
  readonly #parent: string;
  readonly #file: string;
  readonly #mine: HoldFile;
  readonly #ticket: number;
  #released = false;

  constructor(
    trees: HeldTrees,
    private readonly inProcess: TreeHold,
    tmpDir: string | undefined,
  ) {
    this.#parent = privateRunDirsParent(tmpDir);
    this.#file = path.join(this.#parent, `${HOLD_FILE_PREFIX}${trees.runId}`);
    this.#mine = { ...trees, pid: process.pid, host: os.hostname(), ...pidnsField() };
    try {
      publish(this.#file, this.#mine);
      this.#ticket = 1 + Math.max(0, ...others(this.#parent, this.#mine).map((o) => o.ticket ?? 0));
      publish(this.#file, { ...this.#mine, ticket: this.#ticket });
    } catch (error) {
      this.release();
      throw error;
    }
  }

  /** An overlapping run choosing its ticket, or holding an earlier one: this run waits for it. */
  runBefore(): TreeWait | undefined {
    const mine = this.#mine;
    const before = others(this.#parent, mine).find(
      (o) => sharedTree(mine, o) && (o.ticket === undefined || earlier(o, this.#ticket, mine.runId)),
    );
    return before ? { heldBy: before.runId, tree: sharedTree(mine, before)! } : undefined;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    fs.rmSync(this.#file, { force: true });
    this.inProcess.release();
  }
}

function earlier(other: HoldFile, ticket: number, runId: string): boolean {
  return other.ticket! < ticket || (other.ticket === ticket && other.runId < runId);
}

/** Writes the run's hold file whole (a reader sees this version or the one before). */
function publish(file: string, hold: HoldFile): void {
  const next = `${file}.next`;
  try {
    fs.writeFileSync(next, JSON.stringify(hold), { mode: 0o600, flag: "wx" });
  } catch (error) {
    // A full disk leaves it empty, and an empty one names no process: nothing would ever remove it.
    fs.rmSync(next, { force: true });
    throw error;
  }
  fs.renameSync(next, file);
}

/** The live hold files of other runs on this host; the files of processes that are gone are removed. */
function others(parent: string, mine: HoldFile): HoldFile[] {
  const found: HoldFile[] = [];
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith(HOLD_FILE_PREFIX) || name.startsWith(`${HOLD_FILE_PREFIX}${mine.runId}`)) continue;
    const hold = readHold(path.join(parent, name));
    if (!hold || hold.host !== mine.host) continue;
    // A file being published (.next) is not a hold yet; one left by a process that is gone goes
    // (one of another PID namespace is never taken for gone: ownerGone).
    if (ownerGone(hold)) fs.rmSync(path.join(parent, name), { force: true });
    else if (!name.endsWith(".next")) found.push(hold);
  }
  return found;
}

function readHold(file: string): HoldFile | undefined {
  try {
    const stat = fs.lstatSync(file);
    if (!stat.isFile() || stat.size > MAX_HOLD_BYTES) return undefined;
    const hold = JSON.parse(fs.readFileSync(file, "utf8")) as HoldFile;
    const paths = (v: unknown) => Array.isArray(v) && v.every((p) => typeof p === "string");
    if (typeof hold.runId !== "string" || !Number.isInteger(hold.pid) || !paths(hold.writable) || !paths(hold.readOnly))
      return undefined;
    return hold;
  } catch {
    // Gone meanwhile (its run ended), or not a hold file.
    return undefined;
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
