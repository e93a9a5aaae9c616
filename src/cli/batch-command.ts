// `sandbox-run batch <tasks.jsonl>`: many calls from one file (`-`: stdin), each in its own sandbox
// with its own workspace, `--concurrency` at a time, with `--warm` sandboxes kept ready (default:
// one more than run at once) so each call skips the container's and Pi's start. Stdout: one
// `--json` envelope per task, on one line, as each ends (with the task's id); stderr: progress.
// Nothing starts when no task can be planned (batch-preflight.ts); otherwise a failing task does
// not stop the others (unless `--max-failures` have failed: then no more start); the exit code is 0
// only when every task succeeded. `--resume` skips the tasks an earlier batch's stdout reports as
// succeeded (batch-resume.ts). SIGINT / SIGTERM stop the running tasks (their sandboxes are
// removed), start no more, and remove the warm sandboxes.
import fs from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { SandboxRunError, usageError } from "../errors.js";
import type { WarmPoolChange } from "../index.js";
import { createAgent } from "../operations.js";
import { HostDir, HostDirError, locatePath } from "../util/host-dir.js";
import { isNamedPolicy } from "../util/policy-names.js";
import { resolvedPath } from "../util/resolved-path.js";
import { untilAborted } from "../util/until-aborted.js";
import { refuseUnrunnableBatch } from "./batch-preflight.js";
import { createBatchProgress } from "./batch-progress.js";
import { succeededTaskIds } from "./batch-resume.js";
import { type BatchTaskContext, runBatchTask } from "./batch-task-run.js";
import { type BatchTask, parseBatchTasks, readBatchTasks } from "./batch-tasks.js";
import { type CliIo, liveTerminal } from "./cli-io.js";
import { EXIT, exitCodeForSignal } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { parseRunFlags, type RunFlags } from "./parse-run-args.js";
import { envelope } from "./result-envelope.js";
import { type SignalStop, stopOnSignals } from "./stop-signals.js";
import { withRootFlags } from "./subcommand-flags.js";
import { jsonText, terminalLine } from "./terminal-text.js";

export interface BatchFlags
  extends Pick<
    RunFlags,
    | "model"
    | "models"
    | "policy"
    | "runtime"
    | "image"
    | "env"
    | "timeout"
    | "allowWorkspaceConfig"
    | "refuseWorkspaceConfig"
  > {
  concurrency?: string;
  warm?: string;
  recordDir?: string;
  engines?: string;
  quiet?: boolean;
  build?: boolean;
  resume?: string;
  maxFailures?: string;
}

/** `sandbox-run batch`'s action (program.ts loads this module when the command runs). */
export default function batchAction(
  ctx: CommandContext,
  file: string,
  flags: BatchFlags,
  command: Command,
): Promise<number> {
  return batchCommand(file, withRootFlags(flags, command), ctx.io, ctx.signals);
}

export async function batchCommand(
  file: string,
  flags: BatchFlags,
  io: CliIo,
  signals?: NodeJS.EventEmitter,
): Promise<number> {
  // Listened to from the start: a stop while the tasks are read and checked (seconds for thousands
  // of tasks) still answers every task it knows of and exits by the signal, instead of Node's
  // silent default exit with no line at all (review, session 30).
  const stop = stopOnSignals(signals, io, {
    announce: "stopping the running tasks and removing the sandboxes",
    stopped: "the task was stopped, and its sandbox, if it had one, removed",
  });
  try {
    return await runBatch(file, flags, io, stop);
  } finally {
    stop.dispose();
  }
}

async function runBatch(file: string, flags: BatchFlags, io: CliIo, stop: SignalStop): Promise<number> {
  const listed =
    file === "-"
      ? await untilAborted(tasksFromStdin(io), stop.signal).catch((error: unknown) => {
          if (stop.signal.aborted) return undefined;
          throw error;
        })
      : readBatchTasks(file);
  if (listed === undefined) return exitCodeForSignal(stop.by()!);
  if (listed.length === 0) {
    // A generated list with nothing in it ("no repository changed") is not a mistake to fail on.
    if (!flags.quiet) io.stderr(`sandbox-run: ${tasksSource(file)} holds no task; nothing to run\n`);
    return EXIT.ok;
  }
  refuseHostFilesInTaskFolders(listed, flags, {
    tasksFile: file === "-" ? undefined : file,
    allowWorkspaceConfig: flags.allowWorkspaceConfig === true || io.env.SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG === "1",
    warn: (text) => io.stderr(`${text}\n`),
  });
  const concurrency = wholeNumber(flags.concurrency ?? "1", "--concurrency", 1);
  // One more than run at once: the next task's sandbox is ready while a refill is being made.
  const warm = wholeNumber(flags.warm ?? String(concurrency + 1), "--warm", 0);
  const maxFailures = flags.maxFailures === undefined ? undefined : wholeNumber(flags.maxFailures, "--max-failures", 1);
  const recordDir = flags.recordDir ? recordParent(flags.recordDir) : undefined;
  const shared = parseRunFlags(flags, io.env);
  const tasks = await tasksToRun(listed, flags, io);
  if (tasks.length === 0) return EXIT.ok;
  if (recordDir) refuseUsedRecordFolders(tasks, recordDir);
  await refuseUnrunnableBatch(tasks, { shared, env: io.env, engines: flags.engines, what: tasksSource(file) });
  const progress = flags.quiet
    ? undefined
    : createBatchProgress(io.stderr, {
        total: tasks.length,
        tty: liveTerminal(io),
        columns: io.stderrColumns,
        color: liveTerminal(io) && !io.env.NO_COLOR,
      });
  // Lines beside the progress bar go through it (on a terminal they would land inside the bar).
  const note = (text: string) => (progress ? progress.note(text) : io.stderr(`${terminalLine(text)}\n`));
  const stoppedExit = () => exitCodeForSignal(stop.by() ?? "SIGINT");
  const queue = [...tasks];
  let failed = 0;
  const running = new Set<BatchTask>();
  // Stopped while the tasks were checked: no sandbox is made, every task is answered.
  if (!stop.signal.aborted) {
    const agent = await createAgent({
      ...shared,
      hostEnv: io.env,
      ...(flags.engines ? { engines: flags.engines } : {}),
      autoBuildImage: flags.build !== false,
      ...(flags.quiet ? {} : { onProgress: (line: string) => note(line) }),
      // No sandbox beyond the tasks: the last ones' refills would be made only to be removed.
      // Trouble in the pool is worth a line: its tasks then start cold (slower) and nothing else says why.
      warm: {
        size: warm,
        calls: tasks.length,
        onChange: (change) => {
          const trouble = warmTrouble(change);
          if (trouble) progress?.note(trouble);
        },
      },
    });

    let poolDownSaid = false;
    const context: BatchTaskContext = {
      agent,
      // Its tasks start cold (slower) and nothing else says why (review, session 33).
      poolDown: (reason) => {
        if (poolDownSaid || flags.quiet) return;
        poolDownSaid = true;
        note(`sandbox-run: ${reason}; tasks start cold`);
      },
      signal: stop.signal,
      stoppedExit: () => (stop.by() ? stoppedExit() : undefined),
      ...(recordDir ? { recordDir } : {}),
      quiet: flags.quiet === true,
      ...(shared.model ? { model: shared.model } : {}),
      io,
      note,
      ...(progress ? { progress } : {}),
    };
    // A task that throws fails alone: the other workers go on (review, session 45).
    const runOne = async (task: BatchTask) => {
      const ok = await runBatchTask(task, context).catch((error: unknown) => {
        io.stderr(`sandbox-run: task ${terminalLine(task.id)}: ${terminalLine((error as Error)?.message ?? error)}\n`);
        return false;
      });
      if (!ok) failed++;
    };
    // Enough failures (a revoked key, an engine gone) and the rest would most likely fail the same way.
    const tooManyFailed = () => maxFailures !== undefined && failed >= maxFailures;
    const worker = async () => {
      // Checked before taking one: a task not taken stays queued, and is answered as not started.
      while (!stop.signal.aborted && !tooManyFailed() && queue.length > 0) {
        // A task over a folder a running task holds would only wait for it (docs/security.md W8):
        // the first one that would not goes first.
        const free = queue.findIndex((task) => ![...running].some((other) => shareFolders(task, other)));
        const task = queue.splice(Math.max(free, 0), 1)[0]!;
        running.add(task);
        await runOne(task).finally(() => running.delete(task));
      }
    };

    try {
      await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker));
    } finally {
      await agent.close();
    }
  }
  answerNotStarted(queue, stop.by() ? { exitCode: stoppedExit() } : { failedBefore: failed }, io);
  failed += queue.length;
  const ran = tasks.length - queue.length;
  progress?.stop(
    `sandbox-run: ${tasks.length - failed} of ${tasks.length} task(s) succeeded, ${failed} failed${queue.length ? ` (${queue.length} not started)` : ""}; ${ran} run`,
  );
  if (stop.by()) return stoppedExit();
  return failed === 0 ? EXIT.ok : EXIT.agentFailed;
}

/**
 * Tasks never started (an interrupted batch, exiting by its signal's code; or `failedBefore` tasks
 * failed, the most --max-failures allows) still get their line: every id is answered.
 */
function answerNotStarted(queue: BatchTask[], end: { exitCode: number } | { failedBefore: number }, io: CliIo): void {
  const [why, exitCode] =
    "exitCode" in end
      ? ["the batch was interrupted.", end.exitCode]
      : [`${end.failedBefore} task(s) failed, the most --max-failures allows.`, EXIT.agentFailed];
  for (const task of queue) {
    const error = new SandboxRunError("aborted", `Not started: ${why}`);
    io.stdout(`${jsonText({ id: task.id, ...envelope({ ok: false, error, exitCode }) })}\n`);
  }
}

/** `batch -`: the tasks piped in (`jq -c ... | sandbox-run batch -`), relative paths from the current folder. */
async function tasksFromStdin(io: CliIo): Promise<BatchTask[]> {
  const text = await io.readStdin();
  if (text === undefined)
    throw usageError(
      "`sandbox-run batch -` reads its tasks from stdin, which is a terminal here.",
      "Pipe the tasks in (one JSON object per line), or pass the tasks file.",
    );
  return parseBatchTasks(text, process.cwd(), tasksSource("-"));
}

/** How the tasks' source is named in messages. */
function tasksSource(file: string): string {
  return file === "-" ? "stdin" : file;
}

/** The tasks not yet done: with --resume, those the earlier results do not report as succeeded. */
async function tasksToRun(listed: BatchTask[], flags: BatchFlags, io: CliIo): Promise<BatchTask[]> {
  if (!flags.resume) return listed;
  const succeeded = await succeededTaskIds(flags.resume);
  const tasks = listed.filter((task) => !succeeded.has(task.id));
  const skipped = listed.length - tasks.length;
  if (skipped > 0 && !flags.quiet) {
    const rest = tasks.length > 0 ? `${tasks.length} left to run` : "nothing left to run";
    io.stderr(`sandbox-run: ${skipped} of ${listed.length} task(s) already succeeded in ${flags.resume}; ${rest}\n`);
  }
  return tasks;
}

/** Whether two tasks' folders (workspace, writable ones) are the same or one inside the other. */
function shareFolders(a: BatchTask, b: BatchTask): boolean {
  const folders = (t: BatchTask) =>
    [t.options.cwd, ...(t.options.additionalWritableDirectories ?? [])].map((d) => `${canonical(d!)}${path.sep}`);
  const theirs = folders(b);
  return folders(a).some((x) => theirs.some((y) => x.startsWith(y) || y.startsWith(x)));
}

/** `dir` from the current folder, canonicalised as far as it exists. */
function canonical(dir: string): string {
  return resolvedPath(path.resolve(dir));
}

/**
 * The batch's own files stay out of every task's folders (its workspace and writable folders, any
 * task's, skipped ones too): a task's sandbox can write there, and the batch trusts both. In a
 * record folder it could plant `<id>` as a link for a later task's record to be moved through; in
 * the results file an earlier batch appended to, a line saying that a failed task succeeded. So do
 * the policy, models and engines files read as each task starts: one inside another task's folder
 * would be that task's sandbox's choice of this task's boundary (a file in a task's own folders is
 * the workspace-config rule's, checked when the task starts, before its sandbox runs), and, in a
 * rerun (--resume), the tasks file itself.
 */
function refuseHostFilesInTaskFolders(
  tasks: BatchTask[],
  flags: BatchFlags,
  options: { tasksFile?: string; allowWorkspaceConfig: boolean; warn: (text: string) => void },
): void {
  const { tasksFile } = options;
  // Any policy that is not one sandbox-run ships is a file (a bare "review" is ./review).
  const isFile = (value: string | undefined): value is string => value !== undefined && !isNamedPolicy(value);
  const files: Array<{ flag: string; at: string; readFor?: BatchTask; config?: boolean }> = [
    ...(flags.recordDir ? [{ flag: "--record-dir", at: flags.recordDir }] : []),
    ...(flags.resume ? [{ flag: "--resume", at: flags.resume }] : []),
  ];
  // A rerun (--resume) reads the tasks file again, after the first run's sandboxes ran. A first run
  // reads it before any task starts, but one inside a task's folder is that tree's own file (a
  // repository's `tasks.jsonl`): it names every task's folders, policy, model and schema, as a
  // policy file there would (docs/security.md E5; review, session 44), and is refused as one is,
  // unless the caller accepts it.
  if (tasksFile) files.push({ flag: "the tasks file", at: path.resolve(tasksFile), config: !flags.resume });
  // Shared files are read for every task: with more than one, some task's sandbox runs first.
  if (tasks.length > 1) {
    if (isFile(flags.policy)) files.push({ flag: "--policy", at: path.resolve(flags.policy) });
    if (flags.models) files.push({ flag: "--models", at: flags.models });
    if (flags.engines) files.push({ flag: "--engines", at: flags.engines });
  }
  for (const task of tasks) {
    const policy = task.options.policy;
    if (typeof policy === "string" && isFile(policy))
      files.push({ flag: `the policy of task "${task.id}"`, at: path.resolve(policy), readFor: task });
  }
  const folders = tasks.flatMap((task) =>
    [task.options.cwd, ...(task.options.additionalWritableDirectories ?? [])].map((folder) => ({
      task,
      folder: folder!,
      tree: canonical(folder!),
    })),
  );
  // Built once, looked up by path: thousands of tasks sharing one policy file cost one resolution
  // and a walk up its folders each, not a scan of every task's folders (review, session 30: 10 s
  // before the first task of 6,000).
  const trees = [...new Set(folders.map((f) => f.tree))];
  const byTree = new Map<string, typeof folders>();
  for (const folder of folders) byTree.set(folder.tree, [...(byTree.get(folder.tree) ?? []), folder]);
  const locatedAt = new Map<string, ReturnType<typeof locatePath>>();
  for (const { flag, at, readFor, config } of files) {
    // Resolved only up to a task's folder: a link inside one (which its sandbox may have planted
    // in an earlier run) must not decide where the batch's files go.
    const absolute = path.resolve(at);
    let located = locatedAt.get(absolute);
    try {
      located ??= locatePath(absolute, trees);
    } catch (error) {
      if (!(error instanceof HostDirError)) throw error;
      throw usageError(`Cannot use ${flag} ${at}: ${error.message}.`, `Give ${flag} a path in a folder of yours.`);
    }
    locatedAt.set(absolute, located);
    if (located.kind !== "held") continue;
    // Task folders may nest: any task folder holding the path (the tree it was found in first) counts.
    const holders = [located.tree, ...foldersAbove(path.join(located.tree, ...located.parts))].flatMap(
      (tree) => byTree.get(tree) ?? [],
    );
    const held = holders.find((f) => f.task !== readFor);
    if (!held) continue;
    const { task, folder } = held;
    if (config && options.allowWorkspaceConfig) {
      options.warn(
        `sandbox-run: warning: the tasks file ${terminalLine(at)} lies inside ${terminalLine(folder)}, a folder task "${terminalLine(task.id)}" runs in; read as that tree's own configuration, which --allow-workspace-config (or SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG=1) accepts.`,
      );
      continue;
    }
    if (config)
      throw usageError(
        `The tasks file ${at} lies inside ${folder}, a folder task "${task.id}" runs in: that tree would choose every task's folders, policy, model and schema, as a policy file inside it would.`,
        "Keep the tasks file outside the tasks' folders (e.g. in the CI job's own checkout); if you wrote that tree yourself and trust it, pass --allow-workspace-config.",
      );
    throw usageError(
      `${flag} ${at} lies inside ${folder}, a folder task "${task.id}" runs in: its sandbox can write there, and the batch would trust what it finds.`,
      `Give ${flag === "--record-dir" || flag === "--resume" ? flag : "that file"} a path outside every task's folders (e.g. next to the tasks file).`,
    );
  }
}

/** `place` and each folder above it, up to the root. */
function foldersAbove(place: string): string[] {
  const above = [place];
  for (let dir = place; path.dirname(dir) !== dir; ) above.push((dir = path.dirname(dir)));
  return above;
}

function wholeNumber(value: string, flag: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw usageError(`${flag} must be a whole number${min > 0 ? " of at least 1" : ""}, not "${value}".`);
  return n;
}

/**
 * A task's record needs a new or empty `<dir>/<id>` (a record is never written over). Refused before
 * anything starts, instead of each such task failing in its turn: the usual cause is a rerun
 * (`--resume`) with the first run's --record-dir, whose failed tasks left their records there.
 */
function refuseUsedRecordFolders(tasks: BatchTask[], dir: string): void {
  const used = tasks.filter((task) => {
    try {
      return fs.readdirSync(path.join(dir, task.id)).length > 0;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code !== "ENOENT";
    }
  });
  if (used.length === 0) return;
  const shown = used.slice(0, LISTED_RECORD_FOLDERS).map((task) => task.id);
  const more = used.length > shown.length ? ` and ${used.length - shown.length} more` : "";
  throw usageError(
    `${used.length} task(s) would write their record where one already is: ${shown.map((id) => path.join(dir, id)).join(", ")}${more}.`,
    "Pass another --record-dir, or move those folders away (they hold earlier runs' records); no task was started.",
  );
}

/** The most record folders one refusal names. */
const LISTED_RECORD_FOLDERS = 8;

/**
 * The folder each task's record goes into (as `<dir>/<id>`): made now, so a bad path fails before
 * any task. Made as the records are written (HostDir): through no other user's link, and only in
 * folders of this user's or root's that no one else may write to.
 */
function recordParent(dir: string): string {
  try {
    const opened = HostDir.open(dir, { create: true });
    opened.close();
    return opened.path;
  } catch (error) {
    throw usageError(
      `Cannot use ${dir} for the tasks' records: ${error instanceof HostDirError ? error.message : ((error as NodeJS.ErrnoException).code ?? (error as Error).message)}.`,
      "Pass --record-dir a folder of yours that you can write; each task's record goes into <folder>/<id>.",
    );
  }
}

/** What a batch says of its warm pool: only trouble, after which tasks start cold (slower) until it passes. */
function warmTrouble(change: WarmPoolChange): string | undefined {
  if (change.type === "warm.discarded") return `a warm sandbox was discarded, and another is made: ${change.reason}`;
  if (change.type === "warm.make-failed")
    return `a warm sandbox could not be made (tasks start cold meanwhile; next try in ${Math.round(change.retryInMs / 1000)} s): ${change.reason}`;
  return undefined;
}
