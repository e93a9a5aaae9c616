// How a run ends, decided from what the host saw: a tripped limit, budget, timeout or abort; the
// container's exit; and what the event stream claims the agent produced. A pure function, so the
// failure contract (docs/security.md E1) is unit-tested without an engine. The order is fixed:
// aborted > replay divergence > contradiction > timeout > invalid results > tripped limit > limit
// shown by the exit > crash > result (validated) > failure. The result itself is the model's, as
// the gateway relayed it (confirm-outcome.ts); a contradiction comes before every failure the
// sandbox can bring about (a timeout, a limit, words on its stderr), so it cannot hide a forgery
// it was caught at behind another kind of failure.
import type { JsonSchema } from "../agent.js";
import { abortedError, SandboxRunError, type SandboxRunErrorDetails } from "../errors.js";
import { PI_RECORD_SHAPE } from "../pi/pi-events.js";
import type { Outcome } from "../pi/result-collector.js";
import { LAUNCHER_EXIT } from "../sandbox-contract.js";
import { shownPath } from "../workspace/violation-message.js";
import { confirmOutcome, type ModelEvidence } from "./confirm-outcome.js";
import { crashReason, invalidResultHint, limitFromExit, limitHint } from "./failure-explanations.js";
import type { ResultValidator } from "./result-validator.js";
import type { Trip } from "./run-trip.js";
import type { OutcomeChecks } from "./validate-in-worker.js";

export interface OutcomeFacts {
  trip?: Trip;
  /** The caller's AbortSignal reason, the cause of the "aborted" error. */
  abortReason?: unknown;
  /** The container's exit; exitCode is 0 when the host stopped it after Pi had settled. */
  exit: { exitCode: number; oomKilled: boolean };
  stderrTail: string;
  /** What the run produced. */
  outcome: Outcome;
  badRecords: number;
  /** Of them, lines with more structure than the host reads (a result with 200,000 values, or 128 levels deep). */
  tooLargeRecords?: number;
  runtime: string;
  /** The policy's pids limit, named when gVisor's kernel fails (it counts gVisor's threads too). */
  pids?: number;
  /** Set in schema mode: the host-side validator of the final object. */
  validator?: ResultValidator;
  /** Set in schema mode: the schema and the final tool's name, to check the model's call. */
  schema?: JsonSchema;
  finalToolName?: string;
  /** What the model actually said in Pi's conversation (the gateway's ledger); the outcome must agree. */
  evidence?: ModelEvidence;
  /** Takes the run's credentials out of a result, before it is validated (what is validated is what is returned). */
  scrub?: <T>(value: T) => T;
  /**
   * The run's checks (confirmOutcome's preparation, the validation) answered by its check worker
   * (validate-in-worker.ts decideInWorker); without them, prepareGuarded and `validator` on this thread.
   */
  checks?: OutcomeChecks;
}

type Decision = { ok: true; kind: "text" | "structured"; result: unknown } | { ok: false; error: unknown };

// A decision table read top to bottom: the order is precedence (an abort beats a contradiction
// beats a timeout beats a limit beats what the exit code says beats the result), so it stays one
// function.
/** `evidence` is attached to every error (exit code, stderr tail, container id, last events ...). */
export function decideOutcome(facts: OutcomeFacts, evidence: SandboxRunErrorDetails): Decision {
  const fail = (error: unknown): Decision => ({ ok: false, error });
  const { trip, exit } = facts;
  if (trip?.code === "aborted") return fail(abortedError(facts.abortReason, evidence));
  if (trip?.code === "replay-divergence") {
    return fail(
      new SandboxRunError("replay-divergence", trip.message, {
        ...evidence,
        hint: 'If the change is intended, record the run again; to see every difference, replay with --replay-mode lenient (or mode: "lenient").',
      }),
    );
  }
  let outcome = facts.outcome;
  if (facts.evidence) {
    const confirmed = confirmOutcome(outcome, facts.evidence, {
      finalToolName: facts.finalToolName,
      schema: facts.schema,
      ...(facts.checks ? { prepare: facts.checks.prepare } : {}),
    });
    if (!confirmed.ok) {
      return fail(
        new SandboxRunError(
          "contradiction",
          `The sandbox's output contradicted the model: ${confirmed.contradiction}.`,
          {
            ...evidence,
            hint: "Something in the sandbox (often repository code a tool ran: a git hook, a test, an install script) wrote into Pi's event stream; treat the workspace as hostile. The model's real replies are in the run's events.",
          },
        ),
      );
    }
    outcome = confirmed.outcome;
  }
  if (facts.scrub && outcome.kind === "structured") outcome = { ...outcome, value: facts.scrub(outcome.value) };
  if (facts.scrub && outcome.kind === "text") outcome = { ...outcome, text: facts.scrub(outcome.text) };
  if (trip?.code === "timeout") {
    return fail(
      new SandboxRunError("timeout", trip.message, {
        ...evidence,
        hint: trip.waitingOnModel
          ? "The model did not answer in time: check that its server runs and is not stuck or overloaded (`sandbox-run doctor --models <file>` checks a custom provider), or raise the timeout (--timeout, timeoutMs, or the policy's limits.timeoutSeconds)."
          : "Raise the timeout (--timeout, timeoutMs, or the policy's limits.timeoutSeconds) or give the agent a smaller task.",
      }),
    );
  }
  if (trip?.code === "invalid-result") {
    return fail(
      new SandboxRunError("invalid-result", trip.message, {
        ...evidence,
        hint: trip.hint ?? invalidResultHint,
      }),
    );
  }
  if (trip) return fail(limitError(trip.message, trip.limit, evidence));
  // Bind mode's init stopped the sandbox before its launcher: a mount below a read-only tree was writable.
  if (exit.exitCode === LAUNCHER_EXIT.writableBelowReadOnly && outcome.kind !== "structured" && outcome.kind !== "text")
    return fail(
      new SandboxRunError(
        "usage",
        `A folder mounted below a read-only tree${writableMountOf(facts.stderrTail)} was writable inside the sandbox, so it was stopped before the run began.`,
        {
          ...evidence,
          hint: "The host binds every mount point it sees below a read-only tree read-only over it; this one it did not see (the engine's mount namespace shows mounts this process's does not, or it was mounted while the run started). Unmount it or move it out of the tree, or use copy mode (--workspace copy). Docker 25 or later on Linux 5.12 or later makes read-only binds read-only all the way down.",
        },
      ),
    );
  const fromExit = limitFromExit(exit, facts.stderrTail);
  if (fromExit) return fail(limitError(fromExit.message, fromExit.limit, evidence));

  if (exit.exitCode !== 0 && outcome.kind !== "structured" && outcome.kind !== "text") {
    return fail(
      new SandboxRunError(
        "agent-crashed",
        `Pi exited with code ${exit.exitCode}${crashReason(exit.exitCode, facts.runtime, facts.pids)}.`,
        {
          ...evidence,
          hint: "See the stderr tail on this error (or --events) for what Pi reported.",
        },
      ),
    );
  }
  switch (outcome.kind) {
    case "text":
      return { ok: true, kind: "text", result: outcome.text };
    case "structured": {
      const checked = (facts.checks ?? facts.validator!).validate(outcome.value);
      if (checked.ok) return { ok: true, kind: "structured", result: checked.value };
      const issues = checked.issues.join("; ");
      return fail(
        new SandboxRunError("validation", `The final result failed host-side schema validation: ${issues}.`, {
          ...evidence,
          // The host checks the value after Pi's coercion, with pi-schema's own formats and multipleOf:
          // what is left is a check only the host makes (review, session 31).
          hint: "Pi accepted a result the schema refuses through a check Pi does not make (a format only the host knows, such as int32 or byte): drop that format, or say in the prompt what the value must be.",
        }),
      );
    }
    case "model-error":
      return fail(
        new SandboxRunError("model-error", `The model provider failed: ${outcome.message}`, {
          ...evidence,
          hint: "Check the model name, the provider's key on the host, and that the provider is reachable from the host (`sandbox-run doctor`).",
        }),
      );
    case "no-result": {
      if (facts.tooLargeRecords) return fail(unreadableResultError(facts.tooLargeRecords, evidence));
      const unreadable = facts.badRecords ? ` (${facts.badRecords} unreadable records)` : "";
      return fail(
        new SandboxRunError("no-result", `The agent finished without a result: ${outcome.reason}${unreadable}.`, {
          ...evidence,
          hint: facts.validator
            ? "Ask for the result explicitly in the prompt, or use a stronger model."
            : "Check the events (--events) to see where the agent stopped.",
        }),
      );
    }
  }
}

function limitError(message: string, limit: string | undefined, evidence: SandboxRunErrorDetails): SandboxRunError {
  return new SandboxRunError("limit", message, { ...evidence, limit, hint: limitHint(limit) });
}

/**
 * Pi's events carry the result: one with more values or levels than a line may hold is dropped
 * whole, and "no assistant message" blamed the model (review, session 31).
 */
function unreadableResultError(lines: number, evidence: SandboxRunErrorDetails): SandboxRunError {
  return new SandboxRunError(
    "no-result",
    `The agent finished without a result the host could read: ${lines} of Pi's event lines held more than ${PI_RECORD_SHAPE.maxValues.toLocaleString("en-US")} values or ${PI_RECORD_SHAPE.maxDepth} levels of nesting, which the host does not read (a result that large or deep makes them).`,
    {
      ...evidence,
      hint: "Ask for a smaller or flatter result (fewer items, less nesting), or have the agent write it to a file in the workspace.",
    },
  );
}

/** " (<path>)" from bind mode's init's line on stderr (no-setuid-filter.ts MOUNT_CHECK), shown safely; "" without one. */
function writableMountOf(stderr: string): string {
  const named = /^sandbox-run: (.*) is mounted writable below a read-only tree; stopped before the run$/m.exec(
    stderr,
  )?.[1];
  return named ? ` (${shownPath(named)})` : "";
}
