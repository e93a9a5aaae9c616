// A workflow with two agent calls: a read-only triage that must return a structured finding, then a
// fix in a writable sandbox that is told exactly what the triage found. The workflow only knows the
// `AgentFunction` seam, so a test can run it against recorded runs (see triage-and-fix.test.ts)
// and production against a live model, with the same code.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { AgentFunction, JsonSchema } from "sandbox-run";

export interface Finding {
  test: string;
  file: string;
  cause: string;
}

const findingSchema: JsonSchema = {
  type: "object",
  properties: {
    test: { type: "string", description: "the failing test's name" },
    file: { type: "string", description: "the file that holds the bug, relative to the repository" },
    cause: { type: "string", description: "the cause, in one sentence" },
  },
  required: ["test", "file", "cause"],
  additionalProperties: false,
};

export async function triageAndFix(agent: AgentFunction, repo: string): Promise<{ finding: Finding; report: string }> {
  const finding = await agent<Finding>(
    "The test suite (`sh test.sh`) fails. Find the failing test and the cause. Do not change anything.",
    { cwd: repo, sandbox: "read-only", schema: findingSchema },
  );
  const report = await agent(
    `Fix this bug, then run \`sh test.sh\` and report the result.\nTest: ${finding.test}\nFile: ${finding.file}\nCause: ${finding.cause}`,
    { cwd: repo, sandbox: "workspace-write" },
  );
  return { finding, report };
}

/** The small repository the recordings were made on: one shell function with a bug, one test. */
export function demoRepo(): string {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-demo-repo-"));
  fs.writeFileSync(path.join(repo, "calc.sh"), "add() { echo $(( $1 - $2 )); }\n");
  fs.writeFileSync(
    path.join(repo, "test.sh"),
    '. ./calc.sh\nif [ "$(add 2 3)" = 5 ]; then echo "ok 1 add"; else echo "not ok 1 add: expected 5, got $(add 2 3)"; exit 1; fi\n',
  );
  return repo;
}

/** Where the recordings keep the repository inside the sandbox, so they do not depend on where it lies here. */
export const SANDBOX_REPO_PATH = "/workspace/demo-repo";
