// `sandbox-run replay <record>`: the recorded call again, in a fresh sandbox (same prompt, schema,
// policy and image unless --policy/--image say otherwise), with the model answered from the
// recording: no provider, no key. Says whether the outcome equals the recorded one; a request that
// differs from the recording stops a strict replay with exit code 4.
import path from "node:path";
import type { Command } from "commander";
import type { RunDetails } from "../run/execute-run.js";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { isSandboxRunError, usageError } from "../errors.js";
import { parsePolicy } from "../policy/load-policy.js";
import { compareOutcome } from "../replay/compare-outcome.js";
import { type LoadedRecord, loadRecord } from "../replay/load-record.js";
import type { ReplayMode, ReplaySpeed } from "../replay/replay-server.js";
import type { ReplaySource } from "../replay/replay-source.js";
import { RECORD_FILES } from "../record/record-format.js";
import type { RunOptions } from "../run/resolve-options.js";
import type { CliIo } from "./cli-io.js";
import type { CommandContext } from "./lazy-command.js";
import { parseRunFlags } from "./parse-run-args.js";
import { type ReplayOutput, type RunCommandFlags, runPlannedCommand } from "./run-command.js";

export interface ReplayCommandFlags extends RunCommandFlags {
  replayMode?: string;
  replaySpeed?: string;
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
  for (const flag of ["schema", "promptFile", "model", "models", "sandbox"] as const) {
    if (flags[flag] !== undefined) {
      throw usageError(
        `replay takes the prompt, schema and model from the record; --${kebab(flag)} cannot change them.`,
        "Drop the flag (--policy, --image, --cwd, --env, --timeout and --runtime may differ from the recording).",
      );
    }
  }
  const record = loadRecord(recordDir);
  const { call } = record;
  const options: RunOptions = {
    ...parseRunFlags({ ...flags, schema: undefined }, io.env),
    ...(record.schema ? { schema: record.schema } : {}),
    policy: flags.policy ?? parsePolicy(record.policy, path.join(record.dir, RECORD_FILES.policy)),
    // The record's files are configuration too: inside the workspace, they are reported (or refused).
    configFiles: {
      prompt: path.join(record.dir, RECORD_FILES.prompt),
      ...(record.schema ? { schema: path.join(record.dir, RECORD_FILES.schema) } : {}),
    },
    extraArgs: call.extraArgs,
  };
  if (!flags.image && !call.defaultImage) options.image = call.image;
  if (flags.timeout === undefined) options.timeoutMs = call.timeoutMs;
  if (flags.maxTurns === undefined && call.budgets.maxTurns !== undefined) options.maxTurns = call.budgets.maxTurns;
  if (flags.maxCost === undefined && call.budgets.maxCostUsd !== undefined)
    options.maxCostUsd = call.budgets.maxCostUsd;

  const agent = new ContainerPiAgent({
    hostEnv: io.env,
    autoBuildImage: flags.build !== false,
    onProgress: flags.quiet ? undefined : (line) => io.stderr(`${line}\n`),
  });
  // Another policy offers other tools on purpose: then only the conversation's messages must match.
  const compareContext = flags.policy === undefined;
  const source: ReplaySource = { records: [record.dir], next: () => ({ record, mode, speed, compareContext }) };
  const planned = agent.plan(record.prompt, { ...options, replay: source });
  planned.run.warnings.push(...missingInputs(record, options));
  return runPlannedCommand(agent, planned, flags, io, signals, replayOutput(record, mode, flags));
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
  if (record.call.writableRoots.length > 0 && !options.additionalWritableDirectories?.length) {
    warnings.push(
      `the recorded run had extra writable directories (${record.call.writableRoots.join(", ")}); pass them with --writable`,
    );
  }
  return warnings;
}

function replayOutput(record: LoadedRecord, mode: ReplayMode, flags: ReplayCommandFlags): ReplayOutput {
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
