// Opening a run record for a planned call (the CLI's --record and the library's `record` option):
// the plan as it may be stored, and what a replay needs to make the same call again. The record is
// written into a staging folder the sandbox never holds (a private run folder of its own,
// `run-<runId>-record`, reaped like any run folder if the controller dies) and moved to the folder
// the caller named only after the run, once the workspace has been judged and handed back
// (record/record-target.ts says when a folder inside the workspace is written and when refused).
// The run holds that folder with its trees (run/tree-holds.ts), and its hold lasts until the record
// is in place: released earlier, the next run over a tree holding the folder would have its sandbox
// live (and its walks going) while the record is moved there.
import path from "node:path";
import { usageError } from "../errors.js";
import { runnerImageSpec } from "../image/runner-image.js";
import type { RecordedCall } from "../record/record-format.js";
import { RecordTarget, RecordTargetError } from "../record/record-target.js";
import { type RecordFinish, RunRecorder, type TrafficSink } from "../record/run-recorder.js";
import type { TrafficLimits } from "../record/traffic-log.js";
import { HostDir } from "../util/host-dir.js";
import { RUNNER_PLATFORMS } from "../util/platform.js";
import { currentVersions } from "./current-versions.js";
import { heldTrees } from "./plan/held-trees.js";
import type { PlannedRun } from "./plan/prepare-plan.js";
import { redactPlan } from "./plan/redact-plan.js";
import { RECORD_REFUSED_NOTE } from "./record-outcome.js";
import {
  createRunDir,
  privateRunDirsParent,
  RECORD_SCRATCH_DIR,
  RECORD_STAGING_DIR,
  removeRunDir,
} from "./run-dirs.js";

/** What the run calls while it holds its trees (RunRecorder's captureBefore and captureAfter). */
export type RecordCaptures = Pick<RunRecorder, "captureBefore" | "captureAfter">;

/** Where a finished record is. */
export type RecordPlace =
  /** In the folder the caller named. */
  | { dir: string; kept?: undefined }
  /** Refused there (why); the complete record is at `kept` instead. */
  | { dir: string; kept: string; why: string };

export interface RunRecord extends RecordCaptures {
  /** The gateway's exchanges go here. */
  readonly traffic: TrafficSink;
  onEvent(event: unknown): void;
  /**
   * Completes the record and moves it into place (call once the run is over, whatever its
   * outcome); returns what could not be recorded, and why the record is not where it was asked
   * to be (empty when all went well).
   */
  finish(outcome: RecordFinish): Promise<string[]>;
  /** Drops the record before its run started (another input was refused): nothing is left. */
  abandon(): Promise<void>;
  /** After finish(): where the record is. */
  readonly place: RecordPlace | undefined;
  /** The folder the record goes into: the run holds it with its trees. */
  readonly heldFolder: string;
  /** Takes the run's hold on its trees, given back once finish() or abandon() is done. */
  keepHold(hold: { release(): void }): void;
}

/** A usage error when the folder cannot be used (not empty, not a folder, a link inside the workspace). */
export async function openRunRecord(
  dir: string,
  planned: PlannedRun,
  trafficLimits?: TrafficLimits,
): Promise<RunRecord> {
  const { run, plan } = planned;
  let target: RecordTarget;
  try {
    target = RecordTarget.prepare(dir, heldTrees(planned));
  } catch (error) {
    throw usageError(
      `Cannot write the run record: ${(error as Error).message}.`,
      "Record into a new or empty folder (--record, `record`, or a `recordTo` without earlier recordings: move those away first); best one outside the workspace.",
    );
  }
  const stagingDir = createRunDir(`${plan.runId}-record`);
  let stagingParent: HostDir | undefined;
  let staging: HostDir | undefined;
  let recorder: RunRecorder;
  try {
    stagingParent = HostDir.open(stagingDir);
    staging = stagingParent.mkdir(RECORD_STAGING_DIR);
    const scratch = stagingParent.mkdir(RECORD_SCRATCH_DIR);
    scratch.close();
    recorder = await RunRecorder.open({
      staging,
      scratch: path.join(stagingDir, RECORD_SCRATCH_DIR),
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
    staging?.close();
    stagingParent?.close();
    removeRunDir(stagingDir);
    throw usageError(
      `Cannot write the run record: ${(error as Error).message}.`,
      "Check that the temp dir (TMPDIR) is writable; the record is staged there during the run.",
    );
  }
  const parent = stagingParent;
  const stagingFolder = staging;
  let place: RecordPlace | undefined;
  let hold: { release(): void } | undefined;
  // Once the record is finished or abandoned, a hold handed over late (a run still unwinding) is
  // released at once: kept, it would make every later run over those trees wait for ever.
  let done = false;
  const releaseHold = () => {
    done = true;
    hold?.release();
    hold = undefined;
  };
  return {
    traffic: recorder.traffic,
    onEvent: recorder.onEvent,
    captureBefore: () => recorder.captureBefore(),
    captureAfter: () => recorder.captureAfter(),
    get place() {
      return place;
    },
    heldFolder: target.folder,
    keepHold(taken) {
      // A second hold (one record passed to two runs: a caller's mistake) is given back at once
      // too, never dropped unreleased.
      if (done || hold) return taken.release();
      hold = taken;
    },
    async abandon() {
      try {
        await recorder.discard();
        stagingFolder.close();
        parent.close();
        removeRunDir(stagingDir);
      } finally {
        releaseHold();
      }
    },
    // Never throws: a record that cannot be put in place is reported beside the run's outcome.
    async finish(outcome) {
      try {
        return await finishAndPlace(outcome);
      } finally {
        releaseHold();
      }
    },
  };

  async function finishAndPlace(outcome: RecordFinish): Promise<string[]> {
    const notes = await recorder.finish(outcome);
    stagingFolder.close();
    try {
      place = putInPlace(target, parent, planned.plan.runId);
      if (place.kept) {
        notes.push(
          `${RECORD_REFUSED_NOTE}${place.dir}: ${place.why}. The complete record is kept at ${place.kept}; check it, then move it where you want it (a folder outside the workspace is best)`,
        );
      }
    } catch (error) {
      notes.push(`${RECORD_REFUSED_NOTE}${target.dir}, and it could not be kept either: ${(error as Error).message}`);
    } finally {
      parent.close();
      removeRunDir(stagingDir);
    }
    return notes;
  }
}

/** Moves the staged record to its target, or, when refused, to a folder of its own next to the run folders. */
function putInPlace(target: RecordTarget, stagingParent: HostDir, runId: string): RecordPlace {
  try {
    target.publish(stagingParent, RECORD_STAGING_DIR);
    return { dir: target.dir };
  } catch (error) {
    const why = error instanceof RecordTargetError ? error.message : `${(error as Error).message}`;
    // Same filesystem, a private parent: a rename that cannot be refused.
    const keptParent = HostDir.open(privateRunDirsParent());
    try {
      const kept = `record-${runId}`;
      stagingParent.moveTo(RECORD_STAGING_DIR, keptParent, kept);
      return { dir: target.dir, kept: path.join(keptParent.path, kept), why };
    } finally {
      keptParent.close();
    }
  }
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
