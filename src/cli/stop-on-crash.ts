// An exception nothing caught (a bug: review, session 44 found one thrown from a paced replay's
// timer by a hostile record) must not end the process between the sandbox's writes and their
// judgement, leaving its container, run folder and lent workspace behind. The first one is said
// on stderr and stops the command as SIGTERM does (the sandbox stopped, judged and removed; every
// command that starts a sandbox listens: stop-signals.ts); the exit code is then 1, not 143. Where
// no command listens, or a second one comes, the process ends at once with 1. SANDBOX_RUN_DEBUG=1
// prints its stack too.
import { inspect } from "node:util";
import { EXIT } from "./exit-codes.js";
import { terminalLine, terminalText } from "./terminal-text.js";

export interface CrashStop {
  /** The first uncaught exception, if there was one. */
  crashed(): unknown;
}

export function stopOnCrash(
  proc: Pick<NodeJS.Process, "on" | "emit" | "listenerCount" | "exit">,
  stderr: (text: string) => void,
  debug = false,
): CrashStop {
  let first: unknown;
  let seen = false;
  proc.on("uncaughtException", (error: unknown) => {
    const words = terminalLine(describe(error).slice(0, 500));
    if (debug) stderr(`${stackOf(error)}\n`);
    if (seen || proc.listenerCount("SIGTERM") === 0) {
      stderr(`sandbox-run: internal error (${words}); exiting.\n`);
      proc.exit(EXIT.agentFailed);
      return;
    }
    seen = true;
    first = error;
    stderr(
      `sandbox-run: internal error (${words}); stopping the command as SIGTERM would, so the sandbox is stopped, judged and removed. Please report this.\n`,
    );
    proc.emit("SIGTERM", "SIGTERM");
  });
  return { crashed: () => first };
}

/** The exception's stack, as terminal text; never throws (a `stack` getter may). */
function stackOf(error: unknown): string {
  try {
    return error instanceof Error && typeof error.stack === "string" ? terminalText(error.stack) : "(no stack)";
  } catch {
    return "(a stack that cannot be printed)";
  }
}

/** The exception in a few words; never throws (a thrown `Object.create(null)` has no toString). */
function describe(error: unknown): string {
  try {
    return error instanceof Error
      ? `${error.name}: ${error.message}`
      : inspect(error, { depth: 1, breakLength: Infinity });
  } catch {
    return "an exception that cannot be printed";
  }
}
