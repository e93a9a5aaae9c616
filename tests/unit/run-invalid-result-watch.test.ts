// The cap on invalid final results (issue 17 part 6), judged from the model's replies as the
// gateway relayed them: each final-tool call is prepared as Pi prepares it and validated on the
// host as the result would be; five invalid ones in a row stop the run, other work resets the count.
import { describe, expect, it } from "vitest";
import type { ModelReply } from "../../src/gateway/apis/api-codec.js";
import {
  InvalidResultWatch,
  MAX_CONSECUTIVE_INVALID_RESULTS,
  MAX_FINALS_JUDGED,
} from "../../src/run/invalid-result-watch.js";
import { compileResultSchema } from "../../src/run/result-validator.js";

const FINAL = "sandbox_run_final_result";
const schema = {
  type: "object",
  properties: { verdict: { type: "string", enum: ["approve", "reject"] } },
  required: ["verdict"],
  additionalProperties: false,
};
const validator = () => compileResultSchema(schema);
const watch = () => new InvalidResultWatch({ finalToolName: FINAL, schema, validator: validator() });

function reply(calls: Array<{ name: string; args: string }>): ModelReply {
  return {
    text: "",
    textBlocks: [],
    toolCalls: calls.map((c, i) => ({ id: `call_${i}`, name: c.name, argumentsJson: c.args })),
    complete: true,
  };
}
const final = (args: string) => reply([{ name: FINAL, args }]);

describe("InvalidResultWatch", () => {
  it(`judges at most ${MAX_FINALS_JUDGED} distinct final calls of one reply (review, session 36: a reply of 30 calls, each checked four times)`, () => {
    // Extra properties allowed: every call passes Pi's preparation and reaches the host's validation.
    const open = { type: "object", properties: { verdict: { type: "string" } }, required: ["verdict"] };
    let checks = 0;
    const counted = compileResultSchema(open);
    const validate = counted.validate;
    counted.validate = (value) => {
      checks++;
      return validate(value);
    };
    const w = new InvalidResultWatch({ finalToolName: FINAL, schema: open, validator: counted });
    const calls = Array.from({ length: 30 }, (_, i) => ({ name: FINAL, args: `{"verdict":"ok","n":${i}}` }));
    expect(w.observe(reply(calls))).toEqual({});
    expect(checks).toBe(MAX_FINALS_JUDGED);
    // The same arguments twice are one judgement.
    checks = 0;
    w.observe(reply([0, 0, 0, 1].map((i) => ({ name: FINAL, args: `{"verdict":"ok","n":${i}}` }))));
    expect(checks).toBe(2);
  });

  it(`stops the run at the ${MAX_CONSECUTIVE_INVALID_RESULTS}th invalid final result in a row, naming the last failure`, () => {
    const w = watch();
    for (let i = 1; i < MAX_CONSECUTIVE_INVALID_RESULTS; i++) {
      const seen = w.observe(final(`{"verdict":"maybe ${i}"}`));
      expect(seen.invalid?.consecutive).toBe(i);
      expect(seen.trip).toBeUndefined();
    }
    const last = w.observe(final("{}"));
    expect(last.trip?.code).toBe("invalid-result");
    expect(last.trip?.message).toMatch(/^The model returned 5 invalid final results in a row; the last: .*verdict/);
  });

  it("judges on the host: a value Pi's own check accepts but the schema refuses counts, a coerced valid one does not", () => {
    const strict = new InvalidResultWatch({
      finalToolName: FINAL,
      schema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
      // The host's validator can be stricter than the schema Pi checks (e.g. a format Pi ignores).
      validator: compileResultSchema({ type: "object", properties: { n: { type: "number", maximum: 10 } } }),
    });
    expect(strict.observe(final('{"n": 99}')).invalid?.reason).toMatch(/n/);
    // Pi coerces "3" to 3: valid, so the count starts again.
    expect(strict.observe(final('{"n": "3"}'))).toEqual({});
    expect(strict.observe(final("not json at all")).invalid).toMatchObject({ consecutive: 1 });
  });

  it("other work in between (another tool, text only) starts the count again; a valid result among several calls is no failure", () => {
    const w = watch();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < MAX_CONSECUTIVE_INVALID_RESULTS - 1; i++) expect(w.observe(final("{}")).trip).toBeUndefined();
      expect(w.observe(reply([{ name: "bash", args: '{"command":"ls"}' }]))).toEqual({});
    }
    for (let i = 0; i < MAX_CONSECUTIVE_INVALID_RESULTS - 1; i++) w.observe(final("{}"));
    expect(w.observe(reply([]))).toEqual({});
    const mixed = reply([
      { name: FINAL, args: "{}" },
      { name: FINAL, args: '{"verdict":"approve"}' },
    ]);
    expect(w.observe(mixed)).toEqual({});
  });

  it("keeps a long reason to one line of at most 400 characters", () => {
    const w = new InvalidResultWatch({ finalToolName: FINAL, schema, validator: validator() }, 1);
    const seen = w.observe(final(`{"verdict":"${"x\\n".repeat(500)}"}`));
    expect(seen.trip).toBeDefined();
    expect(seen.invalid!.reason.length).toBeLessThanOrEqual(400);
    expect(seen.invalid!.reason).not.toMatch(/\n/);
  });

  it("a result whose string a schema pattern cannot check in time stops the run at once, since Pi checks it unbounded in the sandbox (review, session 31)", () => {
    const redos = {
      type: "object",
      properties: { v: { type: "string", pattern: "^(a|a)*$" } },
      required: ["v"],
    };
    const w = new InvalidResultWatch({ finalToolName: FINAL, schema: redos, validator: compileResultSchema(redos) });
    const first = w.observe(final(JSON.stringify({ v: `${"a".repeat(40)}!` })));
    expect(first.trip?.code).toBe("invalid-result");
    expect(first.trip?.message).toMatch(
      /^The model's final result cannot be checked: .*pattern "\^\(a\|a\)\*\$" did not finish within 1 s/,
    );
    expect(first.trip?.hint).toMatch(/no time bound, so the run was stopped/);
    // A plainly invalid string is only counted, as before.
    const other = new InvalidResultWatch({
      finalToolName: FINAL,
      schema: redos,
      validator: compileResultSchema(redos),
    });
    expect(other.observe(final(JSON.stringify({ v: "b" }))).trip).toBeUndefined();
  }, 30_000);
});
