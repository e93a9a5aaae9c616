// SIGINT / SIGTERM / SIGHUP as an AbortSignal, for every command that starts a sandbox or a
// container (run, replay, batch, demo, doctor): the command stops what it started (the sandbox
// stopped, judged and removed, its run folder and scratch files removed) and exits 128 + the
// signal's number, instead of Node's default handler ending the process mid-run.
import { SandboxRunError } from "../errors.js";
import type { CliIo } from "./cli-io.js";
import { exitCodeForSignal, STOP_SIGNALS, type StopSignal } from "./exit-codes.js";
import { reportError } from "./report-error.js";

/** How a signal reads to a person at the terminal (no AbortSignal in sight: the CLI was interrupted). */
const SIGNAL_WORDS: Record<StopSignal, string> = {
  SIGINT: "SIGINT (Ctrl-C)",
  SIGTERM: "SIGTERM",
  SIGHUP: "SIGHUP (the terminal or session closed)",
};

/**
 * The "aborted" error a command's signal gives (the AbortSignal's reason): `stopped` says what was
 * stopped and removed. Its own hint, so the library's "the caller's AbortSignal" is never shown.
 */
export function interruptedError(name: StopSignal, stopped: string, after?: string): SandboxRunError {
  return new SandboxRunError("aborted", `Interrupted by ${SIGNAL_WORDS[name]}; ${stopped}.`, {
    hint: `The command was stopped by that signal, not by a failure; ${after ?? "run it again to start over."}`,
  });
}

/** What a command's stop says: announced at the signal, what was stopped, and what to do after (default: run it again). */
export interface StopWords {
  announce: string;
  stopped: string;
  after?: string;
}

export interface SignalStop {
  /** Aborted by the first stop signal, its reason interruptedError(...). */
  signal: AbortSignal;
  /** The first stop signal received, if any. */
  by(): StopSignal | undefined;
  /** Stops listening (the process's default handling comes back). */
  dispose(): void;
}

/**
 * Listens for the stop signals on `signals` (the process, in main.ts): the first one aborts
 * `signal`, each one says `announce(name)` on stderr. Without `signals` (a program run in-process
 * by a test), nothing is listened to.
 */
export function stopOnSignals(signals: NodeJS.EventEmitter | undefined, io: CliIo, words: StopWords): SignalStop {
  const controller = new AbortController();
  let interruptedBy: StopSignal | undefined;
  const handlers = STOP_SIGNALS.map((name) => {
    const handler = () => {
      interruptedBy ??= name;
      io.stderr(`\nsandbox-run: ${name} received, ${words.announce} ...\n`);
      controller.abort(interruptedError(name, words.stopped, words.after));
    };
    signals?.on(name, handler);
    return { name, handler };
  });
  return {
    signal: controller.signal,
    by: () => interruptedBy,
    dispose: () => {
      for (const { name, handler } of handlers) signals?.off(name, handler);
    },
  };
}

/**
 * Runs a command's `work` with the stop signals listened to (stopOnSignals): interrupted, its error
 * is reported and the exit code is 128 + the signal's number; any other failure is thrown on.
 */
export async function interruptible(
  signals: NodeJS.EventEmitter | undefined,
  io: CliIo,
  words: StopWords,
  work: (signal: AbortSignal) => Promise<number>,
): Promise<number> {
  const interrupt = stopOnSignals(signals, io, words);
  try {
    return await work(interrupt.signal);
  } catch (error) {
    const interruptedBy = interrupt.by();
    if (!interruptedBy) throw error;
    reportError(error, io);
    return exitCodeForSignal(interruptedBy);
  } finally {
    interrupt.dispose();
  }
}
