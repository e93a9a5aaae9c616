// A prompt that looks like a command or an option is refused before anything starts (it would be a
// paid, workspace-writing run with SANDBOX_RUN_MODEL set); `--` still sends it as the prompt. And
// `help <not a command>` is a usage error, not the whole help with exit 0 (review, session 27: F4).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { refuseCommandLikePrompt } from "../../src/cli/command-typos.js";
import { runCliInProcess } from "../support/in-process-cli.js";

/** The CLI in-process; the provider key is set, so a prompt that got through would plan a run. */
function cli(argv: string[]) {
  return runCliInProcess(argv, {
    SANDBOX_RUN_MODEL: "anthropic/claude-sonnet-4-5",
    ANTHROPIC_API_KEY: "sk-ant-not-a-real-key",
  });
}

describe("a one-word prompt that names or nearly names a command or an option", () => {
  it.each([
    [["version"], "the option `--version`", "`sandbox-run --version`"],
    [["Version"], "the option `--version`", "`sandbox-run --version`"],
    [["verison"], "the option `--version`", "`sandbox-run --version`"],
    [["dry-run"], "the option `--dry-run`", "`sandbox-run --dry-run ...`"],
    [["model"], "the option `--model <provider/id>`", "`sandbox-run --model <provider/id> ...`"],
    [["policies"], "the command `sandbox-run policy`", "`sandbox-run policy`"],
    [["policies", "list"], "the command `sandbox-run policy list`", "`sandbox-run policy list`"],
    [["images"], "the command `sandbox-run image`", "`sandbox-run image`"],
    [["list"], "the command `sandbox-run policy list`", "`sandbox-run policy list`"],
    [["status"], "the command `sandbox-run doctor`", "`sandbox-run doctor`"],
    [["doctr"], "the command `sandbox-run doctor`", "`sandbox-run doctor`"],
    [["dcotro"], "the command `sandbox-run doctor`", "`sandbox-run doctor`"],
  ])("%j: exit 2 with the suggestion, and how to send it as the prompt; nothing planned", async (args, what, run) => {
    const result = await cli(["--dry-run", ...args]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`sandbox-run: "${args.join(" ")}" looks like ${what}, not a task.`);
    expect(result.stderr).toContain(run);
    expect(result.stderr).toContain(`\`sandbox-run -- ${args.join(" ")}\``);
  });

  it('"run": sandbox-run has no run command, the task is given to it directly', async () => {
    const result = await cli(["--dry-run", "run"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('"run" looks like a command, not a task');
    expect(result.stderr).toContain("`sandbox-run -- run`");
  });

  it("after `--` the same word is the prompt (the dry run plans it)", async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-typos-"));
    try {
      for (const word of ["version", "policies", "status", "run"]) {
        const result = await cli(["--dry-run", "--cwd", ws, "--", word]);
        expect(result.stderr).not.toContain("looks like");
        expect(result.code, result.stderr).toBe(0);
        expect(JSON.parse(result.stdout).runId).toMatch(/^[0-9a-f]{12}$/);
      }
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });

  it("words that only resemble a subcommand or a short option, and real tasks, stay prompts", () => {
    const commands = [
      { name: "policy", subcommands: ["list", "show"] },
      { name: "image", subcommands: ["build", "tag", "load", "prune"] },
      { name: "doctor", subcommands: [] },
      { name: "replay", subcommands: [], takesOperand: true },
    ];
    const options = [{ long: "--version" }, { long: "--json" }, { long: "--env", value: "<KEY=VALUE>" }];
    for (const prompt of [
      ["lint"],
      ["refactor"],
      // Two edits from `replay` but with another first letter: a task (review, session 37).
      ["deploy"],
      ["display"],
      ["end"],
      ["json", "output"],
      ["version", "bump"],
      ["fix", "the", "tests"],
    ])
      expect(() => refuseCommandLikePrompt(prompt, commands, prompt, options)).not.toThrow();
    expect(() => refuseCommandLikePrompt(["version"], commands, ["--", "version"], options)).not.toThrow();
    expect(() => refuseCommandLikePrompt(["json"], commands, ["json"], options)).toThrow(/the option `--json`/);
  });
});

describe("help of a command that does not exist", () => {
  it.each([
    [["help", "nope"], 'Unknown command "nope".'],
    [["help", "polcy"], 'Unknown command "polcy"; did you mean `sandbox-run help policy`?'],
    [["help", "image", "biuld"], 'Unknown command "image biuld"; did you mean `sandbox-run help image build`?'],
  ])("%j: exit 2, an error naming it, no help printed", async (args, message) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`sandbox-run: ${message}`);
  });

  it("help of a real command (and of help) still prints it, exit 0", async () => {
    for (const args of [
      ["help", "doctor"],
      ["help", "image", "build"],
      ["help", "completion", "bash"],
    ]) {
      const result = await cli(args);
      expect(result.code, args.join(" ")).toBe(0);
      expect(result.stdout, args.join(" ")).toContain("Usage: sandbox-run");
    }
  });
});
