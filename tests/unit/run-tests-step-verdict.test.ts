// `npm test`'s verdict on one step (scripts/step-verdict.ts), from vitest's real output: a step
// vitest passed still fails the run when it ran nothing, when its set-up found no engine, or, on
// CI, when it skipped a test (review, session 37: `skipIf` guards that went wrong were green).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { countTests, filesWithSkips, type StepRun, stepProblem } from "../../scripts/step-verdict.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "step-verdict-"));
// The files written here import vitest as the project's tests do.
fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** vitest's own output for a test file written here (no colours: as npm test reads it, stripped). */
function vitestOutput(name: string, body: string): { status: number; out: string } {
  fs.writeFileSync(path.join(dir, name), `import { describe, expect, it } from "vitest";\n${body}\n`);
  const result = spawnSync(
    process.execPath,
    [path.join(ROOT, "node_modules/vitest/vitest.mjs"), "run", "--root", dir, name],
    { cwd: dir, encoding: "utf8", env: { ...process.env, FORCE_COLOR: "1", CI: "" }, timeout: 120_000 },
  );
  return { status: result.status ?? -1, out: `${result.stdout}` };
}

const base = { step: "integration", setupSkips: [], filtered: false, ci: true } satisfies Partial<StepRun>;

describe("npm test's verdict on a step", () => {
  it("on CI, a step that skipped tests (skipIf, runIf, todo) fails and names the file; elsewhere it passes", () => {
    const { status, out } = vitestOutput(
      "skips.test.ts",
      [
        `it("runs", () => expect(1 + 1).toBe(2));`,
        `describe.skipIf(true)("an engine suite", () => { it("a", () => expect(1).toBe(2)); it("b", () => expect(1).toBe(2)); });`,
        `it.runIf(false)("root only", () => expect(1).toBe(2));`,
        `it.todo("later");`,
      ].join("\n"),
    );
    expect(status).toBe(0);
    expect(countTests(out)).toEqual({ passed: 1, failed: 0, skipped: 4 });
    expect(filesWithSkips(out)).toEqual(["skips.test.ts"]);
    expect(stepProblem({ ...base, status, out })).toMatch(
      /^step integration skipped 4 tests on CI, which never skips \(skips\.test\.ts\)/,
    );
    expect(stepProblem({ ...base, status, out, ci: false })).toBeUndefined();
    // Filtered (a file, -t): the rest of the step is skipped by the user's own choice.
    expect(stepProblem({ ...base, status, out, filtered: true })).toBeUndefined();
  });

  it("a step whose every test ran passes on CI; one that ran none fails everywhere; a set-up without its engine fails", () => {
    const ran = vitestOutput("all.test.ts", `it("one", () => expect(1).toBe(1));\nit("two", () => expect(2).toBe(2));`);
    expect(countTests(ran.out)).toEqual({ passed: 2, failed: 0, skipped: 0 });
    expect(stepProblem({ ...base, ...ran })).toBeUndefined();

    const none = vitestOutput(
      "none.test.ts",
      `describe.skipIf(true)("suite", () => { it("a", () => expect(1).toBe(2)); });`,
    );
    expect(stepProblem({ ...base, ...none, ci: false })).toMatch(/^step integration ran no test \(1 skipped\)/);

    expect(stepProblem({ ...base, ...ran, setupSkips: ["integration: no Docker engine"] })).toMatch(
      /the engine tests did not run \(integration: no Docker engine\)/,
    );
  });

  it("a failing step is vitest's failure, not a second one of its own", () => {
    const failed = vitestOutput(
      "fails.test.ts",
      `it("fails", () => expect(1).toBe(2));\nit.skip("skipped", () => {});`,
    );
    expect(failed.status).not.toBe(0);
    expect(countTests(failed.out)).toEqual({ passed: 0, failed: 1, skipped: 1 });
    expect(stepProblem({ ...base, ...failed })).toBeUndefined();
  });
});
