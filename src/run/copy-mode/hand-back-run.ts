// The run's side of hand-back "branch" and "patch" (copy mode): when the run starts, a private
// folder in the run folder and, for a branch, the repository and the commit HEAD names (before
// anything is copied, so that commit is what the sandbox saw); after a successful run, the judged
// workspace handed to hand-back/ as a commit or a patch, and the `workspace.handed-back` event.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { SandboxRunError } from "../../errors.js";
import { type BranchSelection, branchSelection, commitChanges } from "../../hand-back/branch-commit.js";
import { patchOfChanges } from "../../hand-back/change-patch.js";
import { findHandBackBase, type HandBackBase } from "../../hand-back/hand-back-base.js";
import type { HandBackReport } from "../../hand-back/hand-back-report.js";
import type { RunPlan } from "../../sandbox-contract.js";
import type { HostTree } from "../../workspace-transfer/host-tree.js";
import { type JudgedChange, judgedChanges } from "../../workspace-transfer/judged-changes.js";
import type { ReturnedTree } from "../../workspace-transfer/returned-tar.js";
import { HAND_BACK_DIR } from "../run-dirs.js";
import type { RunTimeline } from "../run-events.js";

/**
 * Makes the private folder when the plan hands a writable workspace back as a branch or a patch;
 * for a branch, finds the repository and its HEAD commit (a usage error when there is none).
 */
export async function prepareHandBack(plan: RunPlan, runDir: string): Promise<HandBackBase | undefined> {
  const workspace = plan.copies.find((c) => c.kind === "workspace" && c.writable);
  if (plan.handBack === "apply" || !workspace) return undefined;
  const privateDir = path.join(runDir, HAND_BACK_DIR);
  fs.mkdirSync(privateDir, { mode: 0o700 });
  return plan.handBack === "branch" ? findHandBackBase(workspace.hostPath, privateDir) : undefined;
}

interface HandBackInput {
  plan: RunPlan;
  runDir: string;
  /** The task, for the commit message. */
  prompt?: string;
  /** From prepareHandBack (a branch). */
  base: HandBackBase | undefined;
  timeline: RunTimeline;
  /** The workspace as it was sent and as it came back, judged. */
  judged: { tree: HostTree; returned: ReturnedTree; what: string };
  /** The run's stop (the caller's Ctrl-C): once it fired, no patch or branch is handed back. */
  signal?: AbortSignal;
  /** A branch's selection the check was judged with (selectionForBranch). */
  selection?: BranchSelection;
}

/**
 * The selection as the check left the returned tree: a change to what the check took out of it
 * (the caches derived from objects, which could make a repository's objects lie: a multi-pack-index
 * naming a payload as `run.sh`'s blob) becomes the host's copy removed, as an apply removes it, or
 * nothing where the host had none. The selection was chosen before the check and kept them (review,
 * session 45).
 */
export function selectionAfterCheck(selection: BranchSelection, returned: ReturnedTree): BranchSelection {
  const present = new Set(returned.after.map((e) => e.path));
  const kept: JudgedChange[] = [];
  for (const change of selection.kept) {
    if (!change.after || present.has(change.path)) kept.push(change);
    else if (change.before) kept.push({ path: change.path, before: change.before });
  }
  return { kept, leftOut: selection.leftOut };
}

/**
 * What a branch hand-back will commit and leave out (ignored paths, nested repositories,
 * submodules), chosen before the check of the returned workspace: links resolve through the host's
 * own entries where the branch leaves the change out, and the commit then takes this same
 * selection. Undefined for a patch (it leaves out only git metadata) or an applied tree.
 */
export async function selectionForBranch(
  input: Pick<HandBackInput, "plan" | "runDir" | "base" | "signal"> & { tree: HostTree; returned: ReturnedTree },
): Promise<BranchSelection | undefined> {
  if (input.plan.handBack !== "branch" || !input.base) return undefined;
  try {
    return await branchSelection({
      base: input.base,
      changes: judgedChanges(input.tree, input.returned),
      sent: input.tree,
      returnedPaths: input.returned.after.map((e) => e.path),
      privateDir: path.join(input.runDir, HAND_BACK_DIR),
      ...(input.signal ? { signal: input.signal } : {}),
    });
  } catch (error) {
    input.signal?.throwIfAborted();
    // Judged without it, links could lead elsewhere on the host than in the sandbox: nothing goes back.
    throw new SandboxRunError(
      "not-applied",
      `Which of the run's changes a branch would leave out could not be read (${(error as Error).message}); nothing was handed back.`,
      {
        hint: "Fix what git reports in the repository (a lock, the disk, its permissions) and run again.",
        cause: error,
      },
    );
  }
}

export async function handBackJudged(input: HandBackInput): Promise<HandBackReport> {
  const { plan, timeline, judged, signal } = input;
  signal?.throwIfAborted();
  const started = performance.now();
  const privateDir = path.join(input.runDir, HAND_BACK_DIR);
  // A branch's selection already holds the changes it commits.
  const changes = input.selection ? [] : judgedChanges(judged.tree, judged.returned);
  if (plan.handBack === "patch") {
    const report = await patchOfChanges({
      changes,
      sent: judged.tree,
      privateDir,
      what: judged.what,
      ...(signal ? { signal } : {}),
    });
    timeline.sandbox("workspace.handed-back", {
      mode: "patch",
      files: report.files,
      bytes: report.bytes,
      notes: report.notes.slice(0, 20),
      ms: Math.round(performance.now() - started),
    });
    return report;
  }
  const report = await commitChanges({
    base: input.base!,
    changes,
    ...(input.selection ? { selection: input.selection } : {}),
    sent: judged.tree,
    returnedPaths: judged.returned.after.map((e) => e.path),
    runId: plan.runId,
    message: commitMessage(plan, input.prompt),
    privateDir,
    what: judged.what,
    ...(signal ? { signal } : {}),
  });
  timeline.sandbox("workspace.handed-back", {
    mode: "branch",
    branch: report.branch ?? null,
    commit: report.commit ?? null,
    base: report.base,
    repository: report.repository,
    ...report.diffStat,
    leftOut: report.leftOut.slice(0, 20),
    leftOutCount: report.leftOutCount,
    ...(report.uncounted ? { uncounted: report.uncounted } : {}),
    ms: Math.round(performance.now() - started),
  });
  return report;
}

/** The branch hand-back's commit message: the run, its model and policy, and the task's first line. */
function commitMessage(plan: RunPlan, prompt: string | undefined): string {
  const firstLine = (prompt ?? "").trim().split("\n")[0] ?? "";
  // Control characters (C0, DEL, C1) become spaces: a commit message is shown on terminals.
  const task = [...firstLine]
    .map((c) => (c.charCodeAt(0) < 0x20 || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f) ? " " : c))
    .join("")
    .slice(0, 200);
  return [
    `sandbox-run: changes of run ${plan.runId}`,
    "",
    "The judged workspace of a sandbox-run run, committed by the host's git (no hooks, no filters).",
    "",
    `Run: ${plan.runId}`,
    `Model: ${plan.model}`,
    `Policy: ${plan.policyName}`,
    ...(task ? [`Task: ${task}`] : []),
    "",
  ].join("\n");
}
