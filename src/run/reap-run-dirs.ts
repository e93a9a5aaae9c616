// Reaping the run folders dead controllers left (gc, and each agent's start-up): apart from
// run-dirs.ts, which every plan loads, since it undoes a copy-mode apply a controller died in
// (workspace-transfer/dead-apply.ts), code a plan has no use for.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { treesOverlap } from "../util/path-inside.js";
import type { DeadApply } from "../workspace-transfer/dead-apply.js";
import { STAGING_RECORD } from "../workspace-transfer/staging-dir.js";
import {
  pendingListedApplies,
  presentListedStagingDirs,
  removeListedStagingDirs,
} from "../workspace-transfer/staging-reap.js";
import {
  HOLD_FILE_PREFIX,
  holdsUnjudgedState,
  LEASE_RECORD,
  lstatOrUndefined,
  ownerGone,
  readHoldOwner,
  readRunDirOwner,
  removeRunDir,
  runDirsParent,
  runDirsParentPrivate,
} from "./run-dirs.js";
import { holdForReaper } from "./tree-hold-files.js";

/** Removes the run folders (and tree-hold files) whose owner process on this host is gone; returns the ones removed. */
/** `dryRun`: the folders that would go, none removed (`gc --dry-run`). */
/** `applies`: gets the copy-mode applies a dead controller left unfinished, undone here (dead-apply.ts). */
export function reapRunDirs(tmpDir = os.tmpdir(), dryRun = false, applies?: DeadApply[]): string[] {
  const parent = runDirsParent(tmpDir);
  if (!runDirsParentPrivate(tmpDir)) return [];
  const removed: string[] = [];
  for (const name of fs.readdirSync(parent)) {
    if (name.startsWith(HOLD_FILE_PREFIX)) {
      const hold = path.join(parent, name);
      const owner = readHoldOwner(hold);
      if (owner && ownerGone(owner)) {
        if (!dryRun) fs.rmSync(hold, { force: true });
        removed.push(hold);
      }
      continue;
    }
    if (!name.startsWith("run-")) continue;
    const dir = path.join(parent, name);
    if (!lstatOrUndefined(dir)?.isDirectory()) continue;
    const owner = readRunDirOwner(dir);
    if (!owner || !ownerGone(owner)) continue;
    // Its trees are still lent: the record is what hands them back (reapContainers, once its
    // container is gone), so the folder stays until then.
    if (lstatOrUndefined(path.join(dir, LEASE_RECORD))) continue;
    // Its trees were never judged (its controller died first): the state is what judges them.
    if (holdsUnjudgedState(dir)) continue;
    if (dryRun) {
      removed.push(dir);
      // What it would undo: said by `gc --dry-run` (wouldUndo), nothing touched.
      for (const tree of pendingListedApplies(path.join(dir, STAGING_RECORD)))
        applies?.push({ tree, undone: false, unrestored: [], wouldUndo: true });
      continue;
    }
    // Copy mode: what a controller that died mid copy-out staged next to a workspace (and an apply
    // it did not finish, undone).
    const dead = removeListedStagingDirs(path.join(dir, STAGING_RECORD), (tree) => holdForReaper(name, [tree], tmpDir));
    applies?.push(...dead);
    // An apply a run in progress keeps from being undone: the folder lists its journal for the next reaper.
    if (dead.some((d) => d.waiting !== undefined)) continue;
    if (removeRunDir(dir)) removed.push(dir);
  }
  return removed;
}

/**
 * A dead run's copy-mode apply, unfinished, over one of these trees: its journal waits in that
 * run's folder for a reaper to undo it. A run that copied such a tree in would give its sandbox the
 * half-applied tree, and a reaper undoing it meanwhile would change the tree under the run's own
 * apply (review, session 36).
 * Or (`staging`) a staging directory a dead run listed, journal or not, inside one of these trees:
 * lent to a sandbox, it could write the journal and the aside entries the next reaper replays as the
 * caller (a hook renamed into `.git/hooks`, a copy of bash given mode 04755: red-team review, round
 * 3, session 41). The reaper removes it first, or the run is refused.
 */
export function deadApplyOver(
  trees: readonly string[],
  tmpDir = os.tmpdir(),
): { runId: string; tree: string; staging?: string } | undefined {
  if (trees.length === 0 || !runDirsParentPrivate(tmpDir)) return undefined;
  const parent = runDirsParent(tmpDir);
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith("run-")) continue;
    const dir = path.join(parent, name);
    const owner = lstatOrUndefined(dir)?.isDirectory() ? readRunDirOwner(dir) : undefined;
    if (!owner || !ownerGone(owner)) continue;
    const record = path.join(dir, STAGING_RECORD);
    for (const theirs of pendingListedApplies(record))
      for (const ours of trees)
        if (treesOverlap(theirs, ours)) return { runId: name.slice("run-".length), tree: theirs };
    for (const staging of presentListedStagingDirs(record))
      for (const ours of trees)
        if (treesOverlap(staging, ours)) return { runId: name.slice("run-".length), tree: ours, staging };
  }
  return undefined;
}
