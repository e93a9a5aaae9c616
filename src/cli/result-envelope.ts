// The --json result envelope: one JSON object on stdout with the same shape whatever happened (a
// result, a failed run, or a usage error before anything started), so a script reads one format.
//
// Two exit codes, never to be confused: `exitCode` is the CLI's own (0, 1, 2, 3, 4, 124, 130, 143,
// what the process exits with); `error.sandboxExitCode` is the sandbox's (the container's: Pi's own
// or its launcher's), absent when no container ran. They differ by design: Pi exits 0 when the
// model provider fails, and the CLI then exits 1.
import { type ErrorSummary, errorSummary, isSandboxRunError, usageError } from "../errors.js";
import type { RunDetails } from "../index.js";

interface EnvelopeError extends Omit<ErrorSummary, "exitCode"> {
  /** The sandbox's (the container's) exit code; not the CLI's, which is the envelope's `exitCode`. */
  sandboxExitCode?: number | null;
}

export interface ResultEnvelope {
  ok: boolean;
  result: unknown;
  error: EnvelopeError | null;
  /** The exit code of the sandbox-run process. */
  exitCode: number;
  runId: string | null;
  usage: unknown;
  durationMs: number | null;
  model: string | null;
  piVersion: string | null;
  image: string | null;
  policy: string | null;
  changedFiles: unknown;
  /** Whether a warm sandbox (made before the call) ran it. */
  warm: boolean;
  /** Changes to files host tools read when a person runs them ("host-run file changed"; not violations). */
  hostRunFiles?: unknown;
  /** How many host-run changes there were in all: more than hostRunFiles lists when it was cut. */
  hostRunCount?: number;
  recordNotes?: string[];
}

export function envelope(input: {
  ok: boolean;
  details?: RunDetails;
  error?: unknown;
  exitCode: number;
  model?: string;
  recordNotes?: string[];
}): ResultEnvelope {
  const d = input.details;
  const e = isSandboxRunError(input.error) ? input.error : undefined;
  const recordNotes = input.recordNotes ?? d?.recordNotes ?? e?.recordNotes;
  return {
    ok: input.ok,
    result: d ? d.result : null,
    error: input.ok ? null : envelopeError(input.error),
    exitCode: input.exitCode,
    runId: d?.runId ?? e?.runId ?? null,
    usage: d?.usage ?? e?.usage ?? null,
    durationMs: d?.durationMs ?? e?.durationMs ?? null,
    model: d?.model ?? input.model ?? null,
    piVersion: d?.piVersion ?? e?.piVersion ?? null,
    image: d?.image ?? e?.image ?? null,
    policy: d?.policy ?? e?.policy ?? null,
    // A failed run's too: what it left in the workspace (review, session 27).
    changedFiles: d?.changedFiles ?? e?.changedFiles ?? null,
    warm: d?.warm ?? e?.warm ?? false,
    ...((d?.hostRunFiles ?? e?.hostRunFiles) ? { hostRunFiles: d?.hostRunFiles ?? e?.hostRunFiles } : {}),
    ...((d?.hostRunCount ?? e?.hostRunCount) ? { hostRunCount: d?.hostRunCount ?? e?.hostRunCount } : {}),
    ...(recordNotes?.length ? { recordNotes } : {}),
  };
}

function envelopeError(error: unknown): EnvelopeError {
  const { exitCode, ...summary } = errorSummary(error);
  return exitCode === undefined ? summary : { ...summary, sandboxExitCode: exitCode };
}

/** The envelope of a usage error found before any run (a bad flag, an unknown command). */
export function usageEnvelope(message: string, hint: string | undefined, exitCode: number): ResultEnvelope {
  return envelope({ ok: false, error: usageError(message, hint), exitCode });
}
