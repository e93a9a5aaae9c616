// The run command: flags -> ContainerPiAgent call -> stdout (the result or the --json envelope),
// progress on stderr, --events and --record files, and the exit code. Signals stop the sandbox.
// --dry-run plans without loading the agent, its engines or its servers (planCall of
// operations.ts); a run loads them once its plan is made (createAgent).
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import type { Writable } from "node:stream";
import type { Command } from "commander";
import { errorSummary, isSandboxRunError, type SandboxRunError, usageError, withHint } from "../errors.js";
import type { ContainerPiAgent, PlannedRun, RecordFinish, RunDetails, RunEvent } from "../index.js";
import {
  createAgent,
  dryRunView,
  handBackSummary,
  heldTrees,
  openRunRecord,
  planCall,
  recordedSuccess,
} from "../operations.js";
import { readTextFile } from "../util/config-file.js";
import { checkOutputFile, HostDirError, openOutputFile } from "../util/host-dir.js";
import { lostWork } from "../util/left-out-reasons.js";
import { BoundedLines, CLOSE_WAIT_MS, MAX_BUFFERED_BYTES } from "./bounded-lines.js";
import { type CliIo, liveTerminal, progressTo } from "./cli-io.js";
import { refuseCommandLikePrompt } from "./command-typos.js";
import { EXIT, exitCodeFor, exitCodeForSignal } from "./exit-codes.js";
import { generatedFoldersNote } from "./generated-folders.js";
import type { CommandContext } from "./lazy-command.js";
import { parseRunFlags, type RunFlags } from "./parse-run-args.js";
import { checkPatchFlags, openPatchFile, writePatchFile } from "./patch-file.js";
import { recordNoteLine } from "./record-notes.js";
import { reportError } from "./report-error.js";
import { envelope } from "./result-envelope.js";
import { stopOnSignals } from "./stop-signals.js";
import { jsonText, terminalLine, terminalName, terminalText } from "./terminal-text.js";
import { isHostEvent, WARNING_EVENTS } from "./warning-events.js";

export interface RunCommandFlags extends RunFlags {
  patchFile?: string;
  events?: string;
  json?: boolean;
  record?: string;
  quiet?: boolean;
  build?: boolean;
  dryRun?: boolean;
  engines?: string;
}

/** The root command's action: a prompt that looks like a mistyped command or option is refused before anything. */
export default async function runAction(
  ctx: CommandContext,
  promptParts: string[],
  flags: RunCommandFlags,
  program: Command,
): Promise<number> {
  const commands = program.commands.map((c) => ({
    name: c.name(),
    subcommands: c.commands.map((s) => s.name()),
    takesOperand: c.registeredArguments.length > 0,
  }));
  // commander's own help command is not among program.commands.
  commands.push({ name: "help", subcommands: commands.map((c) => c.name), takesOperand: false });
  const options = program.options.map((o) => ({
    long: o.long ?? "",
    value: o.required || o.optional ? /[<[].*[>\]]/.exec(o.flags)?.[0] : undefined,
  }));
  refuseCommandLikePrompt(promptParts, commands, ctx.argv, options);
  return runCommand(promptParts, flags, ctx.io, ctx.signals);
}

export async function runCommand(
  promptParts: string[],
  flags: RunCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
): Promise<number> {
  if (flags.events === "-")
    throw usageError(
      "--events - would put the run's events on stdout, beside its result.",
      "Give a file, or /dev/stderr to see them on the terminal.",
    );
  if (flags.promptFile && promptParts.length > 0) {
    throw usageError("Pass the prompt as an argument or with --prompt-file, not both.");
  }
  // A lone `-` (as a prompt or a prompt file) reads stdin, as `batch -` does (review, session 33: it
  // was sent as the task "-").
  const named = flags.promptFile ?? promptParts.join(" ");
  let prompt = named === "-" ? "" : flags.promptFile ? readPromptFile(flags.promptFile) : named;
  if (!prompt) {
    const read = await promptFromStdin(io, signals, flags);
    if (typeof read === "number") return read;
    prompt = read ?? "";
  }
  if (!prompt.trim()) {
    throw usageError("No prompt given.", 'Pass it as an argument (sandbox-run "fix the tests") or on stdin.');
  }
  const options = parseRunFlags(flags, io.env);
  if (flags.dryRun) return printDryRun(await dryRunPlan(prompt, options, flags, io), flags, io);
  const agent = await createAgent({
    hostEnv: io.env,
    ...(flags.engines ? { engines: flags.engines } : {}),
    autoBuildImage: flags.build !== false,
    onProgress: progressTo(io, flags.quiet),
    ...(io.egressOverrides ? { egressOverrides: io.egressOverrides } : {}),
    // One call: with SANDBOX_RUN_WARM its sandbox is made while the call is prepared, and no
    // refill after its claim (one would only be made to be removed when the command ends).
    warm: { calls: 1 },
  });
  try {
    // Resolved and planned once, without an engine; before a run it is fitted to what the engines
    // say they are, then --record stores it and the run follows it.
    const planned = agent.plan(prompt, options);
    return await runPlannedCommand(agent, planned, flags, io, signals);
  } finally {
    // Warm sandboxes (SANDBOX_RUN_WARM) the call did not use go now.
    await agent.close();
  }
}

/**
 * The prompt from stdin, with the stop signals listened to meanwhile: a stdin that never closes
 * (`sleep 20 | sandbox-run --json`) ended on SIGINT by Node's default handler, with no envelope and
 * no word, and waited without saying so (review, session 33). Says once on stderr that it waits,
 * when nothing has ended stdin for 2 s. Interrupted: reported (with --json, one envelope too), and
 * the signal's exit code is returned.
 */
async function promptFromStdin(
  io: CliIo,
  signals: NodeJS.EventEmitter | undefined,
  flags: Pick<RunCommandFlags, "json" | "quiet">,
): Promise<string | undefined | number> {
  const interrupt = stopOnSignals(signals, io, {
    announce: "no longer waiting for the task on stdin",
    stopped: "nothing was started",
  });
  const waiting = flags.quiet
    ? undefined
    : setTimeout(
        () =>
          io.stderr("sandbox-run: reading the task from stdin until it ends (Ctrl-D), or pass it as an argument ...\n"),
        2_000,
      );
  waiting?.unref?.();
  try {
    return await new Promise<string | undefined>((resolve, reject) => {
      interrupt.signal.addEventListener("abort", () => reject(interrupt.signal.reason), { once: true });
      io.readStdin().then(resolve, reject);
    });
  } catch (error) {
    const by = interrupt.by();
    if (!by) throw error;
    reportError(error, io);
    const exitCode = exitCodeForSignal(by);
    if (flags.json) io.stdout(`${jsonText(envelope({ ok: false, error, exitCode }), 2)}\n`);
    return exitCode;
  } finally {
    clearTimeout(waiting);
    interrupt.dispose();
  }
}

/**
 * The plan of a dry run. A missing provider key does not stop it (review, session 27: the first
 * "what would this do?" needed a secret): the plan is made as if the variable were set, the view
 * names the variable (never a value), and a warning says the run needs it.
 */
async function dryRunPlan(
  prompt: string,
  options: ReturnType<typeof parseRunFlags>,
  flags: RunCommandFlags,
  io: CliIo,
): Promise<PlannedRun> {
  try {
    return await planCall(prompt, { options, env: io.env, engines: flags.engines });
  } catch (error) {
    const name = (error as { missingKeyEnv?: unknown } | null)?.missingKeyEnv;
    if (typeof name !== "string") throw error;
    io.stderr(
      `sandbox-run: warning: ${terminalLine((error as SandboxRunError).shortMessage)}: the run needs ${name}\n`,
    );
    return planCall(prompt, { options, env: { ...io.env, [name]: "unset-in-the-dry-run" }, engines: flags.engines });
  }
}

/** --dry-run: the plan as data on stdout (credentials redacted), after the checks a run makes before it starts. */
async function printDryRun(planned: PlannedRun, flags: RunCommandFlags, io: CliIo): Promise<number> {
  for (const warning of planned.run.warnings) io.stderr(`sandbox-run: warning: ${terminalLine(warning)}\n`);
  if (planned.copyModeReason) io.stderr(`sandbox-run: note: ${terminalLine(planned.copyModeReason)}\n`);
  checkPatchFlags(planned, flags);
  // The places a run refuses to write before it starts (inside the workspace or a writable root):
  // refused here too, with the same message, so a dry run's yes is a run's yes. Nothing is created.
  if (flags.events) checkEventsFile(flags.events, heldTrees(planned));
  if (flags.patchFile) openPatchFile(flags.patchFile, planned).dir.close();
  io.stdout(`${jsonText(await dryRunView(planned), 2)}\n`);
  return EXIT.ok;
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
  plannedBeforeEngines: PlannedRun,
  flags: RunCommandFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
  replay?: ReplayOutput,
): Promise<number> {
  if (flags.dryRun) return printDryRun(plannedBeforeEngines, flags, io);
  for (const warning of plannedBeforeEngines.run.warnings) {
    io.stderr(`sandbox-run: warning: ${terminalLine(warning)}\n`);
  }
  checkPatchFlags(plannedBeforeEngines, flags);
  // Docker Desktop (seen in its docker info) gets copy mode; the engine's platform its runner image.
  const planned = await agent.fitToEngines(plannedBeforeEngines);
  // Said from the plan the engines fitted: an engine that remaps user ids is known only now.
  if (planned.copyModeReason) io.stderr(`sandbox-run: note: ${terminalLine(planned.copyModeReason)}\n`);

  // Both are checked before anything starts; a refused --events drops the record it would sit beside.
  const recorder = flags.record ? await openRunRecord(flags.record, planned) : undefined;
  let eventsStream: Writable | undefined;
  let patchFile: ReturnType<typeof openPatchFile> | undefined;
  try {
    eventsStream = flags.events ? openEventsFile(flags.events, heldTrees(planned), io) : undefined;
    patchFile = flags.patchFile ? openPatchFile(flags.patchFile, planned) : undefined;
  } catch (error) {
    eventsStream?.destroy();
    await recorder?.abandon();
    throw error;
  }
  const eventsFile = flags.events;
  const events = eventsStream
    ? new BoundedLines(eventsStream, () =>
        io.stderr(
          `sandbox-run: warning: the reader of the events file ${terminalLine(eventsFile)} is not keeping up (over ${MAX_BUFFERED_BYTES / 1024 / 1024} MiB wait to be written): events are left out of it until it catches up; the run goes on.\n`,
        ),
      )
    : undefined;
  const live =
    !flags.quiet && liveTerminal(io)
      ? (await import("./live-status.js")).createLiveStatus(io.stderr, {
          color: !io.env.NO_COLOR,
          columns: io.stderrColumns,
        })
      : undefined;
  const progress = flags.quiet
    ? undefined
    : (live?.onEvent ??
      (await import("./progress-reporter.js")).createProgressReporter((line) => io.stderr(`${line}\n`)));
  // The host-run note is a warning, not progress: shown after the run where the plain reporter does
  // not show it (-q, the live status on a terminal; review, session 27: neither said it).
  const warnings: RunEvent[] = [];
  const onEvent = (event: RunEvent) => {
    events?.write(`${jsonText(event)}\n`);
    recorder?.onEvent(event);
    progress?.(event);
    if ((flags.quiet || live) && isHostEvent(event) && WARNING_EVENTS.has(event.type)) warnings.push(event);
  };
  const sayWarnings = async () => {
    if (warnings.length === 0) return;
    const { sandboxLine } = await import("./progress-reporter.js");
    for (const event of warnings.splice(0)) {
      const line = sandboxLine(event.type, event.data);
      if (line) io.stderr(`sandbox-run: ${line}\n`);
    }
  };

  // SIGINT / SIGTERM / SIGHUP abort the run (the sandbox is stopped, the workspace judged, the
  // container removed) and decide the exit code. SIGHUP too: a closed terminal or ssh session must
  // not end the controller between the sandbox's writes and their judgement.
  const interrupt = stopOnSignals(signals, io, {
    announce: "stopping the sandbox",
    stopped: "the sandbox, if it had started, was stopped and removed",
    // Bind mode: what the sandbox wrote before the stop is in the workspace, judged like any run's
    // (review, session 29: "start over" read as if nothing was left).
    after:
      "what the run had already changed in a mounted workspace stays there, checked like any run's (--json lists it as changedFiles): look at it before you run it again.",
  });
  // A record that cannot be completed is reported beside the run's outcome, never instead of it.
  const finishRecord = async (outcome: RecordFinish): Promise<string[]> => {
    const notes = recorder ? await recorder.finish(outcome) : [];
    for (const note of notes) io.stderr(`sandbox-run: ${recordNoteLine(note)}\n`);
    return notes;
  };

  try {
    const details = await agent.runPlanned(planned, { onEvent, signal: interrupt.signal, recorder });
    const result = details.result;
    live?.stop();
    const patch = details.handBack?.mode === "patch" ? details.handBack : undefined;
    // The patch is the run's only output in patch mode: written before anything else is said.
    if (patch && patchFile) writePatchFile(patchFile, patch.patch);
    const patchPath = patchFile ? path.resolve(patchFile.shown) : undefined;
    const handBack = handBackSummary(details, patchPath);
    // A stop that came once the run had its result stops nothing (README): the work is handed back
    // as any run's. The exit code is still the signal's, and a line says what came of it (red team,
    // round 3, session 42: "SIGINT received, stopping the sandbox", then 9,000 entries applied, exit 0).
    const lateStop = interrupt.by();
    const exitCode = lateStop ? exitCodeForSignal(lateStop) : EXIT.ok;
    const recordNotes = await finishRecord(recordedSuccess(details, patchPath));
    if (flags.json) {
      const shown = {
        ...envelope({ ok: true, details, exitCode, recordNotes }),
        ...(handBack ? { handBack } : {}),
        ...replay?.envelope({ details }),
      };
      io.stdout(`${jsonText(shown, 2)}\n`);
    } else printResult(result, io);
    if (!flags.quiet)
      io.stderr(`${doneLine(details, patchFile?.shown ?? (flags.record ? "the run record" : undefined))}\n`);
    await sayWarnings();
    for (const note of patch?.notes ?? []) io.stderr(`sandbox-run: the patch is incomplete: ${terminalLine(note)}\n`);
    for (const line of replay?.afterRun({ details }) ?? []) io.stderr(`sandbox-run: ${terminalLine(line)}\n`);
    // One that came while the record was finished or the result printed is said too (second fix
    // review, round 3, session 42: read only before them, it still ended in exit 0).
    const stop = interrupt.by();
    if (!stop) return EXIT.ok;
    io.stderr(`sandbox-run: ${lateStopLine(stop, details, exitCodeForSignal(stop))}\n`);
    return exitCodeForSignal(stop);
  } catch (caught) {
    live?.stop();
    const error = withModelsHint(caught, flags.models);
    const interruptedBy = interrupt.by();
    const code = interruptedBy
      ? exitCodeForSignal(interruptedBy)
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
      io.stdout(`${jsonText(shown, 2)}\n`);
    }
    for (const line of replay?.afterRun({ error }) ?? []) io.stderr(`sandbox-run: ${terminalLine(line)}\n`);
    await sayWarnings();
    if (interruptedBy || flags.json) {
      reportError(error, io);
      return code;
    }
    throw error;
  } finally {
    patchFile?.dir.close();
    interrupt.dispose();
    if (events && !(await events.close()))
      io.stderr(
        `sandbox-run: warning: the events file ${terminalLine(flags.events)} took nothing for ${CLOSE_WAIT_MS / 1000} s after the run's end: its last events are left out.\n`,
      );
    else if (events?.dropped)
      io.stderr(
        `sandbox-run: warning: ${events.dropped} events were left out of the events file (its reader did not keep up).\n`,
      );
  }
}

/**
 * A provider that failed, in a run given --models: its hint names `doctor --models <file>`, the
 * check that reaches a models.json provider (plain `doctor` checks only the built-in providers' keys).
 */
export function withModelsHint(error: unknown, models: string | undefined): unknown {
  if (!models || !isSandboxRunError(error) || error.code !== "model-error") return error;
  return withHint(
    error,
    `Check the model name, the provider's key on the host, and that the provider is reachable from the host (\`sandbox-run doctor --models ${models}\` checks each provider of that file).`,
  );
}

/** The bare result on stdout: text as it is when piped (escaped on a terminal), an object as JSON. */
function printResult(result: unknown, io: CliIo): void {
  if (typeof result === "string") {
    const shown = io.stdoutIsTty ? terminalText(result) : result;
    io.stdout(shown.endsWith("\n") ? shown : `${shown}\n`);
  } else io.stdout(`${jsonText(result, 2)}\n`);
}

/** What came of a stop signal that arrived once the run had its result. */
export function lateStopLine(by: string, details: RunDetails, exitCode: number): string {
  const kept =
    details.handBack?.mode === "patch"
      ? "the patch was still written"
      : details.handBack?.mode === "branch"
        ? details.handBack.commit
          ? `the branch ${details.handBack.branch} was still made`
          : "there was nothing to commit"
        : "its changes are in the workspace, judged as any run's (copy mode applied them whole)";
  return `${by} came after the run had its result, which a stop no longer undoes: the result is above and ${kept}; exit ${exitCode} for the signal.`;
}

function doneLine(details: RunDetails, patchTo: string | undefined): string {
  const cost = details.usage.cost ? `, $${details.usage.cost.toFixed(4)}` : "";
  const seconds = (details.durationMs / 1000).toFixed(2);
  return `sandbox-run: done in ${seconds}s, ${details.turns} turn(s), ${details.usage.totalTokens} tokens${cost}${handBackLine(details, patchTo)}`;
}

/** The done line's account of the hand-back: where the changes are when they were not applied. */
export function handBackLine(details: RunDetails, patchTo: string | undefined): string {
  const handBack = details.handBack;
  if (!handBack) return "";
  if (handBack.mode === "patch") {
    return `; patch of ${handBack.files} file(s) written to ${terminalLine(patchTo ?? "nowhere")}, workspace untouched${binaryNote(handBack.binaryFiles)}`;
  }
  const leftOut = leftOutNote(handBack);
  if (!handBack.commit) return `; nothing to commit, no branch made, workspace untouched${leftOut}`;
  const { files, insertions, deletions } = handBack.diffStat;
  if (handBack.uncounted) {
    // Without git's count there is no list of binary files either: say so, never imply there are none.
    return `; committed to branch ${handBack.branch} (${handBack.commit.slice(0, 12)} on ${handBack.base.slice(0, 12)}): ${files} file(s), lines not counted (${terminalLine(handBack.uncounted)}), so which are binary to git is not known either: look at each file with \`git show\`, workspace untouched${leftOut}`;
  }
  const generated = generatedFoldersNote(handBack.files.map((f) => f.path));
  const binary = binaryNote(handBack.files.filter((f) => f.binary).map((f) => f.path));
  return `; committed to branch ${handBack.branch} (${handBack.commit.slice(0, 12)} on ${handBack.base.slice(0, 12)}): ${files} file(s)${generated}, +${insertions} -${deletions}, workspace untouched${binary}${leftOut}`;
}

const LISTED_BINARY = 3;

/**
 * Files git takes for binary: a diff shows none of their content, so a script made binary by one
 * NUL byte hides what it now runs (review, session 35). Named, so that they are looked at.
 */
function binaryNote(paths: readonly string[]): string {
  if (paths.length === 0) return "";
  const listed = paths.slice(0, LISTED_BINARY).map(terminalName).join(", ");
  const more = paths.length > LISTED_BINARY ? `, and ${paths.length - LISTED_BINARY} more` : "";
  return `; binary to git, so no diff shows their content (look at them directly): ${listed}${more}`;
}

const LISTED_LEFT_OUT = 3;

/** The done line's word on the work a branch hand-back could not carry (lostWork). */
export function leftOutNote(handBack: { leftOut: ReadonlyArray<{ path: string; reason: string }> }): string {
  const lost = lostWork(handBack.leftOut);
  if (lost.length === 0) return "";
  const listed = lost.slice(0, LISTED_LEFT_OUT).map((l) => `${terminalName(l.path)} (${terminalLine(l.reason)})`);
  const more =
    lost.length > LISTED_LEFT_OUT ? `, and ${lost.length - LISTED_LEFT_OUT} more (--json: handBack.leftOut)` : "";
  return `; NOT in the branch and not applied (lost with the sandbox): ${listed.join(", ")}${more}`;
}

/** The most a prompt file may hold. */
const MAX_PROMPT_FILE_BYTES = 16 * 1024 * 1024;

function readPromptFile(file: string): string {
  return readTextFile(file, "prompt", "Pass the path of a text file with the task.", MAX_PROMPT_FILE_BYTES);
}

/**
 * Opens the --events file now, so a bad path is a usage error before anything starts. It is the
 * host's output: never a path inside a tree the sandbox holds (a name there may be a link a
 * sandbox planted, and the file would be lent with the tree), and never written through a link.
 */
function openEventsFile(file: string, held: readonly string[], io: CliIo): Writable {
  let fd: number;
  try {
    fd = openOutputFile(file, held);
  } catch (error) {
    throw eventsFileError(file, error);
  }
  // A FIFO or a socket is written on the event loop (non-blocking): a file stream writes from a
  // thread that blocks while the reader does not read, and the process could not exit until it did
  // (review of this session's change, fix34b: the CLI hung after "left out").
  const kind = fs.fstatSync(fd);
  const stream: Writable =
    kind.isFIFO() || kind.isSocket()
      ? new net.Socket({ fd, readable: false, writable: true })
      : fs.createWriteStream("", { fd });
  // A full disk must not crash the run; the file ends early, and the caller is told once (review,
  // session 32: it ended mid-line and the run exited 0 without a word).
  stream.once("error", (error: NodeJS.ErrnoException) => {
    io.stderr(
      `sandbox-run: warning: the events file ${terminalLine(file)} ends early: ${error.code ?? error.message}; the run goes on.\n`,
    );
    stream.on("error", () => {});
  });
  return stream;
}

/** --dry-run's check of the --events path, without opening it: refused where openEventsFile refuses it. */
function checkEventsFile(file: string, held: readonly string[]): void {
  try {
    checkOutputFile(file, held);
  } catch (error) {
    throw eventsFileError(file, error);
  }
}

function eventsFileError(file: string, error: unknown): SandboxRunError {
  const inside = error instanceof HostDirError && error.code === "INSIDE_SANDBOX_TREE";
  return usageError(
    `Cannot write the events file ${file}: ${inside ? error.message : ((error as NodeJS.ErrnoException).code ?? (error as Error).message)}.`,
    inside
      ? "Write --events to a folder outside the workspace and the extra roots (e.g. the CI job's temp folder)."
      : "Pass --events a path in a writable folder.",
  );
}
