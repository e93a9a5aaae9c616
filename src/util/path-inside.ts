import fs from "node:fs";
import path from "node:path";

/** Whether the absolute path `inner` is `outer` or lies below it (neither resolved here). */
export function atOrBelow(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
}

/** Whether two absolute trees share anything: one is the other, or lies inside it. */
export function treesOverlap(a: string, b: string): boolean {
  return atOrBelow(a, b) || atOrBelow(b, a);
}

/**
 * atOrBelow, and also by the folders' identity (device and inode) along `inner`'s ancestors: a bind
 * mount makes two paths one folder, and by their names alone TMPDIR reached through a bind mount
 * of the workspace passed for a folder outside it, so the sandbox held the run's own folder, its
 * lease and its hold (review, round 3, session 42). What does not exist is judged by name.
 */
export function atOrBelowOnDisk(inner: string, outer: string): boolean {
  if (atOrBelow(inner, outer)) return true;
  let target: fs.Stats;
  try {
    target = fs.statSync(outer);
  } catch {
    return false;
  }
  for (let dir = inner; ; dir = path.dirname(dir)) {
    try {
      const stat = fs.statSync(dir);
      if (stat.dev === target.dev && stat.ino === target.ino) return true;
    } catch {
      // not there (yet): its ancestors may still be the folder
    }
    if (dir === path.dirname(dir)) return false;
  }
}

/** treesOverlap, by identity too (atOrBelowOnDisk). */
export function treesOverlapOnDisk(a: string, b: string): boolean {
  return atOrBelowOnDisk(a, b) || atOrBelowOnDisk(b, a);
}
