// The host-side result check (Ajv, draft 2020-12 with formats) in Pi's dialect: every keyword a
// JSON Schema validator knows works (the zod translation it replaces refused if/then/else and
// dependentRequired), nothing is coerced, and a schema that cannot be used is a usage error that
// says why, before anything starts.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { checkPiAcceptsSchema, compileResultSchema } from "../../src/run/result-validator.js";

function usageErrorOf(run: () => unknown): SandboxRunError {
  try {
    run();
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error("expected a usage error");
}

describe("compileResultSchema", () => {
  it("reads a value's own properties only: `constructor`, `toString`, `valueOf` are not Object.prototype's (review, session 36: `{name}` refused for constructor: must be string)", () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string" }, constructor: { type: "string" }, toString: { type: "string" } },
      dependentRequired: { valueOf: ["x"] },
    };
    const validator = compileResultSchema(schema);
    expect(validator.validate({ name: "Widget" })).toEqual({ ok: true, value: { name: "Widget" } });
    expect(validator.validate({}).ok).toBe(true);
    expect(validator.validate({ constructor: 1 }).ok).toBe(false);
    // Required own properties only: an inherited toString does not satisfy it.
    expect(compileResultSchema({ type: "object", required: ["toString"] }).validate({}).ok).toBe(false);
  });

  it("if/then/else: a rejection needs a reason, an approval does not", () => {
    const validator = compileResultSchema({
      type: "object",
      properties: { verdict: { enum: ["approve", "reject"] }, reason: { type: "string" } },
      required: ["verdict"],
      if: { properties: { verdict: { const: "reject" } } },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema's own keyword.
      then: { required: ["reason"] },
      else: { not: { required: ["reason"] } },
    });
    expect(validator.validate({ verdict: "approve" })).toEqual({ ok: true, value: { verdict: "approve" } });
    expect(validator.validate({ verdict: "reject", reason: "tests fail" }).ok).toBe(true);
    const missing = validator.validate({ verdict: "reject" });
    expect(missing).toEqual({ ok: false, issues: expect.arrayContaining(["reason: is required"]) });
    expect(validator.validate({ verdict: "approve", reason: "why not" }).ok).toBe(false);
  });

  it("dependentRequired, unevaluatedProperties, $defs with $ref, prefixItems and formats", () => {
    const validator = compileResultSchema({
      type: "object",
      $defs: { email: { type: "string", format: "email" } },
      properties: {
        card: { type: "string" },
        billing: { type: "string" },
        contact: { $ref: "#/$defs/email" },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], items: false },
      },
      dependentRequired: { card: ["billing"] },
      unevaluatedProperties: false,
    });
    expect(validator.validate({ card: "4111", billing: "Main St", contact: "a@example.com", pair: ["x", 1] }).ok).toBe(
      true,
    );
    expect(validator.validate({ card: "4111" })).toEqual({
      ok: false,
      issues: ["billing: is required when card is present"],
    });
    // pi-schema's email check, as Pi's: `ops@localhost` is an address (ajv-formats' was not: review,
    // session 31), an address without an @ is not.
    expect(validator.validate({ contact: "ops@localhost" }).ok).toBe(true);
    expect(validator.validate({ contact: "ops.example.com" })).toEqual({
      ok: false,
      issues: ['contact: must match format "email"'],
    });
    expect(validator.validate({ pair: ["x", 1, 2] }).ok).toBe(false);
    expect(validator.validate({ extra: 1 }).ok).toBe(false);
  });

  it("names a format it does not know (a typo would check nothing), and checks draft 2020-12's IRI and IDN formats (review, session 27)", () => {
    const typo = compileResultSchema({
      type: "object",
      properties: { e: { type: "string", format: "emial" }, c: { type: "string", format: "cuid" } },
    });
    expect(typo.uncheckedFormats).toEqual(["emial", "cuid"]);
    expect(typo.validate({ e: "anything", c: "x" }).ok).toBe(true);
    expect(
      compileResultSchema({ type: "object", properties: { d: { type: "string", format: "date-time" } } })
        .uncheckedFormats,
    ).toEqual([]);
    const v = compileResultSchema({
      type: "object",
      properties: { e: { type: "string", format: "idn-email" }, i: { type: "string", format: "iri" } },
    });
    expect(v.uncheckedFormats).toEqual([]);
    expect(v.validate({ e: "nope" }).ok).toBe(false);
    expect(v.validate({ i: "not an iri" }).ok).toBe(false);
    expect(v.validate({ e: "ü@bücher.de", i: "https://bücher.de/x" }).ok).toBe(true);
  });

  it("checks the value as it is: no coercion, no defaults, the value returned unchanged", () => {
    const validator = compileResultSchema({
      type: "object",
      properties: { n: { type: "integer", default: 3 }, tags: { type: "array", items: { type: "string" } } },
    });
    expect(validator.validate({ n: "42" })).toEqual({ ok: false, issues: ["n: must be integer"] });
    expect(validator.validate({ tags: "x" })).toEqual({ ok: false, issues: ["tags: must be array"] });
    const value = { tags: ["x"] };
    const checked = validator.validate(value);
    expect(checked).toEqual({ ok: true, value });
    expect(checked.ok && checked.value).toBe(value);
  });

  it("reads every schema as draft 2020-12, like Pi: a $schema naming draft-07 is set aside, unknown keywords are annotations", () => {
    const validator = compileResultSchema({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { a: { type: "string", "x-order": 1, example: "abc" } },
      required: ["a"],
    });
    expect(validator.validate({ a: "x" }).ok).toBe(true);
    expect(validator.validate({}).ok).toBe(false);
  });

  it.each([
    [
      "an items array (draft-07 tuples)",
      { type: "object", properties: { t: { type: "array", items: [{ type: "string" }] } } },
      /items must be object,boolean/,
    ],
    ["a $ref that resolves to nothing", { type: "object", properties: { a: { $ref: "#/$defs/none" } } }, /resolve/],
    ["a misspelt type", { type: "object", properties: { a: { type: "strin" } } }, /type must be equal to one of/],
    [
      "an invalid pattern",
      { type: "object", properties: { a: { type: "string", pattern: "(" } } },
      /regular expression/,
    ],
    ["a root that is not an object schema", { type: "array" }, /"type": "object"/],
  ])("refuses %s with a usage error that says why", (_what, schema, reason) => {
    const error = usageErrorOf(() => compileResultSchema(schema));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toMatch(reason);
    expect(error.hint).toBeTruthy();
  });

  it("refuses a number JSON cannot write (1e400 parses as Infinity), and never takes a schema for another whose text would be the same (review, session 43)", () => {
    // JSON writes Infinity as null: the two schemas had one cached validator, so the second, which
    // the meta-schema refuses, was taken as the first (in one process: a batch, a service).
    const infinite = JSON.parse('{"type":"object","properties":{"s":{"type":"string","maxLength":1e400}}}');
    const nulled = { type: "object", properties: { s: { type: "string", maxLength: null } } };
    const refused = usageErrorOf(() => compileResultSchema(infinite));
    expect(refused.shortMessage).toMatch(/cannot be written as JSON: it holds Infinity, which JSON writes as null/);
    expect(refused.hint).toContain("finite numbers");
    expect(usageErrorOf(() => compileResultSchema(nulled)).shortMessage).toMatch(/maxLength must be integer/);
  });

  it("a nested $id of one schema is nothing to a later one's $ref (review, session 44)", () => {
    const later = {
      type: "object",
      properties: { a: { type: "string" }, b: { $ref: "http://x.example/a" } },
    };
    const alone = usageErrorOf(() => compileResultSchema(later)).shortMessage;
    expect(alone).toMatch(/can't resolve reference http:\/\/x\.example\/a/);
    compileResultSchema({ type: "object", properties: { a: { $id: "http://x.example/a", type: "integer" } } });
    expect(usageErrorOf(() => compileResultSchema({ ...later, title: "again" })).shortMessage).toBe(alone);
  });

  it("a root $id that is no string is refused as a schema error, and one naming the meta-schema leaves it to later schemas (review, session 44)", () => {
    expect(usageErrorOf(() => compileResultSchema({ $id: 5, type: "object" })).shortMessage).toMatch(
      /^The schema cannot be used: schema is invalid: data\/\$id must be string/,
    );
    const meta = "https://json-schema.org/draft/2020-12/schema";
    compileResultSchema({ $id: meta, type: "object", properties: { a: { type: "string" } } });
    // Before, Ajv's cleanup deleted what the instance held under that $id: the meta-schema itself,
    // and every later schema of the process was refused.
    const later = compileResultSchema({ type: "object", properties: { n: { type: "integer", minimum: 1 } } });
    expect(later.validate({ n: 2 })).toEqual({ ok: true, value: { n: 2 } });
    expect(
      usageErrorOf(() => compileResultSchema({ type: "object", properties: { n: { type: "intgr" } } })).shortMessage,
    ).toMatch(/schema is invalid: data\/properties\/n\/type must be equal to one of the allowed values/);
  });
});

describe("checkPiAcceptsSchema", () => {
  it("accepts what pi-schema compiles, refuses what it cannot, with Pi's reason", async () => {
    await expect(checkPiAcceptsSchema({ type: "object", properties: { a: { type: "string" } } })).resolves.toBe(
      undefined,
    );
    const error = await checkPiAcceptsSchema({ type: "object", patternProperties: { "(": {} } }).then(
      () => undefined,
      (e: unknown) => e as SandboxRunError,
    );
    expect(error?.code).toBe("usage");
    expect(error?.shortMessage).toMatch(
      /^Pi cannot use the schema as its final tool's parameters: .*regular expression/,
    );
  });
});

describe("a schema's patterns cannot stall the host (issue 17: a replayed record chooses the schema and the model's reply)", () => {
  it("validate, Pi's preparation, the invalid-result watch and confirmOutcome each refuse `^(a|a)*$` on 'a'×40+'!' within about a second", () => {
    const probe = fileURLToPath(new URL("../support/redos-probe.ts", import.meta.url));
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
    // Its own process: a check that ran the pattern on this thread would hang the test runner itself.
    const child = spawnSync(process.execPath, ["--import", tsx, probe], { encoding: "utf8", timeout: 60_000 });
    expect(child.status, `the probe did not finish (signal ${child.signal}): ${child.stderr}`).toBe(0);
    const out = JSON.parse(child.stdout);
    const slow = /the schema's pattern "\^\(a\|a\)\*\$" did not finish within 1 s on a string of the result/;
    expect(out.validate.answer).toEqual({ ok: false, issues: [expect.stringMatching(slow)] });
    expect(out.validateKey.answer.issues[0]).toMatch(/pattern "\^\(b\|b\)\*\$" did not finish/);
    // (What else the answer says of the timed-out pattern is guarded-arguments.ts's: run-invalid-result-watch.test.ts.)
    expect(out.prepare.answer).toMatchObject({ ok: false, reason: expect.stringMatching(slow) });
    expect(out.watch.answer.invalid).toEqual({ consecutive: 1, reason: expect.stringMatching(slow) });
    expect(out.confirm.answer).toEqual({ ok: false, contradiction: expect.stringMatching(slow) });
    expect(out.fine.answer).toEqual({ ok: true, value: { v: "aaaa" } });
    // About the bound each (a loaded machine may add some), never the pattern's hours.
    for (const key of ["validate", "validateKey", "prepare", "watch", "confirm"])
      expect(out[key].ms, key).toBeLessThan(5_000);
  }, 90_000);
});

describe("a long-lived process", () => {
  it("compiling a schema per call does not grow the heap without end: the same schema compiles once, new ones in a bounded set of Ajv instances", () => {
    // A child with --expose-gc: heap after a full collection, before and after the calls.
    const script = `
      const { compileResultSchema } = await import(${JSON.stringify(new URL("../../src/run/result-validator.ts", import.meta.url).href)});
      const schema = (i) => ({ type: "object", properties: { verdict: { enum: ["approve", "reject"] }, ["note" + i]: { type: "string", maxLength: 200 }, items: { type: "array", items: { type: "object", properties: { file: { type: "string" }, line: { type: "integer" } }, required: ["file"] } } }, required: ["verdict"] });
      const heap = () => { globalThis.gc(); globalThis.gc(); return process.memoryUsage().heapUsed; };
      compileResultSchema(schema(-1)).validate({ verdict: "approve" });
      const start = heap();
      for (let i = 0; i < 2000; i++) compileResultSchema(schema(0)).validate({ verdict: "approve" });
      const same = heap() - start;
      for (let i = 0; i < 3000; i++) compileResultSchema(schema(i)).validate({ verdict: "reject" });
      const distinct = heap() - start;
      console.log(JSON.stringify({ same, distinct }));
    `;
    const child = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
    });
    expect(child.status, child.stderr).toBe(0);
    const { same, distinct } = JSON.parse(child.stdout.trim().split("\n").pop()!) as { same: number; distinct: number };
    // Before: ~15 KB a compile, kept for good (2,000 of one schema: ~30 MB; 3,000 more: ~75 MB).
    expect(same).toBeLessThan(2 * 1024 * 1024);
    expect(distinct).toBeLessThan(20 * 1024 * 1024);
  });
});
