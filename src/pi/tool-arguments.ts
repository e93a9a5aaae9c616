// What Pi 1.6.0 does to a tool call's arguments before its tool sees them, reproduced on the
// host so that the host accepts exactly the values Pi accepted (issue 9: "a value Pi accepted is
// not refused for a representation detail, and a value Pi never saw is never accepted").
//
// Pi's path (@earendil-works/pi-ai 1.6.0):
//   1. When the call's stream ends, `parseToolCallArguments(text)` (utils/json-parse.js): empty
//      text is `{}`; otherwise JSON.parse, and if that fails, once more after `repairJson` (raw
//      control characters in strings escaped, invalid backslash escapes doubled); anything but
//      a JSON object is an error that goes back to the model.
//   2. `validateToolArguments` (utils/validation.js): pi-schema's `compile(schema, { formats,
//      coerce: true, unresolvedRefs: "reject" }).parse(structuredClone(arguments))`, which
//      coerces ("42" -> 42, a single value -> [value], null for an omitted optional) and
//      validates. Tools with a `prepareArguments` hook (Pi's own edit tool) run it first; the
//      final-result tool has none.
// Step 1 is copied below (it is short and has no dependency); step 2 calls the same pi-schema
// release Pi bundles (the `@earendil-works/pi-schema` dependency is pinned to Pi's version).
import { type CoercingValidator, compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";

/** A JSON Schema as pi-schema takes it: an object, or `true`/`false` (a schema too, unlike the caller's result schema, agent.ts JsonSchema). */
export type PiSchema = Record<string, unknown> | boolean;

export type PreparedArguments = { ok: true; value: unknown } | { ok: false; reason: string };

const VALID_JSON_ESCAPES = new Set(['"', "\\", "/", "b", "f", "n", "r", "t"]);

function escapeControlCharacter(char: string): string {
  switch (char) {
    case "\b":
      return "\\b";
    case "\f":
      return "\\f";
    case "\n":
      return "\\n";
    case "\r":
      return "\\r";
    case "\t":
      return "\\t";
    default:
      return `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`;
  }
}

/** Pi's `repairJson`: escapes raw control characters inside strings and doubles invalid escapes. */
export function repairJson(json: string): string {
  let repaired = "";
  let inString = false;
  for (let index = 0; index < json.length; index++) {
    const char = json[index]!;
    if (!inString) {
      repaired += char;
      if (char === '"') inString = true;
      continue;
    }
    if (char === '"') {
      repaired += char;
      inString = false;
      continue;
    }
    if (char === "\\") {
      const nextChar = json[index + 1];
      if (nextChar === undefined) {
        repaired += "\\\\";
        continue;
      }
      if (nextChar === "u") {
        const digits = json.slice(index + 2, index + 6);
        if (/^[0-9a-fA-F]{4}$/.test(digits)) {
          repaired += `\\u${digits}`;
          index += 5;
          continue;
        }
      }
      if (VALID_JSON_ESCAPES.has(nextChar)) {
        repaired += `\\${nextChar}`;
        index += 1;
        continue;
      }
      repaired += "\\\\";
      continue;
    }
    const code = char.codePointAt(0) ?? 0;
    repaired += code <= 0x1f ? escapeControlCharacter(char) : char;
  }
  return repaired;
}

/** Pi's `parseJsonWithRepair`: JSON.parse, then once more after repairJson if that changes anything. */
export function parseJsonWithRepair(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch (error) {
    const repaired = repairJson(json);
    if (repaired !== json) return JSON.parse(repaired);
    throw error;
  }
}

type ParsedToolArguments = { ok: true; value: Record<string, unknown> } | { ok: false; reason: string };

/** Pi's `parseToolCallArguments`: the arguments object of a finished call, or why there is none. */
export function parseToolCallArguments(json: string): ParsedToolArguments {
  if (!json.trim()) return { ok: true, value: {} };
  try {
    const parsed = parseJsonWithRepair(json);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      return { ok: false, reason: "Tool arguments must be a JSON object" };
    }
    return { ok: true, value: parsed as Record<string, unknown> };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

// One compiled validator per schema object, like Pi (schemas are long-lived; the WeakMap lets
// them go).
const validators = new WeakMap<object, CoercingValidator<unknown>>();

function validatorFor(schema: Record<string, unknown>): CoercingValidator<unknown> {
  let validator = validators.get(schema);
  if (!validator) {
    validator = compile(schema as Parameters<typeof compile>[0], { formats, coerce: true, unresolvedRefs: "reject" });
    validators.set(schema, validator);
  }
  return validator;
}

/**
 * Why Pi could not use this schema as its final tool's parameters (pi-schema cannot compile it, with
 * the options Pi uses), or undefined when it can. Pi compiles a tool's schema at its first call, so
 * a schema it cannot compile would only show as a run whose every final result is refused.
 */
export function piSchemaProblem(schema: PiSchema): string | undefined {
  if (typeof schema !== "object" || schema === null) return "Pi cannot validate against a non-object schema";
  try {
    compile(schema as Parameters<typeof compile>[0], { formats, coerce: true, unresolvedRefs: "reject" });
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** A JSON Pointer as the dotted path Pi shows the model: `/edits/0/oldText` -> `edits.0.oldText`. */
function dottedPath(pointer: string): string {
  if (pointer === "") return "root";
  return pointer
    .slice(1)
    .split("/")
    .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"))
    .join(".");
}

/**
 * The value Pi hands to a tool (without a `prepareArguments` hook) for these raw arguments, or
 * the reason Pi refuses them. `rawArgumentsJson` is the arguments text as the model streamed it
 * (ModelReply.toolCalls[].argumentsJson).
 */
export function prepareToolArguments(schema: PiSchema, rawArgumentsJson: string): PreparedArguments {
  return prepareParsedArguments(schema, parseToolCallArguments(rawArgumentsJson));
}

/** prepareToolArguments for arguments parseToolCallArguments has parsed already (the host's guards read them first). */
export function prepareParsedArguments(schema: PiSchema, parsed: ParsedToolArguments): PreparedArguments {
  if (!parsed.ok) return { ok: false, reason: `invalid arguments: ${parsed.reason}` };
  // Pi keys its validator cache by the schema object, so a boolean schema makes every call fail
  // ("Invalid value used as weak map key"); the host refuses it too.
  if (typeof schema !== "object" || schema === null) {
    return { ok: false, reason: "validation failed: Pi cannot validate against a non-object schema" };
  }
  let result: ReturnType<CoercingValidator<unknown>["parse"]>;
  try {
    result = validatorFor(schema).parse(structuredClone(parsed.value));
  } catch (error) {
    // Pi turns a throwing validator (e.g. a schema pi-schema cannot compile) into a refusal too.
    return { ok: false, reason: `validation failed: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (result.ok) return { ok: true, value: result.value };
  const errors = result.errors.map((error) => `${dottedPath(error.path)}: ${error.message}`).join("; ");
  return { ok: false, reason: `validation failed: ${errors}` };
}
