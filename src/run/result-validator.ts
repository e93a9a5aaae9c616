// The host's own check of a structured result against the caller's JSON Schema, with Ajv (draft
// 2020-12): every keyword a JSON Schema validator knows (if/then/else, dependentRequired, $defs and
// $ref, unevaluatedProperties, ...), no coercion, no defaults.
//
// The dialect is Pi's. Pi validates the final tool's arguments with pi-schema as draft 2020-12
// whatever `$schema` says, and ignores keywords it does not know; so does this check (a `$schema`
// naming an older draft is set aside, never used to pick other semantics). A schema the host cannot
// compile (a `$ref` that resolves to nothing, an `items` array where 2020-12 wants `prefixItems`, a
// pattern that is no valid regular expression) is refused here, before anything starts; the few
// schemas Ajv compiles but Pi cannot are refused before the run by `checkPiCompiles`
// (pi/tool-arguments.ts). The value checked is what Pi handed its tool (after Pi's coercion,
// recomputed on the host from the model's own reply): Pi accepting it is not enough.
//
// Where Ajv and pi-schema read a keyword differently, the host asks pi-schema's own logic
// (pi-schema-checks.ts; review, session 31: Pi accepted, the host refused, the run failed with no
// retry): every format pi-schema knows is checked by pi-schema's check for it (ajv-formats' only for
// the formats pi-schema does not know: int32, byte, ...), and multipleOf is decided exactly on the
// decimal digits, as pi-schema does (19.99 is a multiple of 0.01; to Ajv's division it is not).
//
// Ajv and ajv-formats are loaded on the first schema (~20 ms of CPU bundled, util/vendored.ts):
// runs without a schema, and the CLI's --help and --version, never load them.
//
// A schema's patterns are regular expressions its author chose (a replayed record's author, too),
// tried on strings the model chose: before Ajv or pi-schema runs them here, on the controller's
// main thread, a worker tries them all with a time bound (pattern-guard.ts). A value they cannot
// check in time is invalid, with a reason naming the pattern; the main thread never runs it.
//
// A run checks its results in a worker thread instead (`worker`, validate-in-worker.ts), with a
// deadline and a memory cap: a schema can make Ajv's and pi-schema's checks take exponential time
// or fill the heap (review, session 35), or cost seconds per value through ordinary keywords
// (uniqueItems, a long enum, a backtracking pattern: session 36), which no guard of this thread
// foresees. Only a plain schema's checks of small values stay on this thread (plainSchema).
// `validate` is the check itself, which the worker runs.
import type { Ajv2020, ErrorObject } from "ajv/dist/2020.js";
import type { DataValidateFunction } from "ajv/dist/types/index.js";
import type { JsonSchema } from "../agent.js";
import { usageError } from "../errors.js";
import { requireVendored } from "../util/vendored.js";
import { patternGuardFor } from "./pattern-guard.js";
import { isPiMultiple, loadPiSchemaFormats, PI_SCHEMA_FORMAT_NAMES, piSchemaFormat } from "./pi-schema-checks.js";
import { uniqueItemsProblem } from "./unique-items-guard.js";
import { type InlineChecks, ResultCheckWorker } from "./validate-in-worker.js";

type ResultCheck = { ok: true; value: unknown } | { ok: false; issues: string[] };

export interface ResultValidator {
  /** Checks a final result; the value is never changed. */
  validate(value: unknown): ResultCheck;
  /** The schema's formats the host does not know: annotations, not checked (said as a warning). */
  uncheckedFormats: string[];
  /**
   * The run's checks (Pi's preparation of a final call, `validate`): in a worker thread with a
   * deadline and a memory cap, but a plain schema's checks of small values (plainSchema,
   * INLINE_CHECK_BYTES), answered on this thread. Ended by the run (close()).
   */
  worker: ResultCheckWorker;
}

/** The Ajv instances' options, but for allErrors, the logger and validateSchema (validatorFactory). */
export const RESULT_CHECK_AJV_OPTIONS = {
  // Unknown keywords are annotations, as the spec and Pi have it; everything else Ajv checks strictly.
  strict: false,
  validateFormats: true,
  // Patterns are ECMAScript regular expressions with the u flag, as in Pi.
  unicodeRegExp: true,
  // One compiled validator per schema object; the caller's schema is never modified.
  addUsedSchema: false,
  // A property is the value's own: `constructor` or `toString` in the schema's properties is not
  // read from Object.prototype (review, session 36: `{name}` was refused for "constructor: must be string").
  ownProperties: true,
} as const;

/** Draft 2020-12's meta-schema as a compiled check: the one the build made, or undefined. */
type MetaCheck = ((schema: unknown) => boolean) & { errors?: ErrorObject[] | null; madeWith?: Record<string, unknown> };

interface VendoredAjv {
  Ajv2020: typeof Ajv2020;
  addFormats: (ajv: Ajv2020) => Ajv2020;
  /** Made by scripts/bundle-vendored.mjs; none where Ajv loads from its package (tsx). */
  draft2020MetaCheck?: MetaCheck;
}

let vendored: VendoredAjv | undefined;
/** Ajv, ajv-formats and the build's meta-schema check where there is one; looked up once per process. */
function vendoredAjv(): VendoredAjv {
  vendored ??= requireVendored<VendoredAjv>("ajv", (load) => ({
    Ajv2020: load("ajv/dist/2020.js").Ajv2020,
    addFormats: load("ajv-formats").default,
  }));
  return vendored;
}

let prebuiltMetaCheck: MetaCheck | null | undefined;
/** The build's meta-schema check where it was made with the result check's options, else null; decided once. */
function usableMetaCheck(): MetaCheck | null {
  if (prebuiltMetaCheck === undefined) {
    const made = vendoredAjv().draft2020MetaCheck;
    prebuiltMetaCheck =
      made && sameOptions(made.madeWith, { ...RESULT_CHECK_AJV_OPTIONS, allErrors: true }) ? made : null;
  }
  return prebuiltMetaCheck;
}

/**
 * Refuses a schema draft 2020-12's meta-schema refuses, as Ajv's own check would, with its message
 * ("schema is invalid: data/type must be ..."). The build's compiled meta-schema check does it
 * where it was made with these options (and so answers as the one Ajv would compile here: ~90 ms of
 * CPU on a process's first schema, against ~6 ms to load it); else Ajv's validateSchema.
 */
function checkAgainstMetaSchema(factory: Ajv2020, schema: Record<string, unknown>): void {
  const prebuilt = usableMetaCheck();
  if (!prebuilt || "$schema" in schema) {
    factory.validateSchema(schema, true);
    return;
  }
  if (!prebuilt(schema)) throw new Error(`schema is invalid: ${factory.errorsText(prebuilt.errors)}`);
}

/** Whether two option sets name the same options with the same values. */
function sameOptions(made: Record<string, unknown> | undefined, ours: Record<string, unknown>): boolean {
  if (!made) return false;
  const names = Object.keys(ours);
  return Object.keys(made).length === names.length && names.every((name) => Object.is(made[name], ours[name]));
}

let ajv: Ajv2020 | undefined;
let firstErrorAjv: Ajv2020 | undefined;
/** What Ajv warned about while compiling the last schema (an unknown format, with strict off). */
const compileWarnings: string[] = [];

/**
 * The base URI pi-schema gives a root schema without `$id` (its resolver's DEFAULT_BASE), given to
 * Ajv as the `$id` of such a schema: with addUsedSchema off, Ajv cannot resolve a `$ref` of "#" (a
 * recursive schema: `items: { $ref: "#" }`) in a root without one ("can't resolve reference # from
 * id #", review, session 31), and relative references resolve against the same base as in Pi.
 */
const ROOT_BASE = "https://json-schema.invalid/root.json";

/**
 * The Ajv instance: `allErrors` for the check whose errors are told; without, for the plain
 * schema's first look at a value on the main thread (it stops at the first error: an invalid value's
 * every error, each message repeating the schema's strings, cost seconds and gigabytes there;
 * review of session 36's fixes).
 */
function validatorFactory(allErrors = true): Ajv2020 {
  if (allErrors && ajv) return ajv;
  if (!allErrors && firstErrorAjv) return firstErrorAjv;
  const { Ajv2020: Ajv, addFormats } = vendoredAjv();
  const made = new Ajv({
    ...RESULT_CHECK_AJV_OPTIONS,
    allErrors,
    // Not printed: an unknown format's warning refuses the schema (compileResultSchema).
    logger: { log: () => {}, warn: (...args: unknown[]) => void compileWarnings.push(args.join(" ")), error: () => {} },
    // compiledFor checks a schema against draft 2020-12's meta-schema itself (checkAgainstMetaSchema),
    // once, before the all-errors instance compiles it; the first-error instance compiles only
    // schemas that passed.
    validateSchema: false,
  });
  // ajv-formats for the formats pi-schema does not know (int32, byte, ...); pi-schema's own checks
  // for the rest, which draft 2020-12's all are (idn-email, iri, ... included: review, session 27).
  addFormats(made);
  for (const name of PI_SCHEMA_FORMAT_NAMES) made.addFormat(name, { type: "string", validate: piSchemaFormat(name) });
  // pi-schema's exact multipleOf in place of Ajv's division; the meta-schema still refuses a
  // multipleOf that is not a number above 0, as before.
  made.removeKeyword("multipleOf");
  made.addKeyword({
    keyword: "multipleOf",
    type: "number",
    schemaType: "number",
    errors: "full",
    compile(divisor: number) {
      // Ajv's own message and params for a value that is no multiple.
      const refusal = [
        { keyword: "multipleOf", message: `must be multiple of ${divisor}`, params: { multipleOf: divisor } },
      ];
      const check: DataValidateFunction = (value: number) => {
        const ok = isPiMultiple(value, divisor);
        check.errors = ok ? undefined : refusal.map((error) => ({ ...error }));
        return ok;
      };
      return check;
    },
  });
  if (allErrors) ajv = made;
  else firstErrorAjv = made;
  return made;
}

interface Compiled {
  /** The schema's text (schemaText), which the check was compiled and meta-checked from. */
  text: string;
  check: ReturnType<Ajv2020["compile"]>;
  uncheckedFormats: string[];
  guard: ReturnType<typeof patternGuardFor>;
  /** A plain schema's first look at a value (firstErrorCheck), compiled on its first use. */
  firstLook?: (value: unknown) => boolean;
}

/**
 * Validators by schema text, most recently used last. A long-lived service validates every call's
 * result against one of a few schemas: each compiles once. Ajv keeps what it compiled in its
 * instance's scope for good (removeSchema drops its cache entry, not that: ~15 KB a call,
 * review, session 28), so after COMPILES_PER_INSTANCE compiles the next one starts a fresh
 * instance, and what the old one held goes with the validators that still use it.
 */
const compiledSchemas = new Map<string, Compiled>();
const CACHED_SCHEMAS = 64;
const COMPILES_PER_INSTANCE = 256;
let compiles = 0;

function compiledFor(rest: Record<string, unknown>): Compiled {
  const key = schemaText(rest);
  const known = compiledSchemas.get(key);
  if (known) {
    compiledSchemas.delete(key);
    compiledSchemas.set(key, known);
    return known;
  }
  if (++compiles > COMPILES_PER_INSTANCE) {
    compiles = 1;
    ajv = undefined;
    firstErrorAjv = undefined;
  }
  const factory = validatorFactory();
  let check: ReturnType<Ajv2020["compile"]>;
  compileWarnings.length = 0;
  // A copy with pi-schema's base as its `$id` where it has none (ROOT_BASE); the caller's schema is
  // never modified.
  const compiledSchema = rest.$id === undefined ? { $id: ROOT_BASE, ...rest } : rest;
  const refsBefore = new Set(Object.keys(factory.refs));
  try {
    checkAgainstMetaSchema(factory, compiledSchema);
    check = factory.compile(compiledSchema);
  } catch (error) {
    throw usageError(
      `The schema cannot be used: ${(error as Error).message.replaceAll(` from id ${ROOT_BASE}`, " in the schema")}.`,
      "Pi validates the result as JSON Schema draft 2020-12: use prefixItems for tuples (not an items array), and make every $ref point into the schema.",
    );
  } finally {
    forgetCompiled(factory, compiledSchema, refsBefore);
  }
  // A format no validator knows is an annotation (Ajv, with strict off, only warns): checked by
  // nothing, which a typo (`emial`) makes silently so: the plan says it (review, session 27). Not
  // refused: tools emit formats of their own (`cuid`, `color`), and Pi takes them.
  const uncheckedFormats = [...new Set(compileWarnings.flatMap((w) => /unknown format "([^"]*)"/.exec(w)?.[1] ?? []))];
  const compiled = { text: key, check, uncheckedFormats, guard: patternGuardFor(rest) };
  compiledSchemas.set(key, compiled);
  if (compiledSchemas.size > CACHED_SCHEMAS) compiledSchemas.delete(compiledSchemas.keys().next().value!);
  return compiled;
}

/**
 * Drops Ajv's cache entry for a compiled schema object: its cache, keyed by object, would keep every
 * schema a long-lived process sees. Not through removeSchema, which also deletes what is registered
 * under the object's `$id`: a caller's `$id` naming draft 2020-12's meta-schema removed it for every
 * later schema of the process, and a `$id` that is no string threw a TypeError in place of the
 * schema's refusal (review, session 44). Where Ajv keeps no such map, nothing is dropped (an instance
 * is replaced after COMPILES_PER_INSTANCE compiles anyway). `refsBefore`: the instance's refs before
 * the compile.
 */
function forgetCompiled(factory: Ajv2020, schema: object, refsBefore: ReadonlySet<string>): void {
  const cache = (factory as unknown as { _cache?: unknown })._cache;
  if (cache instanceof Map) cache.delete(schema);
  // What the schema's nested `$id`s registered: left there, a later schema's `$ref` to the same
  // address resolved into this one (review, session 44: refused alone, it compiled after it).
  for (const ref of Object.keys(factory.refs)) if (!refsBefore.has(ref)) delete factory.refs[ref];
}

/**
 * The schema as JSON text (the validators' cache key): a schema that is no JSON value (a cycle,
 * a BigInt, nesting past the stack) is the caller's mistake, said as one (review, session 34: a
 * TypeError or RangeError reached the caller).
 */
function schemaText(schema: Record<string, unknown>): string {
  try {
    return JSON.stringify(schema, finiteNumbersOnly);
  } catch (error) {
    throw usageError(
      `The schema cannot be written as JSON: ${(error as Error).message.split("\n")[0]}.`,
      "Pass a JSON Schema that is plain data (no cycles, no BigInt values, finite numbers, not thousands of levels deep).",
    );
  }
}

/**
 * JSON writes Infinity and NaN as null, so `{"maxLength": 1e400}` (Infinity once parsed) and
 * `{"maxLength": null}` had one text: one cached validator, the second schema never checked against
 * the meta-schema (review, session 43); and Pi, which receives the schema as JSON, would read null.
 */
function finiteNumbersOnly(_key: string, value: unknown): unknown {
  if (typeof value === "number" && !Number.isFinite(value))
    throw new Error(
      `it holds ${value}, which JSON writes as null (a number past JSON's range, such as 1e400, reads as Infinity)`,
    );
  return value;
}

/**
 * The keywords whose checks cost a small constant per value node (or none: annotations). A schema
 * of only these, small, with short enums of plain values, is "plain": its checks of a small value
 * run on this thread. Everything else (references, combinators, patterns, uniqueItems, a long enum,
 * `format: "regex"`, a keyword not listed) is checked in the run's worker, bounded: session 35's
 * review found references making a check exponential, session 36's found uniqueItems over large
 * items, a long enum (pi-schema rebuilds its check for each value it explains) and backtracking
 * patterns stalling this thread for 37-95 s while the run's timer could not fire.
 */
const PLAIN_KEYWORDS = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minProperties",
  "maxProperties",
  "enum",
  "const",
  "format",
  "title",
  "description",
  "default",
  "examples",
  "$comment",
  "$schema",
  "deprecated",
  "readOnly",
  "writeOnly",
]);
/** A plain schema is at most this large. */
const PLAIN_SCHEMA_BYTES = 4 * 1024;
/** A plain schema's enums hold at most this many plain values. */
const PLAIN_ENUM_VALUES = 32;
/**
 * The largest final-call arguments (and result, as JSON) a plain schema's checks run on this
 * thread; a larger one goes to the worker. The watch checks a few calls per reply, each at most
 * four times: far below a millisecond's work each on this thread.
 */
export const INLINE_CHECK_BYTES = 64 * 1024;

const plainSchemas = new WeakMap<object, boolean>();

/**
 * Whether `schema` is plain (PLAIN_KEYWORDS): its checks of a small value are cheap enough for the
 * controller's main thread. Any other schema's checks all run in the run's worker, with a deadline
 * and a memory cap (its start costs ~250 ms of CPU, which a plain schema's run does not pay unless a
 * large value comes).
 */
export function plainSchema(schema: JsonSchema): boolean {
  const known = plainSchemas.get(schema);
  if (known !== undefined) return known;
  let plain: boolean;
  try {
    const text = JSON.stringify(schema);
    plain = text !== undefined && Buffer.byteLength(text) <= PLAIN_SCHEMA_BYTES && plainNode(schema);
  } catch {
    plain = false;
  }
  plainSchemas.set(schema, plain);
  return plain;
}

function plainNode(node: unknown): boolean {
  if (typeof node === "boolean") return true;
  if (!node || typeof node !== "object" || Array.isArray(node)) return false;
  const isPlainValue = (v: unknown) => v === null || ["string", "number", "boolean"].includes(typeof v);
  for (const [key, value] of Object.entries(node)) {
    if (!PLAIN_KEYWORDS.has(key)) return false;
    switch (key) {
      case "properties":
        if (!value || typeof value !== "object" || Array.isArray(value)) return false;
        if (!Object.values(value).every(plainNode)) return false;
        break;
      case "items":
      case "additionalProperties":
        if (!plainNode(value)) return false;
        break;
      case "prefixItems":
        if (!Array.isArray(value) || !value.every(plainNode)) return false;
        break;
      case "enum":
        if (!Array.isArray(value) || value.length > PLAIN_ENUM_VALUES || !value.every(isPlainValue)) return false;
        break;
      case "const":
        if (!isPlainValue(value)) return false;
        break;
      case "format":
        if (value === "regex") return false;
        break;
    }
  }
  return true;
}

/** Compiles the caller's result schema; a usage error says what is wrong with one that cannot be used. */
export function compileResultSchema(schema: JsonSchema): ResultValidator {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema) || schema.type !== "object") {
    throw usageError(
      'The schema must be a JSON Schema object with "type": "object" (Pi passes it as a tool\'s parameters).',
      'Wrap other values in an object property, e.g. { "type": "object", "properties": { "value": ... } }.',
    );
  }
  // Pi reads every schema as draft 2020-12; so does the host (see the header).
  const { $schema: _dialect, ...rest } = schema;
  const compiled = compiledFor(rest);
  const { check, uncheckedFormats, guard } = compiled;
  const validate = (value: unknown): ResultCheck => {
    // Every pair of a large array's objects compared on this thread: refused first (unique-items-guard.ts).
    const items = uniqueItemsProblem(rest, value);
    if (items) return { ok: false, issues: [items] };
    const slow = guard?.check(value);
    if (slow) return { ok: false, issues: [slow] };
    if (check(value)) return { ok: true, value };
    return { ok: false, issues: (check.errors ?? []).map(describeError) };
  };
  // A plain schema's checks of small values that pass it stay on this thread; every other check goes to the worker.
  const inline = plainSchema(schema) ? inlineChecks(schema, compiled, validate) : undefined;
  return { uncheckedFormats, worker: new ResultCheckWorker(schema, {}, inline), validate };
}

/**
 * A plain schema's checks on the calling thread, for a small value that passes a first look (Ajv
 * stopping at its first error): an invalid value goes to the worker, with its bounds. Telling every
 * error of an invalid one costs (items) x (errors per item) x (message length): a plain schema of 720
 * required names on 64 KiB of `{}` items ran the controller out of heap (review of session 36's fixes).
 */
function inlineChecks(schema: JsonSchema, compiled: Compiled, validate: (value: unknown) => ResultCheck): InlineChecks {
  // Kept with the schema's other validators: compiled once per schema, not once per run, and in
  // the instance compiledFor renews.
  const firstLook = (value: unknown): boolean => {
    compiled.firstLook ??= firstErrorCheck(compiled.text);
    return compiled.firstLook(value);
  };
  const text = schemaText(schema);
  return {
    // Pi's preparation (pi-schema), loaded when a run first prepares a call: a plan (--dry-run) loads none of it.
    prepare: (other, argumentsJson) => {
      if (argumentsJson.length > INLINE_CHECK_BYTES || (other !== schema && schemaText(other) !== text))
        return undefined;
      let value: unknown;
      try {
        value = JSON.parse(argumentsJson);
      } catch {
        return undefined;
      }
      if (!firstLook(value)) return undefined;
      return import("./guarded-arguments.js").then(({ prepareGuarded }) => prepareGuarded(other, argumentsJson));
    },
    validate: (value, json) =>
      json !== undefined && json.length <= INLINE_CHECK_BYTES && firstLook(value) ? validate(value) : undefined,
  };
}

/**
 * The schema's check by the Ajv that stops at its first error (validatorFactory(false)), compiled
 * from the very text the all-errors instance compiled and checked against the meta-schema (that
 * instance does not check it again; a caller's schema object changed since would not be what was
 * checked). One that still cannot compile sends every value to the worker, which decides.
 */
function firstErrorCheck(text: string): (value: unknown) => boolean {
  const factory = validatorFactory(false);
  const schema = JSON.parse(text) as Record<string, unknown>;
  const compiledSchema = schema.$id === undefined ? { $id: ROOT_BASE, ...schema } : schema;
  try {
    const check = factory.compile(compiledSchema);
    return (value) => check(value) === true;
  } catch {
    return () => false;
  } finally {
    factory.removeSchema(compiledSchema);
  }
}

/** One Ajv error as `path: message`, the path dotted like the rest of sandbox-run's messages. */
function describeError(error: ErrorObject): string {
  const path = error.instancePath
    .slice(1)
    .split("/")
    .filter((segment) => segment !== "")
    .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"));
  const { missingProperty: missing, property: when } = error.params as { missingProperty?: string; property?: string };
  if (missing !== undefined) {
    const condition = error.keyword !== "required" && when !== undefined ? ` when ${when} is present` : "";
    return `${[...path, missing].join(".")}: is required${condition}`;
  }
  const extra = (error.params as { additionalProperty?: string }).additionalProperty;
  if (error.keyword === "additionalProperties" && extra !== undefined)
    return `${[...path, extra].join(".")}: is not allowed (additionalProperties)`;
  return `${path.length ? path.join(".") : "(root)"}: ${error.message ?? error.keyword}`;
}

/**
 * Refuses (a usage error) a schema Ajv compiled but Pi cannot: checked before a run starts, and by
 * --dry-run. pi-schema loads here, not when the run is planned: planning stays synchronous and cheap.
 */
export async function checkPiAcceptsSchema(schema: JsonSchema): Promise<void> {
  const { piSchemaProblem } = await import("../pi/tool-arguments.js");
  // The format checks compileResultSchema's validators use: loaded before any result is checked.
  await loadPiSchemaFormats();
  const problem = piSchemaProblem(schema);
  if (problem) {
    throw usageError(
      `Pi cannot use the schema as its final tool's parameters: ${problem}.`,
      "Pi validates draft 2020-12 with pi-schema, which supports every keyword but $vocabulary, $recursiveRef and content assertions: drop the keyword it names.",
    );
  }
}
