// A schema's uniqueItems over objects costs the host's validators a comparison of every pair, on the
// controller's main thread (review, session 31: 20,000 objects, 13-16 s a check, three checks per
// result). Such a value is refused before they run, and the invalid-result watch stops the run at once.
import { describe, expect, it } from "vitest";
import type { ModelReply } from "../../src/gateway/apis/api-codec.js";
import { prepareGuarded } from "../../src/run/guarded-arguments.js";
import { InvalidResultWatch } from "../../src/run/invalid-result-watch.js";
import { compileResultSchema } from "../../src/run/result-validator.js";
import { MAX_UNIQUE_ITEMS, uniqueItemsProblem } from "../../src/run/unique-items-guard.js";

const FINAL = "sandbox_run_final_result";
const schema = {
  type: "object",
  properties: { rows: { type: "array", uniqueItems: true, items: { type: "object" } } },
  required: ["rows"],
};
const rows = (n: number) => ({ rows: Array.from({ length: n }, (_, i) => ({ id: i })) });

function finalReply(args: unknown): ModelReply {
  return {
    text: "",
    textBlocks: [],
    toolCalls: [{ id: "call_0", name: FINAL, argumentsJson: JSON.stringify(args) }],
    complete: true,
  };
}

describe("uniqueItems over large arrays of objects", () => {
  it("is refused before any validator runs, in a fraction of a second, naming the bound", () => {
    const started = performance.now();
    const prepared = prepareGuarded(schema, JSON.stringify(rows(20_000)));
    const ms = performance.now() - started;
    expect(prepared).toEqual({
      ok: false,
      reason: `validation failed: an array of 20000 items, in a result whose schema uses uniqueItems: at most ${MAX_UNIQUE_ITEMS} items an array can be checked (the validators compare every pair)`,
      uncheckable: "unique-items",
    });
    // Pi's and Ajv's checks took 13-16 s each on this value.
    expect(ms).toBeLessThan(3_000);
  });

  it("the host's final validation refuses it too, before Ajv compares the pairs", () => {
    const started = performance.now();
    const checked = compileResultSchema(schema).validate(rows(20_000));
    expect(checked).toEqual({ ok: false, issues: [expect.stringMatching(/^an array of 20000 items/)] });
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(compileResultSchema(schema).validate(rows(10))).toMatchObject({ ok: true });
  });

  it("stops the run at once through the invalid-result watch, with a hint to ask for fewer items", () => {
    const watch = new InvalidResultWatch({ finalToolName: FINAL, schema, validator: compileResultSchema(schema) });
    const seen = watch.observe(finalReply(rows(MAX_UNIQUE_ITEMS + 1)));
    expect(seen.trip?.code).toBe("invalid-result");
    expect(seen.trip?.message).toMatch(/^The model's final result cannot be checked: .*uniqueItems/);
    expect(seen.trip?.hint).toMatch(/fewer items/);
  });

  it("counts strings and numbers too (pi-schema compares every pair of them: 100,000 strings took 21.5 s), and leaves alone what stays under the bound or has no uniqueItems", () => {
    expect(prepareGuarded(schema, JSON.stringify(rows(MAX_UNIQUE_ITEMS)))).toMatchObject({ ok: true });
    const strings = {
      type: "object",
      properties: { tags: { type: "array", items: { type: "string" }, uniqueItems: true } },
    };
    const tags = { tags: Array.from({ length: 100_000 }, (_, i) => `tag-${i}`) };
    const started = performance.now();
    expect(prepareGuarded(strings, JSON.stringify(tags))).toMatchObject({ ok: false, uncheckable: "unique-items" });
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(uniqueItemsProblem({ type: "object" }, rows(50_000))).toBeUndefined();
    // Found wherever the schema says it (here under $defs), and an array nested anywhere in the value.
    const nested = { $defs: { r: { type: "array", uniqueItems: true } }, type: "object" };
    expect(uniqueItemsProblem(nested, { a: { b: rows(3_000).rows } })).toMatch(/an array of 3000 items/);
    expect(uniqueItemsProblem(nested, { a: { b: [[...Array(2_500).keys()]] } })).toMatch(/an array of 2500 items/);
  });
});
