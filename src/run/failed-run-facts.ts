// What the failure of a run whose container ran says about it: which run and what ran it (every
// such failure, a hand-back the host refused after the run too: review, session 31, a copy-mode
// apply that met the user's own edit lost its run id, image and policy), and, for a run that
// failed, what it left in the workspace (review, session 27: a CI script could not tell "timed
// out, touched nothing" from "timed out half way through a refactor").
import { SandboxRunError, withHint } from "../errors.js";
import type { RunPlan } from "../sandbox-contract.js";
import { leftInWorkspace } from "./left-in-workspace.js";
import type { WorkspaceOutcome } from "./run-workspace.js";

export interface RanRun {
  plan: Pick<RunPlan, "runId" | "image" | "policyName" | "handBack" | "workspaceMode">;
  containerId: string;
  /** The sandbox's exit code, where it exited. */
  exitCode: number | null | undefined;
  piVersion: string;
}

/** The error, with the run's id, container, exit code, image, policy and Pi version where it lacks them. */
export function withRunFacts(error: unknown, ran: RanRun): unknown {
  if (!(error instanceof SandboxRunError)) return error;
  error.runId ??= ran.plan.runId;
  error.containerId ??= ran.containerId;
  if (error.exitCode === undefined && ran.exitCode !== undefined) error.exitCode = ran.exitCode;
  error.image ??= ran.plan.image;
  error.policy ??= ran.plan.policyName;
  error.piVersion ??= ran.piVersion;
  return error;
}

/** A failed run's error with the run's facts and what it left in the workspace (changedFiles, hostRunFiles). */
export function failedRunError(error: unknown, ran: RanRun, outcome: WorkspaceOutcome): unknown {
  withRunFacts(error, ran);
  if (!(error instanceof SandboxRunError)) return error;
  // Branch and patch leave the workspace as it was; copy mode applies nothing a rule refused.
  if (ran.plan.handBack !== "apply" || (ran.plan.workspaceMode === "copy" && outcome.violationCount > 0)) return error;
  error.changedFiles ??= leftInWorkspace(outcome.changedFiles, outcome.restore);
  if (outcome.hostRunCount > 0) {
    error.hostRunFiles ??= outcome.hostRunFiles;
    error.hostRunCount ??= outcome.hostRunCount;
  }
  // Copy mode brings nothing back from a run stopped before Pi settled: said, where an empty
  // changedFiles read as "touched nothing" (review, session 29).
  if (outcome.discarded)
    return withHint(
      error,
      `${error.hint ? `${error.hint} ` : ""}Copy mode: the run stopped before its workspace came back, so nothing it changed in the sandbox was kept.`,
    );
  return error;
}
