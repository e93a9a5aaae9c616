// The failure contract as a pure decision: every way a run can end, in the order the host judges
// them (aborted > timeout > invalid results > tripped limit > limit shown by the exit > crash > result),
// without an engine.
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { decideOutcome, type OutcomeFacts } from "../../src/run/decide-outcome.js";
import { compileResultSchema } from "../../src/run/result-validator.js";
import { timeoutMessage } from "../../src/run/supervise-run.js";

const evidence = { runId: "r1", containerId: "c1", exitCode: 0 };
const validator = compileResultSchema({
  type: "object",
  properties: { verdict: { enum: ["approve", "reject"] } },
  required: ["verdict"],
});

function facts(overrides: Partial<OutcomeFacts> = {}): OutcomeFacts {
  return {
    exit: { exitCode: 0, oomKilled: false },
    stderrTail: "",
    outcome: { kind: "text", text: "done" },
    badRecords: 0,
    runtime: "runc",
    ...overrides,
  };
}

function errorOf(f: OutcomeFacts): SandboxRunError {
  const decision = decideOutcome(f, evidence);
  if (decision.ok) throw new Error(`expected a failure, got ${JSON.stringify(decision)}`);
  if (!isSandboxRunError(decision.error)) throw new Error(`not a SandboxRunError: ${String(decision.error)}`);
  return decision.error;
}

describe("decideOutcome", () => {
  it("returns the text of a text run", () => {
    expect(decideOutcome(facts(), evidence)).toEqual({ ok: true, kind: "text", result: "done" });
  });

  it("returns the host-validated object of a schema run, and refuses one the schema does not allow", () => {
    const ok = decideOutcome(
      facts({ validator, outcome: { kind: "structured", value: { verdict: "reject" }, claims: [] } }),
      evidence,
    );
    expect(ok).toEqual({ ok: true, kind: "structured", result: { verdict: "reject" } });
    const bad = errorOf(facts({ validator, outcome: { kind: "structured", value: { verdict: "LGTM" }, claims: [] } }));
    expect(bad.code).toBe("validation");
    expect(bad.shortMessage).toMatch(/^The final result failed host-side schema validation: verdict: /);
    expect(bad.runId).toBe("r1");
  });

  it("validates the result with the run's credentials taken out, so what passed the schema is what is returned (review)", () => {
    const keyed = compileResultSchema({
      type: "object",
      properties: { token: { type: "string", pattern: "^sk-" } },
      required: ["token"],
    });
    const scrub = <T>(value: T): T => JSON.parse(JSON.stringify(value).replaceAll("sk-REAL", "<removed>")) as T;
    const structured = { kind: "structured" as const, value: { token: "sk-REAL" }, claims: [] };
    expect(errorOf(facts({ validator: keyed, scrub, outcome: structured })).code).toBe("validation");
    expect(decideOutcome(facts({ validator: keyed, outcome: structured }), evidence)).toMatchObject({ ok: true });
    expect(decideOutcome(facts({ scrub, outcome: { kind: "text", text: "key sk-REAL" } }), evidence)).toEqual({
      ok: true,
      kind: "text",
      result: "key <removed>",
    });
  });

  it("an abort wins over everything: a SandboxRunError (code aborted) with the caller's reason as its cause", () => {
    const reason = new Error("caller's reason");
    const error = errorOf(
      facts({
        trip: { code: "aborted", message: "The run was aborted." },
        abortReason: reason,
        exit: { exitCode: 137, oomKilled: true },
      }),
    );
    expect(error.code).toBe("aborted");
    expect(error.isCanceled).toBe(true);
    expect(error.cause).toBe(reason);
    expect(error.shortMessage).toBe("The run was aborted: caller's reason.");
    expect(error.hint).toBeTruthy();
    expect(error.runId).toBe("r1");
    // AbortSignal.timeout()'s reason and a plain abort() say what happened without DOMException's wording.
    const timeoutReason = new DOMException("The operation was aborted due to timeout", "TimeoutError");
    const timedOut = errorOf(facts({ trip: { code: "aborted", message: "" }, abortReason: timeoutReason }));
    expect(timedOut.shortMessage).toBe("The run was aborted: its AbortSignal timed out.");
    const controller = new AbortController();
    controller.abort();
    const plain = errorOf(facts({ trip: { code: "aborted", message: "" }, abortReason: controller.signal.reason }));
    expect(plain.shortMessage).toBe("The run was aborted.");
  });

  it("a timeout while a model request was open says the run was waiting for the model, and what to check", () => {
    const message = timeoutMessage(30_000, { requests: 1, upstream: "http://127.0.0.1:11434", forMs: 28_437 });
    expect(message).toBe(
      "The run did not finish within 30 s: it was waiting for the model's reply (a request to http://127.0.0.1:11434 open for 28.4 s).",
    );
    const error = errorOf(facts({ trip: { code: "timeout", message, waitingOnModel: true } }));
    expect(error.code).toBe("timeout");
    expect(error.shortMessage).toBe(message);
    expect(error.hint).toMatch(/The model did not answer in time/);
    // Without an open request: the plain message and the plain hint.
    expect(timeoutMessage(5_000, undefined)).toBe("The run did not finish within 5 s.");
    // Below a second, in ms (review, session 34: "within 0 s").
    expect(timeoutMessage(1, undefined)).toBe("The run did not finish within 1 ms.");
    expect(timeoutMessage(500, { requests: 2, upstream: "u", forMs: 400 })).toBe(
      "The run did not finish within 500 ms: it was waiting for the model's reply (a request to u open for 400 ms (and 1 more)).",
    );
    expect(errorOf(facts({ trip: { code: "timeout", message: "x" } })).hint).toMatch(/^Raise the timeout/);
  });

  it("a timeout beats a limit the exit shows, and says how to raise it", () => {
    const error = errorOf(
      facts({
        trip: { code: "timeout", message: "The run did not finish within 5 s." },
        exit: { exitCode: 137, oomKilled: true },
      }),
    );
    expect(error.code).toBe("timeout");
    expect(error.hint).toBe(
      "Raise the timeout (--timeout, timeoutMs, or the policy's limits.timeoutSeconds) or give the agent a smaller task.",
    );
  });

  it("invalid results in a row are invalid-result, naming the last failure, over a limit the exit shows or a result", () => {
    const message =
      "The model returned 5 invalid final results in a row; the last: must have required property 'verdict'.";
    const error = errorOf(
      facts({
        trip: { code: "invalid-result", message },
        exit: { exitCode: 137, oomKilled: true },
        validator,
        outcome: { kind: "structured", value: { verdict: "approve" }, claims: [] },
      }),
    );
    expect(error.code).toBe("invalid-result");
    expect(error.shortMessage).toBe(message);
    expect(error.hint).toMatch(/schema asks for what the prompt asks for/);
    expect(error.runId).toBe("r1");
    // A trip with its own hint (a pattern that cannot be checked in time) keeps it.
    const stalled = errorOf(facts({ trip: { code: "invalid-result", message, hint: "Rewrite the pattern." } }));
    expect(stalled.hint).toBe("Rewrite the pattern.");
    // A timeout still wins: it is the trip that fired first.
    const timeout = errorOf(facts({ trip: { code: "timeout", message: "late" } }));
    expect(timeout.code).toBe("timeout");
  });

  it("a tripped limit names the limit and its policy field", () => {
    const error = errorOf(facts({ trip: { code: "limit", limit: "disk", message: "too much" } }));
    expect(error.code).toBe("limit");
    expect(error.limit).toBe("disk");
    expect(error.hint).toBe(
      "Raise limits.diskMb in a policy file, or keep what the task writes to the workspace smaller.",
    );
  });

  it.each([
    [{ exitCode: 137, oomKilled: true }, "", "memory"],
    [{ exitCode: 1, oomKilled: false }, "Error: ENOSPC: no space left on device, write", "tmpfs"],
    [{ exitCode: 1, oomKilled: false }, "bash: fork: retry: Resource temporarily unavailable", "pids"],
    [{ exitCode: 153, oomKilled: false }, "File too large", "disk"],
  ])("reads a limit from the exit %j and stderr %j: %s", (exit, stderrTail, limit) => {
    expect(errorOf(facts({ exit, stderrTail, outcome: { kind: "no-result", reason: "x" } })).limit).toBe(limit);
  });

  it("a crash without a result is agent-crashed, with the launcher's and gVisor's codes explained", () => {
    const noResult = { kind: "no-result", reason: "none" } as const;
    expect(errorOf(facts({ exit: { exitCode: 90, oomKilled: false }, outcome: noResult })).shortMessage).toBe(
      "Pi exited with code 90 (the launcher could not prepare the sandbox).",
    );
    expect(errorOf(facts({ exit: { exitCode: 91, oomKilled: false }, outcome: noResult })).shortMessage).toBe(
      "Pi exited with code 91 (the sandbox lost its connection to the host controller).",
    );
    const gvisor = errorOf(
      facts({ exit: { exitCode: 2, oomKilled: false }, outcome: noResult, runtime: "runsc", pids: 512 }),
    );
    expect(gvisor.code).toBe("agent-crashed");
    expect(gvisor.shortMessage).toMatch(/gVisor's sandbox kernel failed/);
    // The run's own limit, not a threshold it may already be above (session 29).
    expect(gvisor.shortMessage).toMatch(/against limits\.pids \(512\) ten times over plus 256/);
    expect(gvisor.shortMessage).not.toMatch(/below the built-in/);
  });

  it("a result that arrived before a non-zero exit still counts", () => {
    expect(decideOutcome(facts({ exit: { exitCode: 1, oomKilled: false } }), evidence)).toMatchObject({ ok: true });
  });

  it("model errors and missing results say what to check", () => {
    const model = errorOf(facts({ outcome: { kind: "model-error", message: "401 invalid key" } }));
    expect(model.code).toBe("model-error");
    expect(model.shortMessage).toBe("The model provider failed: 401 invalid key");
    const none = errorOf(facts({ validator, outcome: { kind: "no-result", reason: "no final call" }, badRecords: 3 }));
    expect(none.code).toBe("no-result");
    expect(none.shortMessage).toBe("The agent finished without a result: no final call (3 unreadable records).");
    expect(none.hint).toBe("Ask for the result explicitly in the prompt, or use a stronger model.");
    // Pi's events carried a result with more structure than the host reads: said so, not blamed on the model.
    const large = errorOf(
      facts({
        validator,
        outcome: { kind: "no-result", reason: "no assistant message" },
        badRecords: 8,
        tooLargeRecords: 8,
      }),
    );
    expect(large.code).toBe("no-result");
    expect(large.shortMessage).toBe(
      "The agent finished without a result the host could read: 8 of Pi's event lines held more than 200,000 values or 128 levels of nesting, which the host does not read (a result that large or deep makes them).",
    );
    expect(large.hint).toMatch(/smaller or flatter result/);
  });
});
