// The error for a run that changed protected paths: which paths, and that the result was withheld.
import { SandboxRunError } from "../errors.js";
import type { RunPlan } from "../sandbox-contract.js";
import type { ProtectedChange } from "../workspace/protected-paths.js";
import type { RunTimeline } from "./run-events.js";

export function protectedPathsChanged(
  violations: ProtectedChange[],
  context: {
    plan: RunPlan;
    containerId: string;
    exitCode?: number | null;
    timeline: RunTimeline;
    /** false in copy mode: the changes were checked before they reached the host, and not applied. */
    applied?: boolean;
  },
): SandboxRunError {
  const shown = violations.slice(0, 10).map((v) => `${v.path} (${v.change})`);
  const more = violations.length > shown.length ? ` and ${violations.length - shown.length} more` : "";
  return new SandboxRunError(
    "policy-violation",
    `The agent changed protected paths of policy ${context.plan.policyName}: ${shown.join(", ")}${more}. The result was withheld${context.applied === false ? " and none of the run's changes were applied" : ""}.`,
    {
      hint:
        context.applied === false
          ? "The workspace is as it was before the run; if the task must change these paths, use a policy whose protectedPaths do not cover them."
          : "Review these changes before you use the workspace (the run's record or events list them); if the task must change them, use a policy whose protectedPaths do not cover them.",
      exitCode: context.exitCode,
      containerId: context.containerId,
      runId: context.plan.runId,
      lastEvents: context.timeline.lastEvents(),
    },
  );
}
