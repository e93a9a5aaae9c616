// Opening a run record for a planned call (the CLI's --record and the library's `record` option):
// the plan as it may be stored, and what a replay needs to make the same call again.
import { usageError } from "../errors.js";
import { runnerImageSpec } from "../image/runner-image.js";
import type { RecordedCall, RecordVersions } from "../record/record-format.js";
import { RunRecorder } from "../record/run-record.js";
import type { TrafficLimits } from "../record/traffic-log.js";
import { sandboxRunVersion } from "../util/package-version.js";
import { RUNNER_PLATFORMS } from "../util/platform.js";
import type { PlannedRun } from "./prepare-plan.js";
import { redactPlan } from "./redact-plan.js";

/** A usage error when the folder cannot be used (not empty, not writable). */
export function openRunRecord(dir: string, planned: PlannedRun, trafficLimits?: TrafficLimits): RunRecorder {
  const { run } = planned;
  try {
    return new RunRecorder({
      dir,
      prompt: run.prompt,
      schema: run.schema,
      policy: run.policy,
      workspace: run.cwd,
      plan: redactPlan(planned),
      call: recordedCall(planned),
      versions: currentVersions(),
      ...(trafficLimits ? { trafficLimits } : {}),
    });
  } catch (error) {
    throw usageError(
      `Cannot write the run record: ${(error as Error).message}.`,
      "Pass --record (or `record`) a new or empty folder.",
    );
  }
}

/** This sandbox-run and the Pi and Node of its runner image. */
export function currentVersions(): RecordVersions {
  const image = runnerImageSpec();
  return { sandboxRun: sandboxRunVersion(), pi: image.piVersion, node: image.nodeVersion };
}

function recordedCall(planned: PlannedRun): RecordedCall {
  const { run, plan } = planned;
  const route = run.routing.routes.find((r) => r.id === run.routing.selectedRouteId) ?? run.routing.routes[0];
  return {
    model: run.model,
    route: { id: route?.id ?? "", api: route?.api ?? "", model: route?.model ?? "" },
    sandboxModelsJson: run.routing.containerModelsJson,
    workspace: { host: run.cwd, sandbox: plan.workingDir },
    writableRoots: run.writableRoots,
    image: plan.image,
    defaultImage: RUNNER_PLATFORMS.some((platform) => plan.image === runnerImageSpec(platform).tag),
    timeoutMs: run.timeoutMs,
    budgets: {
      ...(run.budgets.maxTurns !== undefined ? { maxTurns: run.budgets.maxTurns } : {}),
      ...(run.budgets.maxCostUsd !== undefined ? { maxCostUsd: run.budgets.maxCostUsd } : {}),
    },
    sandboxEnvNames: planned.callerEnvNames,
    extraArgs: run.extraArgs,
  };
}
