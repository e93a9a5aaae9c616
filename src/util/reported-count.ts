// A count from Pi's stream (tokens, cost), which code in the sandbox can write: usage is Pi's report
// of what it spent, not a measurement (docs/security.md, "What is not promised"). A negative,
// non-finite or absurdly large number there would lower or break the run's totals (review, session
// 44: -8,999,800 tokens and a cost of -123.45; two replies of 1.7e308 tokens summed to Infinity,
// `null` in --json).

/** The count as reported, or 0 where it is no finite number of at least 0; never past MAX_SAFE_INTEGER. */
export function reportedCount(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.min(value, Number.MAX_SAFE_INTEGER) : 0;
}

/** `total + value`, both reported counts, held to MAX_SAFE_INTEGER. */
export function addReported(total: number, value: number): number {
  return Math.min(total + reportedCount(value), Number.MAX_SAFE_INTEGER);
}
