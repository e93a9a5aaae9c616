// The error for a run that changed protected paths: which paths and rules, what was restored, that
// the result was withheld (the words are the workspace's: workspace/violation-message.ts).
import { SandboxRunError } from "../errors.js";
import type { RunPlan } from "../sandbox-contract.js";
import { violationMessage } from "../workspace/violation-message.js";
import type { WorkspaceReport } from "../workspace/workspace-watch.js";
import type { RunTimeline } from "./run-events.js";

export function protectedPathsChanged(
  workspace: WorkspaceReport,
  context: { plan: RunPlan; containerId: string; exitCode?: number | null; timeline: RunTimeline },
): SandboxRunError {
  const { message, hint } = violationMessage(workspace, context.plan.policyName);
  return new SandboxRunError("policy-violation", message, {
    hint,
    exitCode: context.exitCode,
    containerId: context.containerId,
    runId: context.plan.runId,
    lastEvents: context.timeline.lastEvents(),
  });
}
