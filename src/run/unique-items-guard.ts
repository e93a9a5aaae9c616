// `uniqueItems` over objects or arrays costs Ajv and pi-schema a deep comparison of every pair of
// items, on the controller's main thread, up to three times per result (the invalid-result watch,
// the outcome's confirmation, the final validation): 20,000 small objects (~250 KB of arguments)
// took 13-16 s a check (review, session 31), and no time bound can stop a synchronous check. So a
// value with a larger array of objects or arrays, under a schema that says `uniqueItems` anywhere,
// is refused before either validator sees it. Arrays of strings, numbers and booleans are compared
// through a hash, in linear time, and are not bounded here.

/** Objects or arrays one array may hold under a uniqueItems schema (2,000: ~0.2 s a check). */
export const MAX_UNIQUE_COMPOUND_ITEMS = 2_000;

const schemaUses = new WeakMap<object, boolean>();

/** Why a value cannot be checked against the schema's uniqueItems in bounded time, or undefined. */
export function uniqueItemsProblem(schema: unknown, value: unknown): string | undefined {
  if (!usesUniqueItems(schema)) return undefined;
  const items = largestCompoundArray(value);
  if (items <= MAX_UNIQUE_COMPOUND_ITEMS) return undefined;
  return `an array of ${items} objects or arrays, under a schema with uniqueItems: at most ${MAX_UNIQUE_COMPOUND_ITEMS} can be checked (every pair is compared)`;
}

function usesUniqueItems(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  const known = schemaUses.get(schema);
  if (known !== undefined) return known;
  let found = false;
  const stack: unknown[] = [schema];
  const seen = new Set<object>();
  while (stack.length > 0 && !found) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null || seen.has(node)) continue;
    seen.add(node);
    if (!Array.isArray(node) && (node as Record<string, unknown>).uniqueItems === true) found = true;
    for (const child of Object.values(node)) stack.push(child);
  }
  schemaUses.set(schema, found);
  return found;
}

/** The most objects or arrays any one array of the value holds (walked without recursion). */
function largestCompoundArray(value: unknown): number {
  let largest = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (Array.isArray(node)) {
      let compound = 0;
      for (const item of node) {
        if (typeof item === "object" && item !== null) {
          compound++;
          stack.push(item);
        }
      }
      largest = Math.max(largest, compound);
    } else for (const child of Object.values(node)) stack.push(child);
  }
  return largest;
}
