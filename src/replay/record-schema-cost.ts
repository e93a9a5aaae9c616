// A record's schema is chosen by whoever wrote the record, and so is the result it is checked
// against (the recorded reply, up to 16 MiB). Regular expressions are tried in a time-bounded worker
// (run/pattern-guard.ts); what else makes validation cost far more than its bytes is the schema's
// shape: anyOf/oneOf over $refs that lead to more of them (a 2 KB schema of 20 such levels took the
// validators 16 s on `{"a":1}`, each level doubling it) and uniqueItems over objects or arrays
// (quadratic: 60,000 small items took 37 s). Replay refuses such a schema before anything runs.

/** Subschemas a schema may expand to, its $refs followed (each visit counts, as a validator's would). */
const MAX_EXPANDED = 20_000;
const SCALAR_TYPES = new Set(["string", "number", "integer", "boolean", "null"]);
const DATA_OR_DEFINITIONS = new Set(["$defs", "definitions", "$ref", "enum", "const", "examples", "default"]);
const SCHEMA_MAPS = new Set(["properties", "patternProperties", "dependentSchemas"]);
const SAME_VALUE_KEYWORDS = ["anyOf", "oneOf", "allOf", "if", "then", "else", "not", "dependentSchemas"];

/** Why validating against this schema could cost the host far more than its size, or undefined. */
export function recordSchemaCostProblem(schema: unknown): string | undefined {
  let expanded = 0;
  const refStack: string[] = [];
  /** Per $ref on refStack: whether an anyOf/oneOf lies between it and the current node. */
  const branchedSince: boolean[] = [];
  const resolve = (ref: string): unknown => {
    if (ref === "#") return schema;
    if (!ref.startsWith("#/")) return undefined;
    let at: unknown = schema;
    for (const raw of ref.slice(2).split("/")) {
      let key: string;
      try {
        key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      } catch {
        return undefined; // a malformed escape resolves to nothing (refused below)
      }
      if (at === null || typeof at !== "object") return undefined;
      at = (at as Record<string, unknown>)[key];
    }
    return at;
  };
  const walk = (node: unknown): string | undefined => {
    if (++expanded > MAX_EXPANDED)
      return `it expands to more than ${MAX_EXPANDED} subschemas once its $refs are followed (nested anyOf/oneOf over $refs cost a validator exponential time)`;
    if (Array.isArray(node)) {
      for (const item of node) {
        const problem = walk(item);
        if (problem) return problem;
      }
      return undefined;
    }
    if (node === null || typeof node !== "object") return undefined;
    const object = node as Record<string, unknown>;
    if (object.uniqueItems === true && !scalarItems(object.items))
      return "it asks for uniqueItems over items that are not all of one scalar type (a validator compares every pair)";
    // Keywords that apply more subschemas to the same value: on a recursive cycle through one of
    // them the work multiplies with every level (allOf of the same $ref four times: 4^depth).
    const branching = SAME_VALUE_KEYWORDS.some((key) => key in object);
    if (node !== schema && ("$id" in object || "id" in object || "$anchor" in object))
      return "it gives a subschema its own $id or $anchor, which moves where its $refs resolve (not followed here)";
    if (branching) for (let i = 0; i < branchedSince.length; i++) branchedSince[i] = true;
    for (const key of ["$dynamicRef", "$recursiveRef"])
      if (key in object) return `it uses ${key}, which this check does not follow`;
    if (typeof object.$ref === "string" && resolve(object.$ref) === undefined)
      return `its $ref ${JSON.stringify(String(object.$ref).slice(0, 80))} is not a local JSON pointer to a subschema (an $anchor or $id reference is not followed here)`;
    if (typeof object.$ref === "string") {
      const at = refStack.indexOf(object.$ref);
      if (at >= 0) {
        // Recursion: linear in the value's depth, unless a branch lies on the cycle.
        if (branchedSince.slice(at).some(Boolean) || branching)
          return `its $ref ${JSON.stringify(object.$ref.slice(0, 80))} recurses through anyOf, oneOf, allOf, if/then/else or not (a validator's time can grow exponentially with the value's depth)`;
      } else {
        refStack.push(object.$ref);
        branchedSince.push(false);
        const problem = walk(resolve(object.$ref));
        refStack.pop();
        branchedSince.pop();
        if (problem) return problem;
      }
    }
    for (const [key, value] of Object.entries(object)) {
      // Definitions count where a $ref reaches them, as a validator meets them; data is no schema.
      if (DATA_OR_DEFINITIONS.has(key)) continue;
      // A map of names to subschemas: every value is a schema, whatever its name ("default" too).
      const problem =
        SCHEMA_MAPS.has(key) && value !== null && typeof value === "object" && !Array.isArray(value)
          ? walk(Object.values(value))
          : walk(value);
      if (problem) return problem;
    }
    return undefined;
  };
  return walk(schema);
}

function scalarItems(items: unknown): boolean {
  if (items === null || typeof items !== "object" || Array.isArray(items)) return false;
  const type = (items as { type?: unknown }).type;
  return typeof type === "string" && SCALAR_TYPES.has(type);
}
