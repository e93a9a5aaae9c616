// The run command: flags -> ContainerPiAgent call -> stdout (the result or the --json envelope),
// progress on stderr, --events and --record files, and the exit code. Signals stop the sandbox.
import fs from "node:fs";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { errorSummary, isSandboxRunError, SandboxRunError, usageError } from "../errors.js";
import type { RecordFinish } from "../record/run-record.js";
import type { RunDetails } from "../run/execute-run.js";
import type { PlannedRun } from "../run/prepare-plan.js";
import { openRunRecord } from "../run/record-run.js";
import { redactPlan } from "../run/redact-plan.js";
import type { RunEvent } from "../run/run-events.js";
import type { CliIo } from "./cli-io.js";
import { EXIT, exitCodeFor } from "./exit-codes.js";
import { createLiveStatus } from "./live-status.js";
import { parseRunFlags, type RunFlags } from "./parse-run-args.js";
import { createProgressReporter } from "./progress-reporter.js";
import { reportError } from "./report-error.js";
import { terminalText } from "./terminal-text.js";

export interface RunCommandFlags extends RunFlags {
  events?: string;
  json?: boolean;
  record?: string;
  quiet?: boolean;
  build?: boolean;
  dryRun?: boolean;
  engines?: string;
}

export async function runCommand(
  promptParts: string[],
  flags: RunCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
): Promise<number> {
  if (flags.promptFile && promptParts.length > 0) {
    throw usageError("Pass the prompt as an argument or with --prompt-file, not both.");
  }
  let prompt = flags.promptFile ? readPromptFile(flags.promptFile) : promptParts.join(" ");
  if (!prompt) prompt = (await io.readStdin()) ?? "";
  if (!prompt.trim()) {
    throw usageError("No prompt given.", 'Pass it as an argument (sandbox-run "fix the tests") or on stdin.');
  }
  const options = parseRunFlags(flags, io.env);
  const agent = new ContainerPiAgent({
    hostEnv: io.env,
    ...(flags.engines ? { engines: flags.engines } : {}),
    autoBuildImage: flags.build !== false,
    onProgress: flags.quiet ? undefined : (line) => io.stderr(`${line}\n`),
  });
  try {
    // Resolved and planned once: --dry-run prints this plan, --record stores it, the run follows it.
    const planned = agent.plan(prompt, options);
    return await runPlannedCommand(agent, planned, flags, io, signals);
  } finally {
    // Warm sandboxes (SANDBOX_RUN_WARM) the call did not use go now.
    await agent.close();
  }
}

/** What the replay command adds to a run's output. */
export interface ReplayOutput {
  /** Lines for stderr once the run is over (whether its outcome matches the recording). */
  afterRun(outcome: { details?: RunDetails; error?: unknown }): string[];
  /** Added to the --json envelope. */
  envelope(outcome: { details?: RunDetails; error?: unknown }): Record<string, unknown>;
}

/** Runs a planned call with the CLI's output, records, signals and exit code (run and replay share it). */
export async function runPlannedCommand(
  agent: ContainerPiAgent,
  planned: PlannedRun,
  flags: RunCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
  replay?: ReplayOutput,
): Promise<number> {
  for (const warning of planned.run.warnings) io.stderr(`sandbox-run: warning: ${terminalText(warning)}\n`);
  if (flags.dryRun) {
    io.stdout(`${JSON.stringify(redactPlan(planned), null, 2)}\n`);
    return EXIT.ok;
  }

  const events = flags.events ? openEventsFile(flags.events) : undefined;
  const live =
    !flags.quiet && io.stderrIsTty
      ? createLiveStatus(io.stderr, { color: !io.env.NO_COLOR, columns: io.stderrColumns })
      : undefined;
  const progress = flags.quiet
    ? undefined
    : (live?.onEvent ?? createProgressReporter((line) => io.stderr(`${line}\n`)));
  const recorder = flags.record ? openRunRecord(flags.record, planned) : undefined;
  const onEvent = (event: RunEvent) => {
    events?.write(`${JSON.stringify(event)}\n`);
    recorder?.onEvent(event);
    progress?.(event);
  };

  const interrupt = stopOnSignals(signals, io);
  // A record that cannot be completed is reported beside the run's outcome, never instead of it.
  const finishRecord = async (outcome: RecordFinish): Promise<string[]> => {
    const notes = recorder ? await recorder.finish(outcome) : [];
    for (const note of notes) io.stderr(`sandbox-run: the run record is incomplete: ${note}\n`);
    return notes;
  };

  try {
    const details = await agent.runPlanned(planned, { onEvent, signal: interrupt.signal, recorder });
    const result = details.result;
    live?.stop();
    const recordNotes = await finishRecord({ ok: true, result, meta: { ...details, result: undefined } });
    if (flags.json) {
      const shown = {
        ...envelope({ ok: true, details, exitCode: EXIT.ok, recordNotes }),
        ...replay?.envelope({ details }),
      };
      io.stdout(`${JSON.stringify(shown, null, 2)}\n`);
    } else printResult(result, io);
    if (!flags.quiet) io.stderr(`${doneLine(details)}\n`);
    for (const line of replay?.afterRun({ details }) ?? []) io.stderr(`sandbox-run: ${terminalText(line)}\n`);
    return EXIT.ok;
  } catch (error) {
    live?.stop();
    const interruptedBy = interrupt.by();
    const code = interruptedBy
      ? interruptedBy === "SIGTERM"
        ? EXIT.terminated
        : EXIT.interrupted
      : isSandboxRunError(error)
        ? exitCodeFor(error.code)
        : EXIT.agentFailed;
    const e = error as SandboxRunError;
    const recordNotes = await finishRecord({
      ok: false,
      error: errorSummary(error),
      meta: { exitCode: code, runId: e?.runId, usage: e?.usage, warm: e?.warm ?? false },
    });
    if (flags.json) {
      const shown = {
        ...envelope({ ok: false, error, exitCode: code, model: planned.run.model, recordNotes }),
        ...replay?.envelope({ error }),
      };
      io.stdout(`${JSON.stringify(shown, null, 2)}\n`);
    }
    for (const line of replay?.afterRun({ error }) ?? []) io.stderr(`sandbox-run: ${terminalText(line)}\n`);
    if (interruptedBy || flags.json) {
      reportError(error, io);
      return code;
    }
    throw error;
  } finally {
    interrupt.dispose();
    if (events) await new Promise<void>((resolve) => events.end(resolve));
  }
}

/** SIGINT / SIGTERM abort the run (the sandbox is stopped and removed) and decide the exit code. */
function stopOnSignals(signals: NodeJS.EventEmitter | undefined, io: CliIo) {
  const controller = new AbortController();
  let interruptedBy: "SIGINT" | "SIGTERM" | undefined;
  const onSignal = (name: "SIGINT" | "SIGTERM") => () => {
    interruptedBy ??= name;
    io.stderr(`\nsandbox-run: ${name} received, stopping the sandbox ...\n`);
    controller.abort(new SandboxRunError("aborted", `Interrupted by ${name}; the sandbox was stopped and removed.`));
  };
  const onInt = onSignal("SIGINT");
  const onTerm = onSignal("SIGTERM");
  signals?.on("SIGINT", onInt);
  signals?.on("SIGTERM", onTerm);
  return {
    signal: controller.signal,
    by: () => interruptedBy,
    dispose: () => {
      signals?.off("SIGINT", onInt);
      signals?.off("SIGTERM", onTerm);
    },
  };
}

/** The bare result on stdout: text as it is when piped (escaped on a terminal), an object as JSON. */
function printResult(result: unknown, io: CliIo): void {
  if (typeof result === "string") {
    const shown = io.stdoutIsTty ? terminalText(result) : result;
    io.stdout(shown.endsWith("\n") ? shown : `${shown}\n`);
  } else io.stdout(`${JSON.stringify(result, null, 2)}\n`);
}

function doneLine(details: RunDetails): string {
  const cost = details.usage.cost ? `, $${details.usage.cost.toFixed(4)}` : "";
  const seconds = (details.durationMs / 1000).toFixed(2);
  return `sandbox-run: done in ${seconds}s, ${details.turns} turn(s), ${details.usage.totalTokens} tokens${cost}`;
}

function readPromptFile(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (error) {
    throw usageError(
      `The prompt file ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`,
      "Pass the path of a text file with the task.",
    );
  }
}

/** Opens the --events file now, so a bad path is a usage error before anything starts. */
function openEventsFile(file: string): fs.WriteStream {
  let fd: number;
  try {
    fd = fs.openSync(file, "w");
  } catch (error) {
    throw usageError(
      `Cannot write the events file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
      "Pass --events a path in a writable folder.",
    );
  }
  const stream = fs.createWriteStream("", { fd });
  stream.on("error", () => {}); // a full disk must not crash the run; the file just ends early
  return stream;
}

/** The --json result envelope: the same shape whether the run succeeded or not (batch prints one per task). */
export function envelope(input: {
  ok: boolean;
  details?: RunDetails;
  error?: unknown;
  exitCode: number;
  model?: string;
  recordNotes?: string[];
}) {
  const d = input.details;
  const e = isSandboxRunError(input.error) ? input.error : undefined;
  return {
    ok: input.ok,
    result: d ? d.result : null,
    error: input.ok ? null : errorSummary(input.error),
    exitCode: input.exitCode,
    runId: d?.runId ?? e?.runId ?? null,
    usage: d?.usage ?? e?.usage ?? null,
    durationMs: d?.durationMs ?? e?.durationMs ?? null,
    model: d?.model ?? input.model ?? null,
    piVersion: d?.piVersion ?? null,
    image: d?.image ?? null,
    policy: d?.policy ?? null,
    changedFiles: d?.changedFiles ?? null,
    warm: d?.warm ?? e?.warm ?? false,
    ...(input.recordNotes?.length ? { recordNotes: input.recordNotes } : {}),
  };
}
