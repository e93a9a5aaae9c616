// The staging directories a dead controller listed, removed by a reaper (run/reap-run-dirs.ts),
// an apply it did not finish undone first (dead-apply.ts): apart from staging-dir.ts, which a plan
// loads for its names, since a plan has no use for the undo.
import fs from "node:fs";
import path from "node:path";
import { type DeadApply, finishDeadApply, pendingDeadApply } from "./dead-apply.js";
import { removeStagingDir, STAGING_PREFIX } from "./staging-dir.js";

/** The staging directories a run folder's `record` file lists, named like ours ([] when it cannot be read). */
function listedStagingDirs(record: string): string[] {
  let listed: unknown;
  try {
    listed = JSON.parse(fs.readFileSync(record, "utf8"));
  } catch {
    return [];
  }
  if (!Array.isArray(listed)) return [];
  return listed.filter(
    (dir): dir is string =>
      typeof dir === "string" && path.isAbsolute(dir) && path.basename(dir).startsWith(STAGING_PREFIX),
  );
}

/**
 * Removes the staging directories a dead controller listed in its run folder's `record` file:
 * only directories named like ours and owned by this user; anything else stays where it is. An
 * apply one of them journals as unfinished is undone first (dead-apply.ts); returns those, with
 * what could not be put back and where it waits (a journal refused keeps its directory whole).
 * `hold` takes the tree an apply wrote before it is written again, without waiting: a tree a run
 * in progress holds may be the one that run's sandbox got (review, session 36: a new run's
 * start-up reaper undid a dead run's apply under the new run's copy of the tree); such a directory
 * stays, with a DeadApply saying why (`waiting`).
 */
export function removeListedStagingDirs(
  record: string,
  hold: (tree: string) => { release(): void } | string,
): DeadApply[] {
  const uid = process.geteuid?.();
  const applies: DeadApply[] = [];
  for (const dir of listedStagingDirs(record)) {
    try {
      const stat = fs.lstatSync(dir);
      if (!stat.isDirectory() || stat.uid !== uid) continue;
      const dead = finishDeadApply(dir, (tree) => holdOrWhyNot(hold, tree));
      if (dead) applies.push(dead);
      if (dead?.refused === undefined && dead?.waiting === undefined) removeStagingDir(dir);
    } catch {
      // already gone
    }
  }
  return applies;
}

/**
 * The reaper's hold of a tree, or why there is none: a hold that could not be written (a full disk,
 * often what killed the controller) waits like one a run keeps; swallowed, the run folder went and
 * with it the only pointer to the journal (review of session 36's fixes).
 */
function holdOrWhyNot(
  hold: (tree: string) => { release(): void } | string,
  tree: string,
): { release(): void } | string {
  try {
    return hold(tree);
  } catch (error) {
    return `the reaper could not hold the tree (${(error as Error).message})`;
  }
}

/**
 * The staging directories a run folder's `record` lists that are still there as this user's folders:
 * what a reaper would remove, or replay the journal of.
 */
export function presentListedStagingDirs(record: string): string[] {
  const uid = process.geteuid?.();
  return listedStagingDirs(record).filter((dir) => {
    try {
      const stat = fs.lstatSync(dir);
      return stat.isDirectory() && stat.uid === uid;
    } catch {
      return false;
    }
  });
}

/** The trees whose applies removeListedStagingDirs would undo now (`gc --dry-run`); nothing is changed. */
export function pendingListedApplies(record: string): string[] {
  return listedStagingDirs(record).flatMap((dir) => pendingDeadApply(dir) ?? []);
}
