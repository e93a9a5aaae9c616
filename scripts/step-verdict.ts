// What one step of `npm test` (scripts/run-tests.ts) reports, read from vitest's output, and the
// line that fails the run when the step "passed" without running what it should: its set-up found
// no engine, it ran no test at all (issue 18: never an "ok" with everything skipped), or, on CI, it
// skipped or left "todo" any test (review, session 37: a `skipIf` whose guard went wrong would
// have been a green CI run; CI never skips). With filters a step may match none.
import { stripVTControlCharacters } from "node:util";

export interface TestCounts {
  passed: number;
  failed: number;
  /** Skipped and todo tests together: neither was run. */
  skipped: number;
}

/** The counts of vitest's "Tests" lines (one per run; a step runs one). */
export function countTests(out: string): TestCounts {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const line of stripVTControlCharacters(out).split("\n")) {
    if (!/^\s+Tests\s+/.test(line)) continue;
    for (const [, n, what] of line.matchAll(/(\d+) (passed|failed|skipped|todo)/g))
      counts[what === "todo" ? "skipped" : (what as keyof TestCounts)] += Number(n);
  }
  return counts;
}

/** The test files vitest's file lines say skipped tests in ("✓ tests/x.test.ts (5 tests | 4 skipped)"). */
export function filesWithSkips(out: string): string[] {
  const files = new Set<string>();
  for (const line of stripVTControlCharacters(out).split("\n")) {
    const match = /^\s*[✓×↓❯]\s+(?:\|[^|]+\|\s+)?(\S+\.test\.ts)\s+\(\d+ tests?\s*\|.*\b\d+ (?:skipped|todo)\b/.exec(
      line,
    );
    if (match) files.add(match[1]!);
  }
  return [...files];
}

export interface StepRun {
  step: string;
  status: number;
  out: string;
  /** What the tests' global set-up reported skipping (no engine), one reason per project. */
  setupSkips: string[];
  /** Filters or test names were given: a step may match none, and skip the rest. */
  filtered: boolean;
  ci: boolean;
}

/** Why the step fails although vitest passed it, or undefined. */
export function stepProblem(run: StepRun): string | undefined {
  const counts = countTests(run.out);
  if (run.setupSkips.length > 0)
    return `step ${run.step}: the engine tests did not run (${run.setupSkips.join("; ")}); start the engine (./scripts/quickstart.sh) and run npm test again`;
  if (run.filtered || run.status !== 0) return undefined;
  if (counts.passed === 0 && counts.failed === 0)
    return `step ${run.step} ran no test (${counts.skipped} skipped): see the warnings in its output above`;
  if (run.ci && counts.skipped > 0) {
    const files = filesWithSkips(run.out);
    return `step ${run.step} skipped ${counts.skipped} test${counts.skipped === 1 ? "" : "s"} on CI, which never skips (${files.length > 0 ? files.join(", ") : "see its output above"}): a guard that should fail on CI skipped instead`;
  }
  return undefined;
}
