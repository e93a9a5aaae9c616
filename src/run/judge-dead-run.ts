// A bind-mode run whose controller died before it judged the trees (SIGKILL, the kernel's OOM killer,
// a crash): the sandbox's writes are in the host's workspace, protected files included, and nothing
// put them back. Its run folder keeps the watch's state (workspace-watch.ts, save), so a reaper
// judges the run as the controller would have, once the run's container is gone from the engine it
// ran on: `sandbox-run gc` does, before it hands a root run's lent trees back. Until then a run over
// one of those trees is refused (unjudgedRunOver), so the next run neither starts from nor hides
// what the dead one left. The state file is claimed by renaming it (one reaper judges a run; one
// that dies mid-judgement leaves its claim to the next); judged or not, the claim goes afterwards.
import fs from "node:fs";
import path from "node:path";
import { rememberLentTrees } from "../util/host-programs.js";
import { treesOverlap } from "../util/path-inside.js";
import { readSmallFile } from "../util/read-fd.js";
import { resolvedPath } from "../util/resolved-path.js";
import { readWatchState, type SavedWatch } from "../workspace/watch-state.js";
import {
  WATCH_STATE_CLAIM_PREFIX as CLAIM_PREFIX,
  WATCH_FOUND_FILE,
  WATCH_STATE_FAILED,
  WATCH_STATE_FILE,
} from "../workspace/watch-state-file.js";
import { WorkspaceWatch } from "../workspace/workspace-watch.js";
import { GC_ACCOUNT_HOMES, lentFolderProblem } from "./plan/host-folders.js";
import {
  ownerGone,
  ownerHere,
  processAlive,
  readRunDirOwner,
  runDirPath,
  runDirsParent,
  runDirsParentPrivate,
  WORKSPACE_STATE_DIR,
} from "./run-dirs.js";

const RUN_ID = /^[A-Za-z0-9_-]{1,128}$/;
/** Paths listed per kind in a judged run's summary. */
const MAX_LISTED = 50;

export interface JudgedDeadRun {
  runId: string;
  /** The trees judged: the workspace (when the run could write it) and the extra writable roots. */
  trees: string[];
  violationCount: number;
  /** What the run was not allowed to change ("path: change", at most 50). */
  violations: string[];
  /** Put back, removed, or set back to its mode (at most 50). */
  restored: string[];
  /** What could not be put back, with why: it stays as the sandbox left it. */
  notRestored: string[];
  /** The trees could not be judged (why): they stay as the sandbox left them. */
  failed?: string;
  /** Another live reaper (`gc`, this pid) is judging the run now: nothing was done here. */
  judgedBy?: number;
  /** Trees the run wrote that are gone, or were made again since (why): nothing of the run is left there to judge. */
  gone: string[];
  /**
   * What its own controller had found before it died while putting things back ("path: change
   * (rule)", at most 50): the trees may look cleaner now than the run left them.
   */
  foundBefore?: { violations: string[]; violationCount: number; hostRunFiles: string[] };
  /** Files the run changed that a tool on this machine reads or runs ("path: change (why)", at most 50). */
  hostRunFiles?: string[];
}

interface AwaitingRun {
  runId: string;
  stateDir: string;
  /** The state file, or a reaper's claim of it (the state renamed). */
  file: string;
  /** A live reaper's pid, when its claim is all there is: it is judging the run now. */
  judgingPid?: number;
}

/** A dead controller's run on this host whose trees were never judged (its state file, or a claim of a reaper that is gone). */
function awaitingRun(runId: string, tmpDir?: string): AwaitingRun | undefined {
  if (!RUN_ID.test(runId) || !runDirsParentPrivate(tmpDir)) return undefined;
  const dir = runDirPath(runId, tmpDir);
  const owner = readRunDirOwner(dir);
  const stateDir = path.join(dir, WORKSPACE_STATE_DIR);
  // A judgement that threw waits for gc whether its controller lives on or not (its container is gone).
  const failed = fs.existsSync(path.join(stateDir, WATCH_STATE_FAILED));
  // Its owner gone, or alive but its judgement failed (then on this host and in this namespace only).
  if (!owner || (!ownerGone(owner) && !(failed && ownerHere(owner)))) return undefined;
  let names: string[];
  try {
    if (!fs.lstatSync(stateDir).isDirectory()) return undefined;
    names = fs.readdirSync(stateDir);
  } catch {
    return undefined;
  }
  const name = names.find(
    (n) =>
      n === WATCH_STATE_FILE || (n.startsWith(CLAIM_PREFIX) && !processAlive(Number(n.slice(CLAIM_PREFIX.length)))),
  );
  if (name) return { runId, stateDir, file: path.join(stateDir, name) };
  // A live reaper's claim: it is being judged now. The claim is the state renamed, so which trees
  // the run wrote is still known (kill sweep, round 3, session 42: read as unknown, every run of
  // the user was refused as if that run had written its tree, for as long as a gc judged).
  const claim = names.find((n) => n.startsWith(CLAIM_PREFIX));
  if (!claim) return undefined;
  return {
    runId,
    stateDir,
    file: path.join(stateDir, claim),
    judgingPid: Number(claim.slice(CLAIM_PREFIX.length)),
  };
}

/** This host's dead runs whose trees wait to be judged. */
function awaitingRuns(tmpDir?: string): AwaitingRun[] {
  if (!runDirsParentPrivate(tmpDir)) return [];
  return fs
    .readdirSync(runDirsParent(tmpDir))
    .filter((name) => name.startsWith("run-") && !name.endsWith("-record"))
    .flatMap((name) => awaitingRun(name.slice("run-".length), tmpDir) ?? []);
}

/** The ids of this host's dead runs whose trees wait to be judged. */
export function deadRunsAwaitingJudgement(tmpDir?: string): string[] {
  return awaitingRuns(tmpDir).map((run) => run.runId);
}

/** Whether run `runId` (of a dead controller) still waits to be judged: its lent trees stay lent and its folder stays until then. */
export function awaitsJudgement(runId: string, tmpDir?: string): boolean {
  return awaitingRun(runId, tmpDir) !== undefined;
}

/** Whether judgeDeadRun(runId, engine) would judge the run now (`gc --dry-run`): it waits, and on that engine. */
export function awaitsJudgementOn(runId: string, engine: string, tmpDir?: string): boolean {
  const run = awaitingRun(runId, tmpDir);
  if (!run) return false;
  const state = readWatchState(run.file);
  return !state || state.about.engine === engine;
}

/**
 * A dead run that left one of `trees` (canonical paths) unjudged: the tree it shares with them.
 * Its own trees are read from its state; one that cannot be read is taken to share them all.
 */
export function unjudgedRunOver(
  trees: readonly string[],
  tmpDir?: string,
): { runId: string; tree: string; treesUnknown?: true; judgingPid?: number } | undefined {
  if (trees.length === 0) return undefined;
  for (const { runId, file, judgingPid } of awaitingRuns(tmpDir)) {
    const judging = judgingPid === undefined ? {} : { judgingPid };
    const state = readWatchState(file);
    if (!state) return { runId, tree: trees[0]!, treesUnknown: true, ...judging };
    for (const theirs of writableTrees(state))
      for (const ours of trees) if (treesOverlap(theirs, ours)) return { runId, tree: theirs, ...judging };
  }
  return undefined;
}

/**
 * Judges run `runId`'s trees from its saved state, when its controller is gone and the run was on
 * `engine` (lease-record.ts engineIdentity): the caller has made sure its container is gone from
 * there. Undefined when there is nothing to judge (or another reaper is judging it now).
 */
export async function judgeDeadRun(runId: string, engine: string, tmpDir?: string): Promise<JudgedDeadRun | undefined> {
  const run = awaitingRun(runId, tmpDir);
  if (!run) return undefined;
  const before = readWatchState(run.file);
  if (before && before.about.engine !== engine) return undefined;
  // Another gc judging it now is said, never passed over in silence (a second gc said nothing and
  // exited 0 while the first had not put the tree back yet); this process's own claim is its work.
  if (run.judgingPid !== undefined)
    return run.judgingPid === process.pid
      ? undefined
      : { runId, trees: before ? writableTrees(before) : [], gone: [], ...empty(), judgedBy: run.judgingPid };
  // One reaper judges a run: the rename succeeds for one of them.
  const claim = path.join(run.stateDir, `${CLAIM_PREFIX}${process.pid}`);
  let keep = false;
  try {
    if (run.file !== claim) fs.renameSync(run.file, claim);
  } catch {
    return undefined;
  }
  try {
    const state = readWatchState(claim);
    if (!state) return { runId, trees: [], gone: [], ...empty(), failed: "its saved state could not be read" };
    const trees = writableTrees(state);
    // The state is the host's own, in a folder only this user can write; still, a tree no run may
    // write (the host's configuration, a home folder, another temp folder's run folders) was never
    // lent by a run, whatever a folder claims: nothing of it is judged or written.
    for (const tree of trees) {
      const problem = lentFolderProblem(resolvedPath(tree), undefined, undefined, GC_ACCOUNT_HOMES);
      if (problem) {
        // Kept (and reported by every gc): runs over that tree stay refused.
        keep = true;
        return { runId, trees, gone: [], ...empty(), failed: `its state names ${tree}, which ${problem}` };
      }
    }
    // Host git judges them: never one a PATH folder of these trees holds (util/host-programs.ts).
    rememberLentTrees(trees);
    let gone: string[] = [];
    const foundBefore = readFoundBefore(run.stateDir);
    try {
      const resumed = WorkspaceWatch.resume(run.stateDir, state);
      gone = resumed.gone;
      const report = await resumed.watch.finish();
      const restore = report.restore;
      return {
        runId,
        trees,
        gone,
        violationCount: report.violationCount,
        violations: report.violations.slice(0, MAX_LISTED).map((v) => `${v.path}: ${v.change}`),
        restored: [
          ...(restore?.reverted ?? []),
          ...(restore?.removed ?? []),
          ...(restore?.objects ?? []),
          ...(restore?.modes ?? []),
        ].slice(0, MAX_LISTED),
        notRestored: [
          ...(restore?.notRestored ?? []).map((n) => `${n.path}: ${n.why}`),
          // Packs this host could not check: moved to the run's folder, for the user to verify and put back.
          ...(restore?.setAside ?? []).map(
            (a) => `${a.path}: not checked on this host, ${a.keptAt ? `set aside to ${a.keptAt}` : a.why}`,
          ),
          ...(restore?.remaining ?? []).map((v) => `${v.path}: still ${v.change} after the restore`),
        ].slice(0, MAX_LISTED),
        ...(foundBefore ? { foundBefore } : {}),
        ...(report.hostRunFiles.length
          ? { hostRunFiles: report.hostRunFiles.slice(0, MAX_LISTED).map((h) => `${h.path}: ${h.change} (${h.why})`) }
          : {}),
      };
    } catch (error) {
      // Kept, as the controller's own failed judgement was: runs over its trees stay refused until
      // a gc judges it (review, session 38: gc's failure dropped the state, and a later run over a
      // tree still holding a planted hook was accepted).
      keep = true;
      return {
        runId,
        trees,
        gone,
        ...empty(),
        failed: `${(error as Error).message}; its state is kept and runs over its trees are refused until gc judges it: fix that, then run \`sandbox-run gc\` again (or, to give up judging it, remove ${path.dirname(run.stateDir)}: nothing the run left in its trees is then checked)`,
      };
    }
  } finally {
    if (keep) fs.renameSync(claim, path.join(run.stateDir, WATCH_STATE_FILE));
    else {
      fs.rmSync(claim, { force: true });
      fs.rmSync(path.join(run.stateDir, WATCH_STATE_FAILED), { force: true });
    }
  }
}

/** What the dead controller's judgement wrote before its restore (WATCH_FOUND_FILE), checked as untrusted. */
function readFoundBefore(stateDir: string): JudgedDeadRun["foundBefore"] {
  const bytes = readSmallFile(path.join(stateDir, WATCH_FOUND_FILE), 1024 * 1024);
  if (!bytes) return undefined;
  try {
    const value = JSON.parse(bytes.toString("utf8")) as Record<string, unknown>;
    const texts = (v: unknown) =>
      Array.isArray(v) ? v.filter((t): t is string => typeof t === "string").slice(0, MAX_LISTED) : [];
    const count = Number.isInteger(value.violationCount) ? (value.violationCount as number) : 0;
    return { violations: texts(value.violations), violationCount: count, hostRunFiles: texts(value.hostRunFiles) };
  } catch {
    return undefined;
  }
}

function empty(): Pick<JudgedDeadRun, "violationCount" | "violations" | "restored" | "notRestored"> {
  return { violationCount: 0, violations: [], restored: [], notRestored: [] };
}

function writableTrees(state: SavedWatch): string[] {
  return [...(state.workspaceWritable ? [state.workspace] : []), ...state.writableRoots];
}
