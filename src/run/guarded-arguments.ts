// Pi's preparation of a final-tool call's arguments (pi/tool-arguments.ts: parse, coerce and
// validate with pi-schema), as the host repeats it, with the schema's patterns tried first in a
// worker with a time bound (pattern-guard.ts): the model chose the strings, and the schema may be a
// replayed record's. Arguments the patterns cannot check in time are refused with a reason naming
// the pattern, and pi-schema never runs them on the main thread.
import type { JsonSchema } from "../agent.js";
import { type PreparedArguments, parseToolCallArguments, prepareToolArguments } from "../pi/tool-arguments.js";
import { type PatternGuard, patternGuardFor } from "./pattern-guard.js";

// One guard per schema object (the run keeps its schema for as long as it runs).
const guards = new WeakMap<object, { guard?: PatternGuard }>();

/** `patternTimedOut`: a pattern ran past its bound; Pi, which has none, is stuck on the same string. */
export type GuardedArguments = PreparedArguments | { ok: false; reason: string; patternTimedOut: true };

export function prepareGuarded(schema: JsonSchema, argumentsJson: string): GuardedArguments {
  if (typeof schema === "object" && schema !== null) {
    let entry = guards.get(schema);
    if (!entry) guards.set(schema, (entry = { guard: patternGuardFor(schema) }));
    if (entry.guard) {
      const parsed = parseToolCallArguments(argumentsJson);
      const slow = parsed.ok ? entry.guard.check(parsed.value) : undefined;
      if (slow) return { ok: false, reason: `validation failed: ${slow}`, patternTimedOut: true };
    }
  }
  return prepareToolArguments(schema, argumentsJson);
}
