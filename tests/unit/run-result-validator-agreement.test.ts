// The host's result check (Ajv) decides as Pi's (pi-schema) does: a final result Pi accepted ends
// the run, and a host that then refuses it fails the run with code "validation" and no retry
// (review, session 31: decimal multipleOf, email and idn-hostname formats, a `$ref` of "#"). Each
// case asks pi-schema directly, as Pi does (src/pi/tool-arguments.ts: its formats, coercion,
// unresolved references rejected), and the host's validator, after checkPiAcceptsSchema as every run
// does, about the value Pi hands its tool.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";
import { describe, expect, it } from "vitest";
import type { JsonSchema } from "../../src/agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import { isPiMultiple, PI_SCHEMA_FORMAT_NAMES } from "../../src/run/pi-schema-checks.js";
import { checkPiAcceptsSchema, compileResultSchema } from "../../src/run/result-validator.js";

/** pi-schema's decision on `value`, with Pi's options, and the value Pi would hand its tool. */
function piDecides(schema: JsonSchema, value: unknown): { ok: boolean; value: unknown } {
  const result = compile(schema, { formats, coerce: true, unresolvedRefs: "reject" }).parse(structuredClone(value));
  return result.ok ? { ok: true, value: result.value } : { ok: false, value };
}

/** Both decisions on one value: Pi's, then the host's on what Pi would hand on. */
async function decisions(schema: JsonSchema, value: unknown): Promise<{ pi: boolean; host: boolean }> {
  await checkPiAcceptsSchema(schema);
  const pi = piDecides(schema, value);
  return { pi: pi.ok, host: compileResultSchema(schema).validate(pi.value).ok };
}

const withProperty = (v: Record<string, unknown>): JsonSchema => ({
  type: "object",
  properties: { v },
  required: ["v"],
});

describe("the host decides as pi-schema does", () => {
  it.each([
    [0.01, 19.99],
    [0.01, 0.07],
    [0.01, 0.29],
    [0.01, 1.15],
    [0.1, 0.3],
    [1e-8, 3e-8],
  ])("multipleOf %s: %s is a multiple to both (Ajv's division said no)", async (divisor, value) => {
    expect(await decisions(withProperty({ type: "number", multipleOf: divisor }), { v: value })).toEqual({
      pi: true,
      host: true,
    });
  });

  it.each([
    [0.01, 0.071],
    [0.1, 0.35],
    [1e-8, 3.5e-8],
    [3, 10],
  ])("multipleOf %s: %s is no multiple to either, and the host says so as Ajv did", async (divisor, value) => {
    const schema = withProperty({ type: "number", multipleOf: divisor });
    expect(await decisions(schema, { v: value })).toEqual({ pi: false, host: false });
    expect(compileResultSchema(schema).validate({ v: value })).toEqual({
      ok: false,
      issues: [`v: must be multiple of ${divisor}`],
    });
  });

  it("multipleOf: the host's answer is pi-schema's on thousands of decimals, integers and huge values", () => {
    let seed = 31;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const divisors = [0.01, 0.1, 0.5, 0.25, 0.05, 1e-8, 0.0001, 0.3, 2.5, 3, 7, 1e-3, 1.1];
    let compared = 0;
    for (const divisor of divisors) {
      const schema = withProperty({ type: "number", multipleOf: divisor });
      const pi = compile(schema, { formats });
      const host = compileResultSchema(schema);
      const places = Math.max(0, -Math.floor(Math.log10(divisor))) + 2;
      const values = [0, -0, 1e308, -1e308, 2 ** 53, 2 ** 53 + 2, 1e-300];
      for (let i = 0; i < 400; i++) {
        const k = Math.floor(random() * 100_000) - 50_000;
        values.push(k * divisor, Number((k * divisor).toFixed(places)), Number((random() * 1000).toFixed(places)));
      }
      for (const value of values) {
        expect(host.validate({ v: value }).ok, `${value} multipleOf ${divisor}`).toBe(pi.check({ v: value }));
        expect(isPiMultiple(value, divisor)).toBe(pi.check({ v: value }));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(10_000);
  });

  it.each(["admin@localhost", "a@b", '"quoted"@example.com', "user@[127.0.0.1]"])(
    "format email: %s is an email to both (ajv-formats said no)",
    async (value) => {
      expect(await decisions(withProperty({ type: "string", format: "email" }), { v: value })).toEqual({
        pi: true,
        host: true,
      });
    },
  );

  it.each(["http://exämple.com/", "https://bücher.de/x", "urn:isbn:123", "::1", "//host"])(
    "format idn-hostname: %s decides the same (pi-schema's own reading, not the host's old pattern)",
    async (value) => {
      const both = await decisions(withProperty({ type: "string", format: "idn-hostname" }), { v: value });
      expect(both.host).toBe(both.pi);
    },
  );

  // Every value the review tried, under every format pi-schema knows: the review found 69 pairs the
  // two decided differently, in both directions (idn-email, uri-reference, iri, date-time, uuid,
  // regex, url, ... besides those above).
  const reviewed = [
    ...["a@b", "user@localhost", "ü@example.com", "user@exämple.com", '"quoted"@example.com', "user+tag@example.com"],
    ...["user@[127.0.0.1]", "a@b.c", "x@-example.com", "http://exämple.com/", "http://example.com/ä", "http://[::1]/"],
    ...["mailto:a@b.c", "urn:isbn:123", "http://example.com/a b", "http://example.com/%zz", "HTTP://EXAMPLE.COM"],
    ...["file:///tmp/x", "http://example.com/#frag#2", "http://user@host:99999/", "2024-01-01T00:00:00Z"],
    ...["2024-01-01T00:00:00.123456789Z", "2024-01-01T00:00:00+01:00", "2024-01-01 00:00:00Z", "2024-01-01T24:00:00Z"],
    ...["2024-12-31T23:59:60Z", "2024-06-30T12:59:60Z", "2024-01-01T00:00:00+25:00", "+002024-01-01T00:00:00Z"],
    ...["2024-01-01T00:00Z", "12:00:00Z", "12:00:00.5+01:00", "23:59:60Z", "2024-02-29", "1900-02-29", "2000-02-29"],
    ...["my_host", "xn--bcher-kva.example", "-a.com", `${"a".repeat(64)}.com`, "localhost", "1.2.3.4", "::1", "1::"],
    ...["::ffff:1.2.3.4", "fe80::1%eth0", "256.1.1.1", "1.2.3", "P1D", "PT1H", "P1W", "P1Y2W", "PT", "P1DT"],
    ...[
      "0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      "a0eebc999c0b4ef8bb6d6bb9bd380a11",
    ],
    ...["urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "", "/", "/a~0b", "#/a", "0/a", "1#", "(", "[", "a{2"],
    ...["\\p{L}", "(?<n>a)", "a**", "http://example.com/{id}", "{+path}", "../x", "//host", "?q", "#f"],
    ...["http://ex ample.com", "nope", "not an iri", "ü@bücher.de", "https://bücher.de/x"],
  ];
  it.each([...PI_SCHEMA_FORMAT_NAMES])("format %s: every value the review tried decides the same", async (format) => {
    const schema = withProperty({ type: "string", format });
    await checkPiAcceptsSchema(schema);
    const host = compileResultSchema(schema);
    const differ = reviewed.filter((value) => {
      const pi = piDecides(schema, { v: value });
      return host.validate(pi.value).ok !== pi.ok;
    });
    expect(differ).toEqual([]);
  });

  // Every run awaits checkPiAcceptsSchema, which loads them; without it, Node's require() of an ES
  // module (20.19+, 22.12+) does, in the check itself.
  it.skipIf(!(process.features as { require_module?: boolean }).require_module)(
    "a validator used before checkPiAcceptsSchema still checks formats with pi-schema's checks",
    () => {
      const script = `
        const { compileResultSchema } = await import(${JSON.stringify(new URL("../../src/run/result-validator.ts", import.meta.url).href)});
        const v = compileResultSchema({ type: "object", properties: { e: { type: "string", format: "email" } } });
        console.log(JSON.stringify([v.validate({ e: "admin@localhost" }), v.validate({ e: "nope" })]));
      `;
      const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        encoding: "utf8",
        cwd: fileURLToPath(new URL("../..", import.meta.url)),
      });
      expect(child.status, child.stderr).toBe(0);
      expect(JSON.parse(child.stdout.trim().split("\n").pop()!)).toEqual([
        { ok: true, value: { e: "admin@localhost" } },
        { ok: false, issues: ['e: must match format "email"'] },
      ]);
    },
  );

  it("the formats the host takes from pi-schema are all pi-schema knows, in this release", () => {
    expect([...PI_SCHEMA_FORMAT_NAMES].sort()).toEqual(Object.keys(formats).sort());
  });

  it("a format pi-schema does not know is still the host's: ajv-formats' int32 (tests/integration/result-schema.test.ts), and a typo is named, checked by neither", async () => {
    const int32 = withProperty({ type: "integer", format: "int32" });
    expect(await decisions(int32, { v: 2 ** 40 })).toEqual({ pi: true, host: false });
    const typo = withProperty({ type: "string", format: "emial" });
    expect(compileResultSchema(typo).uncheckedFormats).toEqual(["emial"]);
    expect(await decisions(typo, { v: "anything" })).toEqual({ pi: true, host: true });
  });
});

describe('a recursive schema whose $ref is "#" (review, session 31: refused at planning, Pi compiles it)', () => {
  const tree = {
    type: "object",
    properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#" } } },
    required: ["name"],
    additionalProperties: false,
  };
  const nested = { name: "a", children: [{ name: "b", children: [{ name: "c", children: [] }] }, { name: "d" }] };
  // Not a name Pi could coerce into a string (it would make 3 "3").
  const bad = { name: "a", children: [{ name: "b", children: [{ name: { first: "c" } }] }] };

  it("compiles, validates a nested tree and refuses a bad one, as pi-schema does", async () => {
    const before = JSON.stringify(tree);
    const validator = compileResultSchema(tree);
    expect(validator.validate(nested)).toEqual({ ok: true, value: nested });
    expect(validator.validate(bad)).toEqual({ ok: false, issues: ["children.0.children.0.name: must be string"] });
    expect(validator.validate({ name: "a", children: [{ name: "b", extra: 1 }] })).toEqual({
      ok: false,
      issues: ["children.0.extra: is not allowed (additionalProperties)"],
    });
    expect(await decisions(tree, nested)).toEqual({ pi: true, host: true });
    expect(await decisions(tree, bad)).toEqual({ pi: false, host: false });
    // The caller's schema is not given an $id, or changed otherwise.
    expect(JSON.stringify(tree)).toBe(before);
  });

  it("compiles again, beside other root-recursive schemas and one with its own $id, in one process", () => {
    for (let i = 0; i < 3; i++) {
      const other = { ...tree, properties: { ...tree.properties, [`n${i}`]: { type: "integer" } } };
      expect(compileResultSchema(other).validate({ name: "x", children: [{ name: "y", [`n${i}`]: "z" }] }).ok).toBe(
        false,
      );
    }
    const identified = { $id: "https://example.com/tree.json", ...tree };
    expect(compileResultSchema(identified).validate(nested).ok).toBe(true);
    expect(compileResultSchema(identified).validate(bad).ok).toBe(false);
  });

  it("a $ref that resolves to nothing is still refused, its reason naming no made-up address", () => {
    let message = "";
    try {
      compileResultSchema({ type: "object", properties: { a: { $ref: "#/$defs/none" } } });
    } catch (error) {
      if (!isSandboxRunError(error)) throw error;
      message = error.shortMessage;
    }
    expect(message).toMatch(/can't resolve reference #\/\$defs\/none/);
    expect(message).not.toContain("json-schema.invalid");
  });
});
