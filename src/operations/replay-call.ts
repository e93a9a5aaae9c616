// `sandbox-run replay` as a library operation: a recorded call planned again, for a fresh sandbox,
// with the model answered from the recording (no provider, no key). A record is untrusted input,
// never configuration: the replay runs under the caller's policy, image and folders, and the
// record's are only compared (a record that asks for more is refused when it is planned). The
// recorded prompt, schema and model are the call's; budgets and the timeout only ever narrow it.
import path from "node:path";
import { ContainerPiAgent, type ContainerPiAgentConfig } from "../container-pi-agent.js";
import { isSandboxRunError } from "../errors.js";
import type { RecordVersions } from "../record/record-format.js";
import { RECORD_FILES } from "../record/record-format.js";
import { compareOutcome, type OutcomeComparison } from "../replay/compare-outcome.js";
import { describeDifference, type RecordDifference } from "../replay/compare-record.js";
import { type LoadedRecord, loadRecord } from "../replay/load-record.js";
import type { ReplayMode, ReplaySpeed } from "../replay/replay-server.js";
import type { ReplaySource } from "../replay/replay-source.js";
import type { RunDetails } from "../run/execute-run.js";
import type { PlannedRun } from "../run/plan/prepare-plan.js";
import type { RunOptions } from "../run/plan/resolve-options.js";

export interface ReplayCallOptions {
  /**
   * The caller's choices: policy (or sandbox), image, cwd, writable roots, env, timeout, runtime,
   * budgets, workspacePath (default: where the recording saw the workspace). Not the prompt, the
   * schema or the model: those are the record's.
   */
  options: RunOptions;
  /** strict (default): stop at the first request that differs; lenient: report and go on. */
  mode?: ReplayMode;
  /** fast (default), or recorded: keep the recorded timing of the replies. */
  speed?: ReplaySpeed;
  /** The agent the replay runs on (host environment, image builds, progress). */
  agent?: ContainerPiAgentConfig;
}

export interface PlannedReplay {
  /** Run `planned` on it (runPlanned), then close() it. */
  agent: ContainerPiAgent;
  planned: PlannedRun;
  recordDir: string;
  mode: ReplayMode;
  /** What the recorded run came to, and what it was made with. */
  recorded: { ok: boolean; errorCode?: string; exchanges: number; versions: RecordVersions };
  /** Where the record's policy, image or folders differ from this replay's (compared, never applied). */
  differences: Array<Pick<RecordDifference, "field" | "recorded" | "now"> & { text: string }>;
  /** Whether this replay's outcome equals the recorded one: the result and changed files, or the failure's code. */
  compareOutcome(outcome: { details?: RunDetails; error?: unknown }): OutcomeComparison;
}

export function planReplay(recordDir: string, call: ReplayCallOptions): PlannedReplay {
  const mode = call.mode ?? "strict";
  const speed = call.speed ?? "fast";
  const record = loadRecord(recordDir);
  const given = call.options;
  const options: RunOptions = {
    ...given,
    schema: record.schema,
    // The record's files are configuration too: inside the workspace, they are reported (or refused).
    configFiles: {
      prompt: path.join(record.dir, RECORD_FILES.prompt),
      ...(record.schema ? { schema: path.join(record.dir, RECORD_FILES.schema) } : {}),
    },
  };
  if (!record.schema) delete options.schema;
  // Budgets only ever stop a run sooner: the recorded ones hold unless the caller sets their own,
  // and the turn budget only where it is below the caller's policy's (below, once that is known).
  const { budgets } = record.call;
  if (given.maxCostUsd === undefined && budgets.maxCostUsd !== undefined) options.maxCostUsd = budgets.maxCostUsd;

  // One call: with SANDBOX_RUN_WARM, no refill after its claim (it would only be removed at the end).
  // One call: no refill after its claim; `warm: undefined` in call.agent is not a choice (review, session 27).
  const agent = new ContainerPiAgent({ ...call.agent, warm: call.agent?.warm ?? { calls: 1 } });
  // compareContext left open: the model's context is compared when this policy gives Pi the same
  // tools as the recorded one; under a policy with other tools only the messages must match.
  const source: ReplaySource = { records: [record.dir], next: () => ({ record, mode, speed }) };
  let planned = agent.plan(record.prompt, { ...options, replay: source });
  // The recorded timeout and turn budget hold when they are the smaller ones (a limit only ever
  // narrows a run: review, a record's 250 turns replaced a policy's 1).
  const narrower: RunOptions = {};
  if (given.timeoutMs === undefined && record.call.timeoutMs < planned.run.timeoutMs)
    narrower.timeoutMs = record.call.timeoutMs;
  if (given.maxTurns === undefined && budgets.maxTurns !== undefined && budgets.maxTurns < planned.run.budgets.maxTurns)
    narrower.maxTurns = budgets.maxTurns;
  if (Object.keys(narrower).length > 0)
    planned = agent.plan(record.prompt, { ...options, ...narrower, replay: source });
  planned.run.warnings.push(...missingInputs(record, options));
  const differences = (planned.replay?.differences ?? []).map((d) => ({
    field: d.field,
    recorded: d.recorded,
    now: d.now,
    text: describeDifference(d),
  }));
  return {
    agent,
    planned,
    recordDir: record.dir,
    mode,
    recorded: {
      ok: record.outcome.ok,
      ...(record.outcome.ok ? {} : { errorCode: record.outcome.error.code }),
      exchanges: record.exchanges.length,
      versions: record.versions,
    },
    differences,
    compareOutcome: ({ details, error }) =>
      details?.replay?.outcome ??
      compareOutcome(
        record.outcome,
        details
          ? { ok: true, result: details.result, changedFiles: details.changedFiles }
          : { ok: false, code: isSandboxRunError(error) ? error.code : "internal" },
      ),
  };
}

/** What the recorded call had that this replay cannot give it (values the record never holds). */
function missingInputs(record: LoadedRecord, options: RunOptions): string[] {
  const given = new Set(Object.keys(options.env ?? {}));
  const absent = record.call.sandboxEnvNames.filter((name) => !given.has(name));
  if (absent.length === 0) return [];
  return [
    `the recorded run set ${absent.join(", ")} for the sandbox; their values are not recorded (pass them with --env)`,
  ];
}
