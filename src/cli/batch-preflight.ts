// Before a batch starts anything, its tasks are planned as their runs will plan them (files read:
// policy, models, schema, the folders; nothing started). A batch none of whose tasks can be planned
// is refused whole (exit 2), each reason said once with its lines, instead of starting the engine's
// pool only to answer every task with the same usage error and exit 1: the usual cause is a shared
// option with a typo (--model, --models, --policy, --engines). Once one task can be planned the
// batch runs as before: a task that cannot is answered in its turn and does not stop the others.
import { isSandboxRunError, usageError } from "../errors.js";
import type { RunOptions } from "../index.js";
import { planCall } from "../operations.js";
import type { BatchTask } from "./batch-tasks.js";

/** The most distinct reasons one refusal lists. */
const LISTED_REASONS = 5;
/** The most line numbers one reason lists. */
const LISTED_LINES = 8;

export interface BatchPreflight {
  /** The batch's shared options (the agent's configuration under each task's own). */
  shared: RunOptions;
  env: Record<string, string | undefined>;
  engines?: string;
  /** How the tasks file is named in the refusal. */
  what: string;
}

/** Throws a usage error when no task of the batch can be planned; returns once one can. */
export async function refuseUnrunnableBatch(tasks: BatchTask[], preflight: BatchPreflight): Promise<void> {
  const reasons = new Map<string, { lines: number[]; hint?: string }>();
  for (const task of tasks) {
    try {
      await planCall(task.prompt, {
        options: task.options,
        config: preflight.shared,
        env: preflight.env,
        ...(preflight.engines ? { engines: preflight.engines } : {}),
      });
      return;
    } catch (error) {
      // Only a usage error is the task's input; anything else is left to the run to report.
      if (!isSandboxRunError(error) || error.code !== "usage") return;
      const reason = reasons.get(error.shortMessage) ?? { lines: [], hint: error.hint };
      reason.lines.push(task.line);
      reasons.set(error.shortMessage, reason);
    }
  }
  const listed = [...reasons].slice(0, LISTED_REASONS).map(([message, { lines }]) => {
    if (reasons.size === 1) return `${message.replace(/\.$/, "")} (every task)`;
    const shown = lines.slice(0, LISTED_LINES).join(", ");
    const more = lines.length > LISTED_LINES ? ` and ${lines.length - LISTED_LINES} more` : "";
    return `line${lines.length > 1 ? "s" : ""} ${shown}${more}: ${message.replace(/\.$/, "")}`;
  });
  const more = reasons.size > LISTED_REASONS ? `; and ${reasons.size - LISTED_REASONS} more reasons` : "";
  const only = reasons.size === 1 ? [...reasons.values()][0]!.hint : undefined;
  throw usageError(
    `No task of ${preflight.what} can run: ${listed.join("; ")}${more}.`,
    `${only ? `${only} ` : ""}Fix the shared options or the lines; no task was started.`,
  );
}
