/** Whether the absolute path `inner` is `outer` or lies below it (neither resolved here). */
export function atOrBelow(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
}

/** Whether two absolute trees share anything: one is the other, or lies inside it. */
export function treesOverlap(a: string, b: string): boolean {
  return atOrBelow(a, b) || atOrBelow(b, a);
}
