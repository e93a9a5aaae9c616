// The process's soft limit of open files (RLIMIT_NOFILE), read from /proc/self/limits (Node has no
// getrlimit). Caches of fds size themselves by it: a fixed 128 failed copy mode's apply with EMFILE
// under `ulimit -n 128` (review, session 32).
import fs from "node:fs";

let cached: number | undefined;

/** The soft limit, or Infinity where it cannot be read or is unlimited. */
export function openFilesLimit(): number {
  if (cached !== undefined) return cached;
  cached = Number.POSITIVE_INFINITY;
  try {
    const text = fs.readFileSync("/proc/self/limits", "utf8");
    const soft = /^Max open files\s+(\d+|unlimited)\s/m.exec(text)?.[1];
    if (soft && soft !== "unlimited") cached = Number(soft);
  } catch {
    // not Linux, or /proc is not there: no bound known
  }
  return cached;
}

/** A cache of fds may hold `wanted` of them, or a quarter of the limit where that is less (at least 8). */
export function fdBudget(wanted: number): number {
  return Math.max(8, Math.min(wanted, Math.floor(openFilesLimit() / 4)));
}
