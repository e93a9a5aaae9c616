// The host's checks of a run's results run in a worker thread with a deadline and a memory cap
// (validate-in-worker.ts, docs/security.md E3). A schema from the repository under review can make
// Ajv's and pi-schema's checks take time that doubles with each level of the value, or fill the heap
// (review, session 35: the CLI's 20 s timeout fired at 66 s; "JavaScript heap out of memory"): the
// check is stopped, the run fails with invalid-result, and the main thread's timers keep firing.
import { afterEach, describe, expect, it } from "vitest";
import type { JsonSchema } from "../../src/agent.js";
import type { ModelReply } from "../../src/gateway/apis/api-codec.js";
import type { Outcome } from "../../src/pi/result-collector.js";
import type { ModelEvidence } from "../../src/run/confirm-outcome.js";
import { decideOutcome } from "../../src/run/decide-outcome.js";
import { prepareGuarded } from "../../src/run/guarded-arguments.js";
import { InvalidResultWatch } from "../../src/run/invalid-result-watch.js";
import {
  checkPiAcceptsSchema,
  compileResultSchema,
  plainSchema,
  type ResultValidator,
} from "../../src/run/result-validator.js";
import { decideInWorker, ResultCheckWorker } from "../../src/run/validate-in-worker.js";

const FINAL = "sandbox_run_final_result";

/**
 * k levels, each an anyOf whose first branch descends through $ref and then fails on required
 * ["x1"] (with `both`, the second too, on ["x2"]), and whose second branch descends (and succeeds).
 */
function exponentialSchema(k: number, both = false): JsonSchema {
  const defs: Record<string, unknown> = { d0: { type: both ? "string" : "integer" } };
  const down = (i: number) => ({ type: "object", properties: { a: { $ref: `#/$defs/d${i - 1}` } } });
  for (let i = 1; i <= k; i++)
    defs[`d${i}`] = {
      anyOf: [{ allOf: [down(i), { required: ["x1"] }] }, both ? { allOf: [down(i), { required: ["x2"] }] } : down(i)],
    };
  return { type: "object", $defs: defs, properties: { v: { $ref: `#/$defs/d${k}` } } };
}

function nested(k: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < k; i++) value = { a: value };
  return { v: value };
}

const final = (args: string): ModelReply => ({
  text: "",
  textBlocks: [],
  toolCalls: [{ id: "call_1", name: FINAL, argumentsJson: args }],
  complete: true,
});

/** Counts a 50 ms timer's firings on this thread while `work` runs. */
async function whileTicking<T>(work: () => Promise<T>): Promise<{ result: T; ticks: number; ms: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 50);
  const started = Date.now();
  try {
    const result = await work();
    return { result, ticks, ms: Date.now() - started };
  } finally {
    clearInterval(timer);
  }
}

const opened: Array<{ close(): Promise<void> }> = [];
/** The run's validator with its check worker. */
function validatorFor(schema: JsonSchema): ResultValidator {
  const validator = compileResultSchema(schema);
  opened.push(validator.worker);
  return validator;
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((w) => w.close()));
});

describe("the host's result checks run in a worker with a deadline (review, session 35)", () => {
  it("a plain schema's checks of small values stay on this thread (no worker to start); any other schema's go to the worker (sessions 35 and 36)", () => {
    const plain: JsonSchema = {
      type: "object",
      properties: {
        ok: { type: "boolean" },
        summary: { type: "string", maxLength: 2000, description: "what was done" },
        verdict: { enum: ["approve", "reject", null] },
        files: { type: "array", items: { type: "string", format: "uri-reference" }, maxItems: 50 },
      },
      required: ["ok"],
      additionalProperties: false,
    };
    expect(plainSchema(plain)).toBe(true);
    expect(compileResultSchema(plain).worker.needsWorker).toBe(false);
    const notPlain: Record<string, JsonSchema> = {
      references: exponentialSchema(2),
      dynamicRef: { type: "object", properties: { a: { $dynamicRef: "#x" } } },
      large: {
        type: "object",
        properties: Object.fromEntries(
          Array.from({ length: 100 }, (_, i) => [`field${i}`, { type: "string", description: "x".repeat(20) }]),
        ),
      },
      anyOf: { type: "object", properties: { a: { anyOf: [{ type: "string" }, { type: "number" }] } } },
      uniqueItems: { type: "object", properties: { list: { type: "array", uniqueItems: true } } },
      pattern: { type: "object", properties: { s: { type: "string", pattern: "^(\\w+\\s?)*$" } } },
      longEnum: { type: "object", properties: { c: { enum: Array.from({ length: 33 }, (_, i) => `c${i}`) } } },
      objectEnum: { type: "object", properties: { c: { enum: [{ a: 1 }] } } },
      regexFormat: { type: "object", properties: { r: { type: "string", format: "regex" } } },
      notListed: { type: "object", if: { required: ["a"] }, else: { required: ["b"] } },
    };
    for (const [name, schema] of Object.entries(notPlain)) {
      expect(plainSchema(schema), name).toBe(false);
      expect(compileResultSchema(schema).worker.needsWorker, name).toBe(true);
    }
  });

  it("uniqueItems over large items is checked in the worker, bounded, while this thread's timers keep firing (review, session 36: 70 s stalled, the run's 20 s timeout late)", async () => {
    const schema: JsonSchema = { type: "object", properties: { list: { type: "array", uniqueItems: true } } };
    await checkPiAcceptsSchema(schema);
    const validator = compileResultSchema(schema);
    opened.push(validator.worker);
    const item = (i: number) => Object.fromEntries(Array.from({ length: 90 }, (_, k) => [`k${k}`, k === 89 ? i : k]));
    const call = (n: number) => JSON.stringify({ list: Array.from({ length: 2000 }, (_, i) => item(i + n)) });
    const watch = new InvalidResultWatch({ finalToolName: FINAL, schema, validator });
    const reply: ModelReply = {
      text: "",
      textBlocks: [],
      toolCalls: [0, 1, 2, 3].map((n) => ({ id: `call_${n}`, name: FINAL, argumentsJson: call(n) })),
      complete: true,
    };
    const { result, ticks, ms } = await whileTicking(() => watch.observeInWorker(reply));
    // Either verdict is the host's (checked in time, or refused as uncheckable), never a stalled thread.
    expect(ticks).toBeGreaterThanOrEqual(Math.floor(ms / 50 / 4));
    expect(ms).toBeLessThan(25_000);
    if (result.trip) expect(result.trip.code).toBe("invalid-result");
  }, 60_000);

  it("a plain schema's invalid small value goes to the worker: telling its every error stalled this thread (review of session 36's fixes: 720 required names ran the controller out of heap)", async () => {
    const names = Array.from({ length: 50 }, (_, i) => `field_${i}`);
    const schema: JsonSchema = {
      type: "object",
      properties: { list: { type: "array", items: { type: "object", required: names } } },
    };
    expect(plainSchema(schema)).toBe(true);
    const validator = compileResultSchema(schema);
    opened.push(validator.worker);
    const argumentsJson = JSON.stringify({ list: Array.from({ length: 10_000 }, () => ({})) });
    expect(argumentsJson.length).toBeLessThanOrEqual(64 * 1024);
    const { result, ticks, ms } = await whileTicking(async () => [
      await validator.worker.prepare(schema, argumentsJson),
      await validator.worker.validate(JSON.parse(argumentsJson)),
    ]);
    expect(ticks).toBeGreaterThanOrEqual(Math.floor(ms / 50 / 4));
    for (const answer of result) expect(answer.ok).toBe(false);
    // A valid one is answered on this thread, as before.
    const valid = { list: [Object.fromEntries(names.map((n) => [n, 1]))] };
    expect(await validator.worker.validate(valid)).toEqual({ ok: true, value: valid });
  }, 60_000);

  it("a value nested past what the worker can be handed is uncheckable, not a crash of the controller (review of session 36's fixes: 3,000 arrays deep, 6 KB, killed the CLI)", async () => {
    const schema: JsonSchema = { type: "object", properties: { verdict: { type: "string" } } };
    const worker = new ResultCheckWorker(schema);
    opened.push(worker);
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const answer = await worker.validate({ verdict: "approve", extra: deep });
    expect(answer).toMatchObject({ ok: false, uncheckable: "bounds" });
    // The worker still answers the next check.
    expect(await worker.validate({ verdict: "approve" })).toMatchObject({ ok: true });
  }, 60_000);

  it("a run's checks have a time budget in all: past it, the next check is uncheckable at once (review, session 36: 30 calls of 3 s each)", async () => {
    const schema = exponentialSchema(30);
    const worker = new ResultCheckWorker(schema, { timeMs: 60_000, runTimeMs: 1_000 });
    opened.push(worker);
    const first = await worker.validate(nested(30));
    expect(first).toMatchObject({ ok: false, uncheckable: "bounds", reason: expect.stringContaining("in all") });
    const started = Date.now();
    const next = await worker.validate(nested(29));
    expect(next).toMatchObject({ ok: false, uncheckable: "bounds", reason: expect.stringContaining("in all") });
    expect(Date.now() - started).toBeLessThan(500);
  }, 60_000);

  it("an exponential schema (30 levels) is refused by the invalid-result watch within seconds, while this thread's timers keep firing", async () => {
    const schema = exponentialSchema(30);
    await checkPiAcceptsSchema(schema);
    const watch = new InvalidResultWatch({ finalToolName: FINAL, schema, validator: validatorFor(schema) });
    const { result, ticks, ms } = await whileTicking(() => watch.observeInWorker(final(JSON.stringify(nested(30)))));
    expect(result.trip?.code).toBe("invalid-result");
    expect(result.trip?.message).toMatch(
      /^The model's final result cannot be checked: the host's check of it against the schema did not finish within 5 s, so it cannot be checked in bounded time\.$/,
    );
    expect(result.trip?.hint).toMatch(/write a simpler schema, or use a schema from a place you trust/);
    expect(ms).toBeLessThan(20_000);
    // Started, then 5 s of checking: the timer fired all along (not once, at the end).
    expect(ticks).toBeGreaterThan(40);
  }, 60_000);

  it("the final result's check (decideOutcome, as the run settles) fails the run with invalid-result, the timers firing", async () => {
    const schema = exponentialSchema(30);
    await checkPiAcceptsSchema(schema);
    const validator = validatorFor(schema);
    const argumentsJson = JSON.stringify(nested(30));
    const evidence: ModelEvidence = {
      toolCall: (id) => (id === "call_1" ? { name: FINAL, argumentsJson, seq: 1, index: 0 } : undefined),
      callsOf: () => [{ name: FINAL, argumentsJson, seq: 1, index: 0 }],
      lastReply: () => ({ text: "", toolCallCount: 1, complete: true }),
      failureSinceLastReply: () => undefined,
    };
    const outcome: Outcome = {
      kind: "structured",
      value: nested(30),
      claims: [{ callId: "call_1", value: nested(30) }],
    };
    const facts = {
      exit: { exitCode: 0, oomKilled: false },
      stderrTail: "",
      outcome,
      badRecords: 0,
      runtime: "runc",
      validator,
      schema,
      finalToolName: FINAL,
      evidence,
    };
    const { result, ticks, ms } = await whileTicking(() =>
      decideInWorker(validator.worker, (checks) => decideOutcome({ ...facts, checks }, { runId: "r" }), { runId: "r" }),
    );
    expect(result.ok).toBe(false);
    const error = (result as { error: { code: string; shortMessage: string; hint?: string; runId?: string } }).error;
    expect(error.code).toBe("invalid-result");
    expect(error.shortMessage).toMatch(/^The model's final result cannot be checked: .*did not finish within 5 s/);
    expect(error.hint).toMatch(/simpler schema/);
    expect(error.runId).toBe("r");
    expect(ms).toBeLessThan(20_000);
    expect(ticks).toBeGreaterThan(40);
  }, 60_000);

  it("an invalid value whose errors fill the heap is a failure, not a crashed process; the next check works", async () => {
    const schema = exponentialSchema(22, true);
    // Ajv's allErrors collection of 2^22 paths' errors: on the main thread, "JavaScript heap out of memory".
    const bounded = new ResultCheckWorker(schema, { memoryMb: 32, timeMs: 120_000 });
    opened.push(bounded);
    const { result, ticks } = await whileTicking(() => bounded.validate(nested(22)));
    expect(result).toEqual({
      ok: false,
      reason:
        "the host's check of it against the schema needed more than 32 MB of memory, so it cannot be checked in bounded memory",
      uncheckable: "bounds",
    });
    expect(ticks).toBeGreaterThan(0);
    // A new worker for the next check.
    expect(await bounded.validate({ v: "x" })).toMatchObject({ ok: false, issues: expect.any(Array) });
    // With the run's own bounds, the same value is refused too (by the deadline or the memory cap).
    const validator = validatorFor(schema);
    const refused = await validator.worker.validate(nested(22));
    expect(refused).toMatchObject({ ok: false, uncheckable: "bounds" });
  }, 120_000);

  it("gives the answers of the main thread's checks for ordinary schemas and values", async () => {
    const schema: JsonSchema = {
      type: "object",
      properties: {
        verdict: { type: "string", enum: ["approve", "reject"] },
        count: { type: "integer", minimum: 0 },
        email: { type: "string", format: "email" },
        price: { type: "number", multipleOf: 0.01 },
        tags: { type: "array", items: { type: "string", pattern: "^[a-z]+$" }, uniqueItems: true },
      },
      required: ["verdict"],
      additionalProperties: false,
    };
    await checkPiAcceptsSchema(schema);
    const validator = validatorFor(schema);
    const calls = [
      '{"verdict":"approve"}',
      '{"verdict":"reject","count":"3"}',
      '{"verdict":"maybe"}',
      '{"verdict":"approve","email":"nope","price":19.99}',
      '{"verdict":"approve","tags":["a","a"]}',
      '{"verdict":"approve","tags":["A1"],"extra":1}',
      "{}",
      "not json",
      "[1]",
    ];
    for (const json of calls) {
      expect(await validator.worker.prepare(schema, json)).toEqual(prepareGuarded(schema, json));
      let value: unknown;
      try {
        value = JSON.parse(json);
      } catch {
        value = json;
      }
      const answer = await validator.worker.validate(value);
      expect(answer).toEqual(validator.validate(value));
      // A valid value comes back as given.
      if (answer.ok) expect(answer.value).toBe(value);
    }
    // The watch's verdicts, in order, as observe's.
    const inWorker = new InvalidResultWatch({ finalToolName: FINAL, schema, validator }, 3);
    const here = new InvalidResultWatch({ finalToolName: FINAL, schema, validator }, 3);
    const replies = ["{}", '{"verdict":"x"}', '{"verdict":"approve"}', "{}", "{}", "{}"].map(final);
    const verdicts = await Promise.all(replies.map((r) => inWorker.observeInWorker(r)));
    expect(verdicts).toEqual(replies.map((r) => here.observe(r)));
  }, 60_000);

  it("close() ends the worker at the run's end: a check still running is answered at once and trips nothing", async () => {
    const schema = exponentialSchema(34);
    const validator = validatorFor(schema);
    const watch = new InvalidResultWatch({ finalToolName: FINAL, schema, validator });
    // Started: an ordinary check answers.
    expect(await validator.worker.validate({ v: 1 })).toMatchObject({ ok: false });
    const judging = watch.observeInWorker(final(JSON.stringify(nested(34))));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    await validator.worker.close();
    expect(await judging).toEqual({});
    expect(Date.now() - started).toBeLessThan(2_000);
    await validator.worker.idle();
  }, 30_000);
});
