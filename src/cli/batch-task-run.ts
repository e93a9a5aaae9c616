// One task of a `sandbox-run batch`: its run on the batch's agent, its envelope on stdout (with its
// id) as it ends, its record notes and warnings beside the progress.
import path from "node:path";
import { isSandboxRunError } from "../errors.js";
import type { ContainerPiAgent, RunDetails } from "../index.js";
import type { createBatchProgress } from "./batch-progress.js";
import type { BatchTask } from "./batch-tasks.js";
import type { CliIo } from "./cli-io.js";
import { EXIT, exitCodeFor } from "./exit-codes.js";
import { sandboxLine } from "./progress-reporter.js";
import { recordNoteLine } from "./record-notes.js";
import { envelope, type ResultEnvelope } from "./result-envelope.js";
import { jsonText } from "./terminal-text.js";
import { isHostEvent, WARNING_EVENTS } from "./warning-events.js";

export interface BatchTaskContext {
  agent: ContainerPiAgent;
  /** The batch's stop (SIGINT, SIGTERM, SIGHUP). */
  signal: AbortSignal;
  /** The batch's exit code once a signal stopped it (130, 143, 129), else undefined. */
  stoppedExit: () => number | undefined;
  /** Each task's record goes to `<recordDir>/<id>`. */
  recordDir?: string;
  quiet: boolean;
  /** The batch's --model, named in a failed task's envelope that gave none of its own. */
  model?: string;
  io: CliIo;
  /** A line beside the progress (through the bar on a terminal). */
  note: (text: string) => void;
  /** A task started cold because the warm pool could not start: said once for the batch. */
  poolDown?: (reason: string) => void;
  progress?: ReturnType<typeof createBatchProgress>;
}

/** Runs one task and writes its envelope; whether it succeeded. */
export async function runBatchTask(task: BatchTask, context: BatchTaskContext): Promise<boolean> {
  const { io, note, progress } = context;
  const started = Date.now();
  progress?.started(task.id);
  let line: ResultEnvelope;
  let ok = false;
  let warmCall: boolean | undefined;
  let recordNotes: string[] | undefined;
  try {
    const details: RunDetails = await context.agent.runDetailed(task.prompt, {
      ...task.options,
      signal: context.signal,
      // A file the task's own tree holds chooses part of its run: said, as for a single run.
      onEvent: (event) => {
        // Pi's events say nothing here: their types are the sandbox's to choose (isHostEvent).
        if (!isHostEvent(event)) return;
        if (event.type === "config.untrusted" && !context.quiet)
          note(`sandbox-run: warning: task ${task.id}: ${String(event.data.warning)}`);
        // What a single run says even with -q (files, links or names host tools misread, a stale
        // image, a dead run's apply undone, entries still lent): said for the task too.
        const warning = WARNING_EVENTS.has(event.type) ? sandboxLine(event.type, event.data) : undefined;
        if (warning) note(`sandbox-run: task ${task.id}: ${warning}`);
        const missed = event.type === "warm.miss" ? String(event.data.reason) : "";
        if (missed.startsWith("the warm pool could not start")) context.poolDown?.(missed);
      },
      ...(context.recordDir ? { record: path.join(context.recordDir, task.id) } : {}),
    });
    ok = true;
    warmCall = details.warm;
    recordNotes = details.recordNotes;
    line = envelope({ ok: true, details, exitCode: EXIT.ok });
  } catch (error) {
    const e = isSandboxRunError(error) ? error : undefined;
    warmCall = e?.warm;
    recordNotes = e?.recordNotes;
    // Stopped by a signal: the batch's own exit code (130, 143, 129), as for a single run.
    const exitCode = e
      ? ((e.code === "aborted" ? context.stoppedExit() : undefined) ?? exitCodeFor(e.code))
      : EXIT.agentFailed;
    line = envelope({ ok: false, error, exitCode, model: task.options.model ?? context.model });
  }
  let text: string;
  try {
    text = jsonText({ id: task.id, ...line });
  } catch (error) {
    // An answer no string can hold is a failure of this task alone: the batch goes on, and
    // every task is answered (review, session 45: a RangeError here ended the whole batch).
    ok = false;
    const problem = new Error(`the task's answer could not be written (${(error as Error).message})`);
    line = envelope({
      ok: false,
      error: problem,
      exitCode: EXIT.agentFailed,
      model: task.options.model ?? context.model,
    });
    text = jsonText({ id: task.id, ...line });
  }
  io.stdout(`${text}\n`);
  // Where a task's record went instead (its folder taken meanwhile), or what it lacks: said on
  // stderr as for a single run, not only in the envelope (review, session 30).
  for (const recordNote of recordNotes ?? []) note(`sandbox-run: task ${task.id}: ${recordNoteLine(recordNote)}`);
  const error = line.error as { code?: string; message?: string } | null;
  progress?.finished(task.id, {
    ok,
    ms: Date.now() - started,
    warm: warmCall,
    error: error ? `${error.code}: ${error.message}` : undefined,
  });
  return ok;
}
