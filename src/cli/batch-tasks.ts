// `sandbox-run batch`'s tasks file: one JSON object per line, each a call (id, prompt, cwd and,
// optionally, schema, policy, model, writable, timeout). Read and checked whole before anything
// starts, so a typo on line 40 does not leave 39 tasks run and the rest not: every bad line is
// reported with its number. Relative paths in a line are relative to the tasks file's folder.
import path from "node:path";
import type { JsonSchema } from "../agent.js";
import { usageError } from "../errors.js";
import type { RunOptions } from "../index.js";
import { MAX_TIMEOUT_SECONDS } from "../sandbox-contract.js";
import { readConfigJson, readTextFile } from "../util/config-file.js";
import { isNamedPolicy } from "../util/policy-names.js";
import { lazily, z } from "../util/zod.js";

/** A tasks file line's schema, built on first use, with the library's one zod (session 27: two were loaded). */
function buildTaskLine() {
  // A NUL cannot be in a path: refused with the line's number, not by the file system call later
  // (review, session 35: a policy path with one was reported as a bug in sandbox-run).
  const pathText = () =>
    z
      .string()
      .min(1)
      .refine((text) => !text.includes("\0"), "holds a NUL character");
  return z
    .object({
      id: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
          "letters, digits, '.', '_' and '-', at most 128, not starting with '.', '_' or '-'",
        )
        .describe("The task's name: in its result envelope, and its record's folder name under --record-dir."),
      prompt: z.string().min(1, "is empty").describe("The task."),
      cwd: pathText().describe("Its workspace (relative to the tasks file's folder)."),
      schema: z
        .union([pathText(), z.record(z.string(), z.unknown())])
        .optional()
        .describe("A JSON Schema object, or the path of a JSON Schema file: the result is then a validated object."),
      policy: pathText().optional().describe("A built-in policy name or a policy file (overrides --policy)."),
      model: z.string().min(1).optional().describe("provider/id (overrides --model)."),
      writable: z.array(pathText()).optional().describe("Extra writable directories."),
      timeout: z
        .number()
        .positive()
        .max(MAX_TIMEOUT_SECONDS, `is longer than a run may last (${MAX_TIMEOUT_SECONDS} seconds, a day)`)
        .optional()
        .describe("Wall-clock limit in seconds."),
    })
    .strict();
}
const taskLine = lazily(buildTaskLine);

export interface BatchTask {
  id: string;
  /** 1-based line number in the tasks file. */
  line: number;
  prompt: string;
  /** The call's own options (on top of the batch's shared ones). */
  options: RunOptions;
}

/** The most a tasks file may hold (a million short tasks fit). */
const MAX_TASKS_FILE_BYTES = 512 * 1024 * 1024;

/** The most bad lines one error lists. */
const LISTED_PROBLEMS = 10;

export function readBatchTasks(file: string): BatchTask[] {
  const text = readTextFile(
    file,
    "tasks",
    'Pass a JSONL file: one task per line, e.g. {"id": "a", "prompt": "...", "cwd": "repo"}.',
    MAX_TASKS_FILE_BYTES,
  );
  return parseBatchTasks(text, path.dirname(path.resolve(file)), file);
}

/** The tasks of a tasks file's text; `base` is where its relative paths start. */
export function parseBatchTasks(text: string, base: string, what = "the tasks file"): BatchTask[] {
  const tasks: BatchTask[] = [];
  const problems: string[] = [];
  const ids = new Map<string, number>();
  // A BOM (Notepad, PowerShell's Out-File) is no part of the first task.
  const lines = text.replace(/^\uFEFF/, "").split("\n");
  lines.forEach((raw, index) => {
    const line = index + 1;
    const source = raw.replace(/\r$/, "");
    // Blank lines and comment lines (`#` or `//`) are skipped.
    if (source.trim() === "" || /^\s*(#|\/\/)/.test(source)) return;
    let value: unknown;
    try {
      value = JSON.parse(source);
    } catch (error) {
      problems.push(`line ${line}: not JSON (${(error as Error).message})`);
      return;
    }
    const parsed = taskLine().safeParse(value);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "the line"}: ${i.message}`);
      problems.push(`line ${line}: ${issues.join("; ")}`);
      return;
    }
    const task = parsed.data;
    const earlier = ids.get(task.id);
    if (earlier !== undefined) {
      problems.push(`line ${line}: the id "${task.id}" is the id of line ${earlier} too`);
      return;
    }
    ids.set(task.id, line);
    try {
      tasks.push({ id: task.id, line, prompt: task.prompt, options: taskOptions(task, base) });
    } catch (error) {
      problems.push(`line ${line}: ${(error as { shortMessage?: string }).shortMessage ?? (error as Error).message}`);
    }
  });
  if (problems.length > 0) {
    const more = problems.length > LISTED_PROBLEMS ? ` (and ${problems.length - LISTED_PROBLEMS} more)` : "";
    throw usageError(
      `${problems.length} line(s) of ${what} cannot be run: ${problems.slice(0, LISTED_PROBLEMS).join("; ")}${more}.`,
      "Fix those lines; no task was started.",
    );
  }
  return tasks;
}

function taskOptions(task: z.infer<ReturnType<typeof buildTaskLine>>, base: string): RunOptions {
  const resolve = (p: string) => path.resolve(base, p);
  const options: RunOptions = { cwd: resolve(task.cwd) };
  if (task.schema !== undefined) {
    options.schema =
      typeof task.schema === "string"
        ? (readConfigJson(resolve(task.schema), "schema", "Pass the path of a JSON Schema file.") as JsonSchema)
        : (task.schema as JsonSchema);
    if (typeof task.schema === "string") options.configFiles = { schema: resolve(task.schema) };
  }
  // A policy sandbox-run ships by name; anything else is a file, from the tasks file's folder.
  if (task.policy !== undefined) options.policy = isNamedPolicy(task.policy) ? task.policy : resolve(task.policy);
  if (task.model !== undefined) options.model = task.model;
  if (task.writable !== undefined) options.additionalWritableDirectories = task.writable.map(resolve);
  if (task.timeout !== undefined) options.timeoutMs = Math.round(task.timeout * 1000);
  return options;
}
