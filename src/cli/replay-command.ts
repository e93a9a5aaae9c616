// `sandbox-run replay <record>`: the recorded call again, in a fresh sandbox (the recorded prompt,
// schema and model), with the model answered from the recording: no provider, no key. A record is
// untrusted input, never configuration: the replay runs under the caller's policy, image and
// folders (--policy, --image, --cwd, --writable, or the defaults), and the record's are only
// compared (a record that asks for more is refused). Says whether the outcome equals the recorded
// one; a request that differs from the recording stops a strict replay with exit code 4.
import path from "node:path";
import type { Command } from "commander";
import type { RunDetails } from "../run/execute-run.js";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { isSandboxRunError, usageError } from "../errors.js";
import { compareOutcome } from "../replay/compare-outcome.js";
import { describeDifference, type RecordDifference } from "../replay/compare-record.js";
import { type LoadedRecord, loadRecord } from "../replay/load-record.js";
import type { ReplayMode, ReplaySpeed } from "../replay/replay-server.js";
import type { ReplaySource } from "../replay/replay-source.js";
import { RECORD_FILES } from "../record/record-format.js";
import type { RunOptions } from "../run/plan/resolve-options.js";
import type { CliIo } from "./cli-io.js";
import type { CommandContext } from "./lazy-command.js";
import { parseRunFlags } from "./parse-run-args.js";
import { type ReplayOutput, type RunCommandFlags, runPlannedCommand } from "./run-command.js";

export interface ReplayCommandFlags extends RunCommandFlags {
  replayMode?: string;
  replaySpeed?: string;
  /** Where the workspace appears inside the sandbox (default: where the recording saw it). */
  workspacePath?: string;
}

/** `sandbox-run replay`'s action. */
export default function replayAction(
  ctx: CommandContext,
  recordDir: string,
  flags: ReplayCommandFlags,
  command: Command,
): Promise<number> {
  // commander gives the root command every flag it also has, wherever it is written.
  const root = command.parent?.opts<ReplayCommandFlags>() ?? {};
  const merged = {
    ...definedOnly(root),
    ...definedOnly(flags),
    build: root.build !== false && flags.build !== false,
  };
  return replayCommand(recordDir, merged, ctx.io, ctx.signals);
}

function definedOnly<T extends object>(flags: T): T {
  return Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== undefined)) as T;
}

export async function replayCommand(
  recordDir: string,
  flags: ReplayCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
): Promise<number> {
  const mode = choice<ReplayMode>("--replay-mode", flags.replayMode ?? "strict", ["strict", "lenient"]);
  const speed = choice<ReplaySpeed>("--replay-speed", flags.replaySpeed ?? "fast", ["fast", "recorded"]);
  for (const flag of ["schema", "promptFile", "model", "models"] as const) {
    if (flags[flag] !== undefined) {
      throw usageError(
        `replay takes the prompt, schema and model from the record; --${kebab(flag)} cannot change them.`,
        "Drop the flag (--policy or --sandbox, --image, --cwd, --writable, --env, --timeout and --runtime are yours to choose).",
      );
    }
  }
  const record = loadRecord(recordDir);
  const { call } = record;
  const options: RunOptions = {
    ...parseRunFlags({ ...flags, schema: undefined }, io.env),
    ...(record.schema ? { schema: record.schema } : {}),
    // The record's files are configuration too: inside the workspace, they are reported (or refused).
    configFiles: {
      prompt: path.join(record.dir, RECORD_FILES.prompt),
      ...(record.schema ? { schema: path.join(record.dir, RECORD_FILES.schema) } : {}),
    },
  };
  if (flags.workspacePath !== undefined) options.workspacePath = flags.workspacePath;
  // Budgets only ever stop a run sooner: the recorded ones hold unless the caller sets their own.
  if (flags.maxTurns === undefined && call.budgets.maxTurns !== undefined) options.maxTurns = call.budgets.maxTurns;
  if (flags.maxCost === undefined && call.budgets.maxCostUsd !== undefined)
    options.maxCostUsd = call.budgets.maxCostUsd;

  const agent = new ContainerPiAgent({
    hostEnv: io.env,
    autoBuildImage: flags.build !== false,
    onProgress: flags.quiet ? undefined : (line) => io.stderr(`${line}\n`),
  });
  // compareContext left open: the model's context is compared when this policy gives Pi the same
  // tools as the recorded one; under a policy with other tools only the messages must match.
  const source: ReplaySource = { records: [record.dir], next: () => ({ record, mode, speed }) };
  let planned = agent.plan(record.prompt, { ...options, replay: source });
  // The recorded timeout holds when it is the shorter one (a limit only ever narrows a run).
  if (flags.timeout === undefined && call.timeoutMs < planned.run.timeoutMs) {
    planned = agent.plan(record.prompt, { ...options, timeoutMs: call.timeoutMs, replay: source });
  }
  planned.run.warnings.push(...missingInputs(record, options));
  const differences = planned.replay?.differences ?? [];
  return runPlannedCommand(agent, planned, flags, io, signals, replayOutput(record, mode, flags, differences));
}

/** What the recorded call had that this replay cannot give it (values the record never holds). */
function missingInputs(record: LoadedRecord, options: RunOptions): string[] {
  const warnings: string[] = [];
  const given = new Set(Object.keys(options.env ?? {}));
  const absent = record.call.sandboxEnvNames.filter((name) => !given.has(name));
  if (absent.length > 0) {
    warnings.push(
      `the recorded run set ${absent.join(", ")} for the sandbox; their values are not recorded (pass them with --env)`,
    );
  }
  return warnings;
}

function replayOutput(
  record: LoadedRecord,
  mode: ReplayMode,
  flags: ReplayCommandFlags,
  differences: readonly RecordDifference[],
): ReplayOutput {
  const quiet = flags.quiet === true;
  const outcomeOf = ({ details, error }: { details?: RunDetails; error?: unknown }) =>
    details?.replay?.outcome ??
    compareOutcome(
      record.outcome,
      details
        ? { ok: true, result: details.result, changedFiles: details.changedFiles }
        : { ok: false, code: isSandboxRunError(error) ? error.code : "internal" },
    );
  return {
    afterRun(outcome) {
      if (quiet) return [];
      const lines: string[] = [];
      if (differences.length > 0) {
        lines.push(
          `replay: ran under this replay's policy, image and folders; the record's differ (compared, not applied): ${differences.map(describeDifference).join("; ")}`,
        );
      }
      const replay = outcome.details?.replay;
      if (replay) {
        lines.push(
          `replay (${mode}): ${replay.answered} of ${replay.recorded} recorded model replies given back from ${record.dir}`,
        );
        if (replay.contextDifference) {
          lines.push(
            `replay: under ${flags.policy ?? "this policy"} the model's context differs (not compared): ${replay.contextDifference}`,
          );
        }
        const differed = replay.divergences.filter((d) => !d.fatal);
        if (differed.length > 0) {
          lines.push(
            `replay: ${differed.length} request(s) differed from the recording; the first: ${differed[0]!.difference}`,
          );
        }
      }
      if (isSandboxRunError(outcome.error) && outcome.error.code === "replay-divergence") return lines;
      const comparison = outcomeOf(outcome);
      if (comparison.matches) {
        lines.push(
          record.outcome.ok
            ? "replay: the result and the changed files equal the recorded ones"
            : `replay: the recorded run failed the same way (${record.outcome.error.code})`,
        );
      } else {
        lines.push("replay: the outcome differs from the recorded one:");
        for (const difference of comparison.differences) lines.push(`  ${difference}`);
      }
      return lines;
    },
    envelope(outcome) {
      const replay = outcome.details?.replay;
      const comparison = outcomeOf(outcome);
      return {
        replay: {
          record: record.dir,
          mode,
          answered: replay?.answered ?? null,
          recorded: record.exchanges.length,
          divergences: replay?.divergences ?? [],
          ...(replay?.contextDifference ? { contextDifference: replay.contextDifference } : {}),
          matchesRecording: comparison.matches,
          differences: comparison.differences,
          recordDifferences: differences.map(({ field, recorded, now }) => ({ field, recorded, now })),
          versions: replay?.versions ?? { recorded: record.versions },
        },
      };
    },
  };
}

function choice<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw usageError(`${flag} must be ${allowed.join(" or ")}, not "${value}".`);
  }
  return value as T;
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
