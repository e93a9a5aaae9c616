// `sandbox-run replay <record>`: the recorded call again, in a fresh sandbox (the recorded prompt,
// schema and model), with the model answered from the recording: no provider, no key. A record is
// untrusted input, never configuration: the replay runs under the caller's policy, image and
// folders (--policy, --image, --cwd, --writable, or the defaults), and the record's are only
// compared (a record that asks for more is refused). Says whether the outcome equals the recorded
// one; a request that differs from the recording stops a strict replay with exit code 4.
import type { Command } from "commander";
import { isSandboxRunError, usageError } from "../errors.js";
import type { ReplayMode, ReplaySpeed } from "../index.js";
import { type PlannedReplay, planReplay } from "../operations.js";
import { type CliIo, progressTo } from "./cli-io.js";
import type { CommandContext } from "./lazy-command.js";
import { parseRunFlags } from "./parse-run-args.js";
import { type ReplayOutput, type RunCommandFlags, runPlannedCommand } from "./run-command.js";
import { withRootFlags } from "./subcommand-flags.js";

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
  return replayCommand(recordDir, withRootFlags(flags, command), ctx.io, ctx.signals);
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
  const options = parseRunFlags({ ...flags, schema: undefined }, io.env);
  if (flags.workspacePath !== undefined) options.workspacePath = flags.workspacePath;
  const replay = await planReplay(recordDir, {
    options,
    mode,
    speed,
    agent: {
      hostEnv: io.env,
      autoBuildImage: flags.build !== false,
      onProgress: progressTo(io, flags.quiet),
      ...(io.egressOverrides ? { egressOverrides: io.egressOverrides } : {}),
    },
  });
  try {
    return await runPlannedCommand(replay.agent, replay.planned, flags, io, signals, replayOutput(replay, flags));
  } finally {
    await replay.agent.close();
  }
}

function replayOutput(replay: PlannedReplay, flags: ReplayCommandFlags): ReplayOutput {
  const { recorded, differences, mode } = replay;
  const quiet = flags.quiet === true;
  return {
    afterRun(outcome) {
      if (quiet) return [];
      const lines: string[] = [];
      if (differences.length > 0) {
        lines.push(
          `replay: ran under this replay's policy, image and folders; the record's differ (compared, not applied): ${differences.map((d) => d.text).join("; ")}`,
        );
      }
      const ran = outcome.details?.replay;
      if (ran) {
        lines.push(
          `replay (${mode}): ${ran.answered} of ${ran.recorded} recorded model replies given back from ${replay.recordDir}`,
        );
        if (ran.contextDifference) {
          lines.push(
            `replay: under ${flags.policy ?? "this policy"} the model's context differs (not compared): ${ran.contextDifference}`,
          );
        }
        const differed = ran.divergences.filter((d) => !d.fatal);
        if (differed.length > 0) {
          lines.push(
            `replay: ${differed.length} request(s) differed from the recording; the first: ${differed[0]!.difference}`,
          );
        }
      }
      if (isSandboxRunError(outcome.error) && outcome.error.code === "replay-divergence") return lines;
      const comparison = replay.compareOutcome(outcome);
      if (comparison.matches) {
        lines.push(
          recorded.ok
            ? "replay: the result and the changed files equal the recorded ones"
            : `replay: the recorded run failed the same way (${recorded.errorCode})`,
        );
      } else {
        lines.push("replay: the outcome differs from the recorded one:");
        for (const difference of comparison.differences) lines.push(`  ${difference}`);
      }
      return lines;
    },
    envelope(outcome) {
      const ran = outcome.details?.replay;
      const comparison = replay.compareOutcome(outcome);
      return {
        replay: {
          record: replay.recordDir,
          mode,
          answered: ran?.answered ?? null,
          recorded: recorded.exchanges,
          divergences: ran?.divergences ?? [],
          ...(ran?.contextDifference ? { contextDifference: ran.contextDifference } : {}),
          matchesRecording: comparison.matches,
          differences: comparison.differences,
          recordDifferences: differences.map(({ field, recorded, now }) => ({ field, recorded, now })),
          versions: ran?.versions ?? { recorded: recorded.versions },
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
