// Pi's preparation of a final-tool call's arguments (pi/tool-arguments.ts: parse, coerce and
// validate with pi-schema), as the host repeats it, with the schema's patterns tried first in a
// worker with a time bound (pattern-guard.ts): the model chose the strings, and the schema may be a
// replayed record's. Arguments the patterns cannot check in time are refused with a reason naming
// the pattern, and pi-schema never runs them on the main thread; so are arrays too large for a
// schema's uniqueItems to be checked in bounded time (unique-items-guard.ts).
import type { JsonSchema } from "../agent.js";
import { type PreparedArguments, parseToolCallArguments, prepareParsedArguments } from "../pi/tool-arguments.js";
import { type PatternGuard, patternGuardFor } from "./pattern-guard.js";
import { uniqueItemsProblem } from "./unique-items-guard.js";

// One guard per schema object (the run keeps its schema for as long as it runs).
const guards = new WeakMap<object, { guard?: PatternGuard }>();

/**
 * `uncheckable`: the host cannot check the value in bounded time: a pattern ran past its bound (Pi,
 * which has none, is stuck on the same string), or an array is too large for its uniqueItems.
 */
export type GuardedArguments =
  | PreparedArguments
  | { ok: false; reason: string; uncheckable: "pattern" | "unique-items" };

export function prepareGuarded(schema: JsonSchema, argumentsJson: string): GuardedArguments {
  // Parsed once: the guards and Pi's preparation read the same value.
  const parsed = parseToolCallArguments(argumentsJson);
  if (typeof schema === "object" && schema !== null) {
    // Every pair of a large array's items compared, on this thread: refused before (unique-items-guard.ts).
    const items = parsed.ok ? uniqueItemsProblem(schema, parsed.value) : undefined;
    if (items) return { ok: false, reason: `validation failed: ${items}`, uncheckable: "unique-items" };
    let entry = guards.get(schema);
    if (!entry) guards.set(schema, (entry = { guard: patternGuardFor(schema) }));
    const slow = entry.guard && parsed.ok ? entry.guard.check(parsed.value) : undefined;
    if (slow) return { ok: false, reason: `validation failed: ${slow}`, uncheckable: "pattern" };
  }
  return prepareParsedArguments(schema, parsed);
}
