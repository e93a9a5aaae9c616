// The error for a run that changed protected paths: which paths and rules, what was restored (bind
// mode) or that nothing was applied (copy mode), that the result was withheld. The words are the
// workspace's: workspace/violation-message.ts.
import { SandboxRunError } from "../errors.js";
import type { RunPlan } from "../sandbox-contract.js";
import { type ViolationSummary, violationMessage } from "../workspace/violation-message.js";
import type { RunTimeline } from "./run-events.js";

export function protectedPathsChanged(
  summary: ViolationSummary,
  context: {
    plan: RunPlan;
    containerId: string;
    exitCode?: number | null;
    timeline: RunTimeline;
    /** false in copy mode: the changes were checked before they reached the host, and not applied. */
    applied?: boolean;
  },
): SandboxRunError {
  const { message, hint } = violationMessage(summary, context.plan.policyName, { applied: context.applied });
  return new SandboxRunError("policy-violation", message, {
    hint,
    exitCode: context.exitCode,
    containerId: context.containerId,
    runId: context.plan.runId,
    lastEvents: context.timeline.lastEvents(),
  });
}
