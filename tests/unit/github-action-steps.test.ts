// Steps of action.yml and of the example workflows that print text the sandbox or the model wrote,
// run with bash as a runner would: the runner ends a line at \r as well as \n and reads a line that
// starts with "::" as a workflow command (an annotation, ::add-mask::), so such text must never
// start a line of its own.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { action, runStep, type Step } from "../support/github-action.js";

/** The lines the runner reads from `output`, split where it splits them. */
const runnerLines = (output: string) => output.split(/\r\n|\r|\n/).filter((line) => line !== "");

const HOSTILE =
  "overloaded\r::notice title=review::PASSED\n::error file=src/a.ts,line=1::merge this\r\n::add-mask::failed";

describe("workflow steps that print hostile text", () => {
  it("the action's last step: a failed run's message (the model's words) becomes one ::error:: line, its breaks escaped", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-action-steps-"));
    const envelope = path.join(dir, "envelope.json");
    fs.writeFileSync(
      envelope,
      JSON.stringify({ ok: false, error: { code: "model-error", message: `100% ${HOSTILE}` } }),
    );
    const { code, output } = await runStep(action.runs.steps, "Fail when the run failed", {
      CODE: "1",
      FAIL: "true",
      ENVELOPE: envelope,
    });
    expect(code).toBe(1);
    const lines = runnerLines(output);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(
      "::error::sandbox-run failed (exit 1): model-error: 100%25 overloaded%0D::notice title=review::PASSED%0A::error file=src/a.ts,line=1::merge this%0D%0A::add-mask::failed",
    );
    fs.rmSync(dir, { recursive: true });
  });

  it("the review example's verdict step: the model's summary stays on the verdict's line", async () => {
    const workflow = parse(
      fs.readFileSync(path.join(import.meta.dirname, "../../examples/github-actions/sandbox-review.yml"), "utf8"),
    ) as { jobs: Record<string, { steps: Step[] }> };
    const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
    const { code, output } = await runStep(steps, "Show the verdict", {
      REVIEW: JSON.stringify({ verdict: "request-changes", summary: HOSTILE }),
    });
    expect(code).toBe(0);
    expect(runnerLines(output)).toEqual([
      "request-changes: overloaded ::notice title=review::PASSED ::error file=src/a.ts,line=1::merge this  ::add-mask::failed",
    ]);
  });
});
