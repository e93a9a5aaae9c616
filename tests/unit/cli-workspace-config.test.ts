// Configuration the change under test controls (issue 10, item 10): a policy, models, schema or prompt
// file inside the workspace gets a warning, is refused in strict mode, and a models file in there
// never runs a command on the host. Checked with --dry-run, in-process; nothing reaches an engine.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-wsconf-")));
const ws = path.join(dir, "checkout");
fs.mkdirSync(ws);
const marker = path.join(dir, "command-ran");
const models = (apiKey: string) =>
  JSON.stringify({
    providers: {
      scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey, models: [{ id: "x" }] },
    },
  });
fs.writeFileSync(path.join(ws, "models.json"), models(`!touch ${marker} && echo sk-from-command`));
fs.writeFileSync(path.join(dir, "trusted-models.json"), models("sk-literal-key-0123456789"));
fs.writeFileSync(path.join(ws, "policy.json"), fs.readFileSync("policies/workspace-write.json"));
fs.writeFileSync(path.join(ws, "schema.json"), JSON.stringify({ type: "object", properties: {} }));
fs.writeFileSync(path.join(ws, "prompt.md"), "Review this change.\n");
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function cli(argv: string[], env: Record<string, string> = {}) {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    readStdin: async () => undefined,
    env: { DOCKER_HOST: "unix:///nonexistent/docker.sock", ...env },
    stderrIsTty: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

const base = ["--dry-run", "--cwd", ws, "--model", "scripted/x"];

describe("configuration from inside the workspace", () => {
  it("a policy, schema and prompt file in the workspace are warned about, naming each", async () => {
    const run = await cli([
      ...base,
      "--models",
      path.join(dir, "trusted-models.json"),
      "--policy",
      path.join(ws, "policy.json"),
      "--schema",
      path.join(ws, "schema.json"),
      "--prompt-file",
      path.join(ws, "prompt.md"),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const warnings = run.stderr.split("\n").filter((l) => l.startsWith("sandbox-run: warning: "));
    expect(warnings).toEqual([
      `sandbox-run: warning: the policy file ${ws}/policy.json lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's boundary`,
      `sandbox-run: warning: the schema file ${ws}/schema.json lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's schema`,
      `sandbox-run: warning: the prompt file ${ws}/prompt.md lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's prompt`,
    ]);
  });

  it("strict mode (--refuse-workspace-config, or the variable) refuses them with exit 2", async () => {
    const flag = await cli([
      ...base,
      "--models",
      path.join(dir, "trusted-models.json"),
      "--policy",
      path.join(ws, "policy.json"),
      "--refuse-workspace-config",
      "review",
    ]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(
      /^sandbox-run: Refusing configuration from inside the sandboxed trees: the policy file /,
    );
    expect(flag.stdout).toBe("");
    const env = await cli(
      [...base, "--models", path.join(dir, "trusted-models.json"), "--schema", path.join(ws, "schema.json"), "t"],
      {
        SANDBOX_RUN_REFUSE_WORKSPACE_CONFIG: "1",
      },
    );
    expect(env.code).toBe(2);
  });

  it("a models file inside the workspace never runs its !command, strict or not", async () => {
    const run = await cli([...base, "--models", path.join(ws, "models.json"), "review"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `sandbox-run: The models file ${ws}/models.json lies inside ${ws}, which this run sandboxes, and holds "!command" values: sandbox-run never runs commands from such a file.`,
    );
    expect(fs.existsSync(marker)).toBe(false);
  });
});
