// The operations behind the `sandbox-run` command, as library functions: everything the command
// does goes through these (and the types of index.ts), so a program can do what the command can.
//
// This module stays light, since every command loads it before anything else (--help and
// --version too): it imports types, and a few small pure modules (the runner image's tag, the
// trees a plan holds, what a record says of an outcome); every other function loads its work with
// a dynamic import() when it is called. The CLI is bundled with one chunk per such import
// (scripts/bundle-cli.mjs), and tests/unit/cli-start-up.test.ts checks what start-up loads.
// .dependency-cruiser.cjs keeps its static imports to that short list (`operations-face-stays-light`).
import type { ContainerPiAgent, ContainerPiAgentConfig } from "./container-pi-agent.js";
import type { DemoOptions, DemoOutcome } from "./operations/demo.js";
import type { DoctorOptions } from "./operations/doctor.js";
import type { PlanCallOptions } from "./operations/dry-run.js";
import type { CollectedGarbage, GarbageOptions } from "./operations/garbage.js";
import type { BuildImagesOptions, BuiltImages, PruneResult } from "./operations/images.js";
import type { PlannedReplay, ReplayCallOptions } from "./operations/replay-call.js";
import type { ShownRecord, ShowRecordOptions } from "./operations/show-record.js";
import type { Policy } from "./policy/policy-schema.js";
import type { RunRecord } from "./run/open-run-record.js";
import type { PlannedRun } from "./run/plan/prepare-plan.js";

export type { RunnerImageSpec } from "./image/runner-image.js";
export { runnerImageSpec } from "./image/runner-image.js";
export type { DemoOptions, DemoOutcome } from "./operations/demo.js";
export type { DoctorOptions, DoctorReport } from "./operations/doctor.js";
export type { PlanCallOptions } from "./operations/dry-run.js";
export type {
  CollectedGarbage,
  GarbageOptions,
  HandedBackRun,
  JudgedDeadRun,
  KeptPackFolder,
  ReapedContainer,
} from "./operations/garbage.js";
export type { BuildImagesOptions, BuiltImages, PruneResult } from "./operations/images.js";
export type { PlannedReplay, ReplayCallOptions } from "./operations/replay-call.js";
export type { ShownRecord, ShowRecordOptions } from "./operations/show-record.js";
export type { RecordPlace, RunRecord } from "./run/open-run-record.js";
export { heldTrees } from "./run/plan/held-trees.js";
export { handBackSummary, RECORD_REFUSED_NOTE, recordedSuccess } from "./run/record-outcome.js";

/** A ContainerPiAgent, its module (the engines' clients, the servers) loaded now. */
export async function createAgent(config?: ContainerPiAgentConfig): Promise<ContainerPiAgent> {
  const { ContainerPiAgent } = await import("./container-pi-agent.js");
  return new ContainerPiAgent(config);
}

/**
 * A call's plan without an agent (what --dry-run prints): ContainerPiAgent.plan()'s plan, placed by
 * what is known of the engines without asking them. Reads files (policy, models, schema), runs nothing.
 */
export async function planCall(prompt: string, options: PlanCallOptions): Promise<PlannedRun> {
  return (await import("./operations/dry-run.js")).planCall(prompt, options);
}

/** A plan as it may be printed or stored (credentials redacted), once Pi is known to take its schema. */
export async function dryRunView(planned: PlannedRun): Promise<Record<string, unknown>> {
  return (await import("./operations/dry-run.js")).dryRunView(planned);
}

/**
 * Opens a run record for a planned call (a usage error when the folder cannot be used): pass it to
 * runPlanned() as `recorder`, and finish() it once the run is over, whatever its outcome: the run
 * holds its trees and the record's folder until then (a later run over them waits).
 */
export async function openRunRecord(dir: string, planned: PlannedRun): Promise<RunRecord> {
  return (await import("./run/open-run-record.js")).openRunRecord(dir, planned);
}

/** A recorded call planned again, its model answered from the recording (see PlannedReplay). */
export async function planReplay(recordDir: string, options: ReplayCallOptions): Promise<PlannedReplay> {
  return (await import("./operations/replay-call.js")).planReplay(recordDir, options);
}

/** A run record as one self-contained page, or a Markdown summary. */
export async function showRecord(recordDir: string, options?: ShowRecordOptions): Promise<ShownRecord> {
  return (await import("./operations/show-record.js")).showRecord(recordDir, options);
}

/** Checks what a run needs (engines, runtimes, the runner image, credentials, a policy's secrets). */
export async function doctor(options: DoctorOptions): Promise<{ ok: boolean }> {
  return (await import("./operations/doctor.js")).doctor(options);
}

/** Removes what dead controllers left behind: containers on every engine of the pool, run folders here. */
export async function collectGarbage(options?: GarbageOptions): Promise<CollectedGarbage> {
  return (await import("./operations/garbage.js")).collectGarbage(options);
}

/** Builds the runner image (and an --apt image) on the engine DOCKER_HOST names. */
export async function buildImages(options?: BuildImagesOptions): Promise<BuiltImages> {
  return (await import("./operations/images.js")).buildImages(options);
}

/** Loads a `docker save` tar file that tags only `tag` (default: this version's runner image); anything else loads nothing. */
export async function loadImageTar(file: string, tag?: string): Promise<void> {
  return (await import("./operations/images.js")).loadImageTar(file, tag);
}

/** Removes the runner images of other sandbox-run versions; `current` is this version's, kept. */
export async function pruneImages(): Promise<PruneResult & { current: string }> {
  return (await import("./operations/images.js")).pruneImages();
}

/** The built-in policies and what each is for. */
export async function listPolicies(): Promise<Array<{ name: string; description: string }>> {
  return (await import("./operations/policies.js")).listPolicies();
}

/** The effective policy of a built-in name or a policy file (validated as a run would). */
export async function readPolicy(nameOrFile: string): Promise<Policy> {
  return (await import("./operations/policies.js")).readPolicy(nameOrFile);
}

/** The whole pipeline against a bundled scripted model (no provider key). */
export async function runDemo(options?: DemoOptions): Promise<DemoOutcome> {
  return (await import("./operations/demo.js")).runDemo(options);
}
