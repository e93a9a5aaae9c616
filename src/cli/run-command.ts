// The run command: flags -> ContainerPiAgent call -> stdout (the result or the --json envelope),
// progress on stderr, --events and --record files, and the exit code. Signals stop the sandbox.
import fs from "node:fs";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { isSandboxRunError, SandboxRunError, usageError } from "../errors.js";
import { RunRecorder } from "../record/run-record.js";
import type { RunDetails } from "../run/execute-run.js";
import { resolveRun } from "../run/resolve-options.js";
import type { RunEvent } from "../run/run-events.js";
import type { CliIo } from "./cli-io.js";
import { EXIT, exitCodeFor } from "./exit-codes.js";
import { createLiveStatus } from "./live-status.js";
import { parseRunFlags, type RunFlags } from "./parse-run-args.js";
import { createProgressReporter } from "./progress-reporter.js";
import { reportError } from "./report-error.js";

export interface RunCommandFlags extends RunFlags {
  events?: string;
  json?: boolean;
  record?: string;
  quiet?: boolean;
  build?: boolean;
  dryRun?: boolean;
}

export async function runCommand(
  promptParts: string[],
  flags: RunCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
): Promise<number> {
  let prompt = promptParts.join(" ");
  if (!prompt) prompt = (await io.readStdin()) ?? "";
  if (!prompt.trim())
    throw usageError("No prompt given.", 'Pass it as an argument (sandbox-run "fix the tests") or on stdin.');
  const options = parseRunFlags(flags, io.env);

  if (flags.dryRun) {
    // Resolve exactly as a run would, then print the plan the run would follow.
    const { printDryRun } = await import("./dry-run.js");
    await printDryRun(prompt, options, io);
    return EXIT.ok;
  }

  const events = flags.events ? openEventsFile(flags.events) : undefined;
  const live =
    !flags.quiet && io.stderrIsTty
      ? createLiveStatus(io.stderr, { color: !io.env.NO_COLOR, columns: process.stderr.columns })
      : undefined;
  const progress = flags.quiet
    ? undefined
    : (live?.onEvent ?? createProgressReporter((line) => io.stderr(`${line}\n`)));
  const recorder = flags.record ? startRecord(flags.record, prompt, options, io) : undefined;
  const onEvent = (event: RunEvent) => {
    events?.write(`${JSON.stringify(event)}\n`);
    recorder?.onEvent(event);
    progress?.(event);
  };

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

  const agent = new ContainerPiAgent({
    hostEnv: io.env,
    autoBuildImage: flags.build !== false,
    onProgress: flags.quiet ? undefined : (line) => io.stderr(`${line}\n`),
  });
  try {
    const details = await agent.runDetailed(prompt, {
      ...options,
      onEvent,
      onPlan: recorder?.onPlan,
      signal: controller.signal,
    });
    const result = details.result;
    live?.stop();
    await recorder?.finish({ ok: true, result, meta: { ...details, result: undefined } });
    if (flags.json) io.stdout(`${JSON.stringify(envelope({ ok: true, details, exitCode: EXIT.ok }), null, 2)}\n`);
    else
      io.stdout(
        typeof result === "string"
          ? result.endsWith("\n")
            ? result
            : `${result}\n`
          : `${JSON.stringify(result, null, 2)}\n`,
      );
    if (!flags.quiet) {
      const cost = details.usage.cost ? `, $${details.usage.cost.toFixed(4)}` : "";
      io.stderr(
        `sandbox-run: done in ${(details.durationMs / 1000).toFixed(2)}s, ${details.turns} turn(s), ${details.usage.totalTokens} tokens${cost}\n`,
      );
    }
    return EXIT.ok;
  } catch (error) {
    live?.stop();
    const code = interruptedBy
      ? interruptedBy === "SIGTERM"
        ? EXIT.terminated
        : EXIT.interrupted
      : isSandboxRunError(error)
        ? exitCodeFor(error.code)
        : EXIT.agentFailed;
    if (recorder) {
      await recorder.finish({
        ok: false,
        error: errorSummary(error),
        meta: { exitCode: code, runId: (error as SandboxRunError)?.runId, usage: (error as SandboxRunError)?.usage },
      });
    }
    if (flags.json)
      io.stdout(`${JSON.stringify(envelope({ ok: false, error, exitCode: code, model: options.model }), null, 2)}\n`);
    if (interruptedBy || flags.json) {
      reportError(error, io);
      return code;
    }
    throw error;
  } finally {
    signals?.off("SIGINT", onInt);
    signals?.off("SIGTERM", onTerm);
    if (events) await new Promise<void>((resolve) => events.end(resolve));
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

function startRecord(dir: string, prompt: string, options: ReturnType<typeof parseRunFlags>, io: CliIo): RunRecorder {
  const resolved = resolveRun(prompt, {}, options, io.env);
  try {
    return new RunRecorder({ dir, prompt, schema: resolved.schema, policy: resolved.policy, workspace: resolved.cwd });
  } catch (error) {
    throw usageError(
      `Cannot write the run record: ${(error as Error).message}.`,
      "Pass --record a new or empty folder.",
    );
  }
}

function errorSummary(error: unknown) {
  if (isSandboxRunError(error)) {
    return {
      code: error.code,
      message: error.shortMessage,
      hint: error.hint,
      limit: error.limit,
      exitCode: error.exitCode,
      stderrTail: error.stderrTail,
    };
  }
  return { code: "internal", message: (error as Error)?.message ?? String(error) };
}

/** The --json result envelope: the same shape whether the run succeeded or not. */
function envelope(input: { ok: boolean; details?: RunDetails; error?: unknown; exitCode: number; model?: string }) {
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
    changedFiles: (d as { changedFiles?: unknown } | undefined)?.changedFiles ?? null,
  };
}
