/** Whether the absolute path `inner` is `outer` or lies below it (neither resolved here). */
export function atOrBelow(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
}
