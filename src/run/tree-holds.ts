// The host trees this process's runs hold while they are in progress. A run's sandbox holds its
// workspace and writable roots until its container is gone, and the host judges and writes those
// trees (the after-walk, the apply, the hand-back of a lent tree, a branch's commit) only then,
// when nothing of the sandbox can race it. A second run over the same trees at the same time would
// break that: its sandbox would be live while the first run's host side judges and writes, and in
// bind mode the first hand-back would take the tree back from under the second sandbox (its writes
// then fail, unseen). So a run whose trees overlap another's, where either may write, waits until
// that run is over, in the order the calls came; read-only trees may be shared.
//
// Process-wide on purpose: the trees are the host's, and two agents of one program (or the tasks
// of one batch) share them. Other processes' runs: tree-hold-files.ts.
import path from "node:path";
import { rememberLentTrees } from "../util/host-programs.js";

export interface HeldTrees {
  runId: string;
  /** Trees the run's sandbox may write (canonical paths). */
  writable: readonly string[];
  /** Trees it only reads. */
  readOnly: readonly string[];
}

/** What a waiting run is told: the run it waits for and the tree they share. */
export interface TreeWait {
  heldBy: string;
  tree: string;
}

export interface TreeHold {
  /** Gives the trees back (once; later calls do nothing) and starts the runs waiting for them. */
  release(): void;
}

interface Entry extends HeldTrees {
  start?: () => void;
}

/** Runs holding their trees. */
const holding = new Set<Entry>();
/** Runs waiting, in the order they came. */
const waiting: Entry[] = [];

/**
 * Takes the run's trees once no run holds (or waits ahead for) an overlapping one. `onWaiting` is
 * called once when it must wait. Rejects with the signal's reason when aborted while waiting.
 */
export function holdTrees(
  trees: HeldTrees,
  options: { signal?: AbortSignal; onWaiting?: (wait: TreeWait) => void } = {},
): Promise<TreeHold> {
  const { signal } = options;
  if (signal?.aborted) return Promise.reject(signal.reason);
  // From now on no host program is looked up in these trees (util/host-programs.ts).
  rememberLentTrees([...trees.writable, ...trees.readOnly]);
  const entry: Entry = { ...trees };
  const hold: TreeHold = {
    release: () => {
      if (holding.delete(entry)) startWaiting();
    },
  };
  const blocker = firstConflict(entry, [...holding, ...waiting]);
  if (!blocker) {
    holding.add(entry);
    return Promise.resolve(hold);
  }
  options.onWaiting?.(blocker);
  return new Promise<TreeHold>((resolve, reject) => {
    const onAbort = () => {
      waiting.splice(waiting.indexOf(entry), 1);
      startWaiting();
      reject(signal!.reason);
    };
    entry.start = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve(hold);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    waiting.push(entry);
  });
}

/**
 * Takes the run's trees now, or says which run holds (or waits ahead for) an overlapping one: for a
 * reaper, which must not write a tree a live run holds and must not wait for it either.
 */
export function tryHoldTrees(trees: HeldTrees): TreeHold | TreeWait {
  const entry: Entry = { ...trees };
  const blocker = firstConflict(entry, [...holding, ...waiting]);
  if (blocker) return blocker;
  rememberLentTrees([...trees.writable, ...trees.readOnly]);
  holding.add(entry);
  return {
    release: () => {
      if (holding.delete(entry)) startWaiting();
    },
  };
}

/** Starts, in order, every waiting run that no held run and no earlier waiting run conflicts with. */
function startWaiting(): void {
  for (let i = 0; i < waiting.length; ) {
    const entry = waiting[i]!;
    if (firstConflict(entry, [...holding, ...waiting.slice(0, i)])) {
      i++;
      continue;
    }
    waiting.splice(i, 1);
    holding.add(entry);
    entry.start?.();
  }
}

function firstConflict(entry: HeldTrees, others: Iterable<HeldTrees>): TreeWait | undefined {
  for (const other of others) {
    const tree = sharedTree(entry, other);
    if (tree) return { heldBy: other.runId, tree };
  }
  return undefined;
}

/** A tree the two runs share where either may write (the inner one of the pair), if any. */
export function sharedTree(a: HeldTrees, b: HeldTrees): string | undefined {
  const pairs: Array<[readonly string[], readonly string[]]> = [
    [a.writable, [...b.writable, ...b.readOnly]],
    [a.readOnly, b.writable],
  ];
  for (const [mine, theirs] of pairs) {
    for (const x of mine) {
      for (const y of theirs) {
        if (x === y || x.startsWith(`${y}${path.sep}`)) return x;
        if (y.startsWith(`${x}${path.sep}`)) return y;
      }
    }
  }
  return undefined;
}
