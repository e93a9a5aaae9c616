// `npm test -- ...` (scripts/run-tests.ts): what it takes and what it runs for it. A file or a test
// name must never silently run the whole suite (review, session 27, F16).
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseRequest, plan, type Request } from "../../scripts/test-steps.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

function planOf(...argv: string[]) {
  const request = parseRequest(argv, ROOT);
  if ("error" in request) throw new Error(request.error);
  const planned = plan(request);
  if ("error" in planned) throw new Error(planned.error);
  return planned.map((p) => ({ step: p.step.name, args: p.args }));
}

function refusal(argv: string[], cwd = ROOT): string {
  const request = parseRequest(argv, cwd);
  if ("error" in request) return request.error;
  const planned = plan(request as Request);
  if ("error" in planned) return planned.error;
  throw new Error(`not refused: ${JSON.stringify(planned.map((p) => p.args))}`);
}

describe("npm test's arguments", () => {
  it("runs every step with none, and the steps --only names in the suite's order", () => {
    expect(planOf().map((p) => p.step)).toEqual(["unit", "integration", "modes", "lifecycle", "arm64"]);
    expect(planOf("--only=modes,unit").map((p) => p.step)).toEqual(["unit", "modes"]);
    expect(planOf("--only", "arm64").map((p) => p.step)).toEqual(["arm64"]);
    // No filters: no --passWithNoTests (a step that runs nothing fails).
    expect(planOf("--only=unit")[0]!.args).toEqual(["--project", "unit", "--maxWorkers=2", "--no-isolate"]);
  });

  it("runs a file in the step its folder names, with the file passed on to vitest", () => {
    expect(planOf("tests/unit/run-resolve-options.test.ts")).toEqual([
      {
        step: "unit",
        args: [
          "--project",
          "unit",
          "--maxWorkers=2",
          "--no-isolate",
          "tests/unit/run-resolve-options.test.ts",
          "--passWithNoTests",
        ],
      },
    ]);
    // Relative to where the command was typed (npm runs the script in the checkout: INIT_CWD).
    const request = parseRequest(["run-resolve-options.test.ts", "-t", "hand-back"], path.join(ROOT, "tests/unit"));
    expect(request).toEqual({ filters: ["tests/unit/run-resolve-options.test.ts"], names: ["hand-back"] });
    expect(planOf("tests/integration/cli-run.test.ts").map((p) => p.step)).toEqual(["integration"]);
    expect(planOf("tests/arm64").map((p) => p.step)).toEqual(["arm64"]);
    expect(planOf(path.join(ROOT, "tests/unit/run-resolve-options.test.ts"), "tests/arm64").map((p) => p.step)).toEqual(
      ["unit", "arm64"],
    );
  });

  it("narrows a step that names its files to the ones asked for, never adding the others", () => {
    const [lifecycle, ...rest] = planOf("tests/integration/security-lifecycle.test.ts");
    expect(rest).toEqual([]);
    expect(lifecycle!.step).toBe("lifecycle");
    expect(lifecycle!.args).toContain("tests/integration/security-lifecycle.test.ts");
    expect(lifecycle!.args).not.toContain("tests/integration/warm-lifecycle.test.ts");
    // --only=integration,lifecycle with a plain file: the lifecycle step has nothing of it to run.
    expect(planOf("--only=integration,lifecycle", "tests/integration/cli-run.test.ts").map((p) => p.step)).toEqual([
      "integration",
    ]);
  });

  it("passes -t on to the steps --only names", () => {
    for (const argv of [
      ["--only=unit", "-t", "hand-back"],
      ["--only=unit", "-t=hand-back"],
      ["--only=unit", "--testNamePattern=hand-back"],
    ])
      expect(planOf(...argv)[0]!.args.slice(-3)).toEqual(["-t", "hand-back", "--passWithNoTests"]);
  });

  it("refuses what it would otherwise drop, saying what to run instead", () => {
    for (const argv of [["--watch"], ["--project", "unit"], ["-u"]]) {
      const message = refusal(argv);
      expect(message).toMatch(new RegExp(`^npm test: it does not take ${argv[0]}\\n`));
      expect(message).toContain("npx vitest run --project unit tests/unit/run-resolve-options.test.ts");
      expect(message).toContain("npx vitest run --project integration");
    }
    expect(refusal(["-t", "hand-back"])).toMatch(
      /^npm test: -t runs in the steps named with --only \(e\.g\. npm test -- --only=unit -t "hand-back"\)/,
    );
    expect(refusal(["errors"])).toMatch(
      /^npm test: which steps should run errors\? Name them \(npm test -- --only=<steps> errors\)/,
    );
    expect(refusal(["--only=units"])).toMatch(
      /^npm test: unknown step in --only: units \(steps: unit, integration, modes, lifecycle, arm64\)/,
    );
    expect(refusal(["-t"])).toMatch(/^npm test: -t needs a value/);
  });
});
