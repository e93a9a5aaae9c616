// `uniqueItems` costs the host's validators a comparison of every pair of items, on the controller's
// main thread, up to three times per result (the invalid-result watch, the outcome's confirmation,
// the final validation): 20,000 small objects (~250 KB of arguments) took 13-16 s a check, 100,000
// strings 21.5 s in pi-schema, which compares every pair whatever the items are (reviews, session
// 31), and no time bound can stop a synchronous check. So a value with an array of more items, in a
// result whose schema says `uniqueItems` anywhere, is refused before either validator sees it.
// Which array a uniqueItems applies to is not worked out (that is the validators' walk, $ref and
// all): any array of the value counts, so such a schema allows at most this many items an array.

/** Items one array may hold in a result whose schema uses uniqueItems (2,000 objects: ~0.2 s a check). */
export const MAX_UNIQUE_ITEMS = 2_000;

const schemaUses = new WeakMap<object, boolean>();

/** Why a value cannot be checked against the schema's uniqueItems in bounded time, or undefined. */
export function uniqueItemsProblem(schema: unknown, value: unknown): string | undefined {
  if (!usesUniqueItems(schema)) return undefined;
  const items = largestArray(value);
  if (items <= MAX_UNIQUE_ITEMS) return undefined;
  return `an array of ${items} items, in a result whose schema uses uniqueItems: at most ${MAX_UNIQUE_ITEMS} items an array can be checked (the validators compare every pair)`;
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

/** The most items any one array of the value holds (walked without recursion). */
function largestArray(value: unknown): number {
  let largest = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (Array.isArray(node)) {
      largest = Math.max(largest, node.length);
      for (const item of node) if (typeof item === "object" && item !== null) stack.push(item);
    } else for (const child of Object.values(node)) stack.push(child);
  }
  return largest;
}
