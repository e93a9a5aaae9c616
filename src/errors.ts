import type { Usage } from "./sandbox-contract.js";

// One error family with the execa shape: every failure says what happened, carries the
// evidence (exit code, stderr tail, container id, last events) and says what to do next.

export type SandboxRunErrorCode =
  | "usage" // bad input from the caller: exit 2
  | "docker-unavailable" // engine not reachable, or this host cannot run the controller (not Linux, a Node older than package.json's engines): exit 3
  | "image-missing" // runner image absent or stale: exit 3
  | "timeout" // wall-clock limit: exit 124
  | "aborted" // caller's AbortSignal: exit 130
  | "model-error" // the provider failed (Pi still exits 0): exit 1
  | "no-result" // the agent ended without a text or final-tool result: exit 1
  | "validation" // the final object failed host-side validation: exit 1
  | "invalid-result" // the model kept answering with a final result the schema refuses: exit 1
  | "limit" // a resource limit tripped (memory, pids, output, disk): exit 1
  | "agent-crashed" // Pi or the launcher exited abnormally: exit 1
  | "policy-violation" // e.g. a protected path was modified: exit 1
  | "contradiction" // the sandbox's output contradicted what the model said (forged events): exit 1
  | "not-applied" // the run ended, but its changes could not be handed back (the host tree changed meanwhile, a write or commit failed): exit 1
  | "replay-divergence"; // a replayed run's model request differs from the recorded one: exit 4

/**
 * The code events, run records and the CLI's `--json` envelope give a failure: a SandboxRunError's
 * code, or "internal" for any other error (a bug in sandbox-run): exit 1.
 */
export type ReportedErrorCode = SandboxRunErrorCode | "internal";

export interface SandboxRunErrorDetails {
  /** What to do next, in one sentence. */
  hint?: string;
  /**
   * The sandbox's exit code: the container's (Pi's own, or its launcher's), null when it never
   * exited, absent when no container ran. Not the CLI's exit code.
   */
  exitCode?: number | null;
  stderrTail?: string;
  containerId?: string;
  /** The last few Pi/sandbox events, newest last. */
  lastEvents?: unknown[];
  durationMs?: number;
  /** Which limit tripped, for code "limit" (e.g. "memory", "pids", "output", "line", "tmpfs", "turns", "cost"). */
  limit?: string;
  runId?: string;
  /** Token usage and cost Pi reported before the failure. */
  usage?: Usage;
  cause?: unknown;
}

export class SandboxRunError extends Error {
  override name = "SandboxRunError";
  readonly code: SandboxRunErrorCode;
  /** The message without the hint. */
  readonly shortMessage: string;
  readonly hint?: string;
  /** The sandbox's (the container's) exit code; see SandboxRunErrorDetails.exitCode. */
  exitCode?: number | null;
  stderrTail?: string;
  containerId?: string;
  lastEvents?: unknown[];
  durationMs?: number;
  readonly limit?: string;
  runId?: string;
  usage?: SandboxRunErrorDetails["usage"];
  /** Set by a run that got as far as choosing its sandbox: whether a warm sandbox served it. */
  warm?: boolean;
  /** Set by a run whose container ran: what ran it. */
  image?: string;
  policy?: string;
  piVersion?: string;
  /**
   * Set by a failed run that handed its changes back in place (bind mode, or copy mode's apply):
   * what it changed in the workspace and writable roots, as the walk after it saw them.
   */
  changedFiles?: { created: string[]; modified: string[]; deleted: string[]; truncated?: Record<string, number> };
  /** Changes to host-run files among them (as RunDetails.hostRunFiles). */
  hostRunFiles?: Array<{ path: string; change: string; why: string }>;
  /** How many there were in all (as RunDetails.hostRunCount). */
  hostRunCount?: number;
  /**
   * Set by a failed run with a record that could not be written whole or where it was asked for:
   * what is missing, or where the record went instead (as RunDetails.recordNotes).
   */
  recordNotes?: string[];

  constructor(code: SandboxRunErrorCode, message: string, details: SandboxRunErrorDetails = {}) {
    super(details.hint ? `${message}\n${details.hint}` : message, { cause: details.cause });
    this.code = code;
    this.shortMessage = message;
    this.hint = details.hint;
    this.exitCode = details.exitCode;
    this.stderrTail = details.stderrTail;
    this.containerId = details.containerId;
    this.lastEvents = details.lastEvents;
    this.durationMs = details.durationMs;
    this.limit = details.limit;
    this.runId = details.runId;
    this.usage = details.usage;
  }

  get timedOut(): boolean {
    return this.code === "timeout";
  }
  get isCanceled(): boolean {
    return this.code === "aborted";
  }
}

export const usageError = (message: string, hint?: string) => new SandboxRunError("usage", message, { hint });

/**
 * The same error with another hint (a copy: the hint is part of its message), keeping every field
 * it carries, the ones a run sets after it is made (warm, changedFiles, image ...) with the rest.
 */
export function withHint(error: SandboxRunError, hint: string): SandboxRunError {
  const copy = new SandboxRunError(error.code, error.shortMessage, { hint, cause: error.cause });
  for (const [key, value] of Object.entries(error)) if (key !== "hint") Reflect.set(copy, key, value);
  copy.stack = error.stack;
  return copy;
}

/**
 * How a run stopped by its caller's AbortSignal fails: a SandboxRunError with code "aborted" (like
 * every other failure), the signal's reason as its `cause`. A reason that is such an error already
 * (the CLI's SIGINT) gives its message and hint.
 */
/**
 * The error of a run its caller's AbortSignal stopped. `beforeSandbox`: it stopped while the call
 * waited (for its trees, an engine, the image), so there was no sandbox to stop (review, session 34:
 * the hint said one was stopped and removed).
 */
export function abortedError(
  reason: unknown,
  details: SandboxRunErrorDetails = {},
  beforeSandbox = false,
): SandboxRunError {
  const own = isSandboxRunError(reason) && reason.code === "aborted" ? reason : undefined;
  const name = (reason as { name?: unknown })?.name;
  const why =
    own || reason === undefined || name === "AbortError"
      ? ""
      : name === "TimeoutError"
        ? ": its AbortSignal timed out"
        : `: ${reason instanceof Error ? reason.message : String(reason)}`;
  return new SandboxRunError("aborted", own?.shortMessage ?? `The run was aborted${why}.`, {
    hint:
      own?.hint ??
      (beforeSandbox
        ? "The caller's AbortSignal stopped it before its sandbox was made: nothing was started."
        : "The caller's AbortSignal stopped it; the sandbox was stopped and removed."),
    ...details,
    cause: reason,
  });
}

export function isSandboxRunError(error: unknown): error is SandboxRunError {
  return error instanceof SandboxRunError;
}

/** An error's documented fields, as data (a run record, the CLI's --json envelope); never its stack. */
export interface ErrorSummary {
  code: ReportedErrorCode;
  message: string;
  hint?: string;
  exitCode?: number | null;
  stderrTail?: string;
  limit?: string;
}

export function errorSummary(error: unknown): ErrorSummary {
  if (isSandboxRunError(error)) {
    const { code, shortMessage: message, hint, limit, exitCode, stderrTail } = error;
    return { code, message, hint, limit, exitCode, stderrTail };
  }
  return { code: "internal", message: (error as Error)?.message ?? String(error) };
}
