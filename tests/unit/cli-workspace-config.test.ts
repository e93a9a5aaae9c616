// Configuration the change under test controls (issue 10, item 10): a policy, models, schema or prompt
// file inside the workspace gets a warning, is refused in strict mode, and a models file in there
// never runs a command on the host. Checked with --dry-run, in-process; nothing reaches an engine.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { runCliInProcess } from "../support/in-process-cli.js";

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
// An engines file in the workspace, its TLS files beside it (relative paths: resolved against it).
fs.mkdirSync(path.join(ws, "certs"));
for (const pem of ["ca.pem", "cert.pem", "key.pem"]) fs.writeFileSync(path.join(ws, "certs", pem), "not a real PEM\n");
fs.writeFileSync(
  path.join(ws, "engines.json"),
  JSON.stringify({ engines: [{ name: "far", host: "tcp://10.0.0.5:2376", tls: "certs", capacity: 1 }] }),
);
// One outside that names a socket inside: whoever answers there is the run's engine.
fs.writeFileSync(
  path.join(dir, "engines.json"),
  JSON.stringify({ engines: [{ name: "near", host: `unix://${ws}/docker.sock`, capacity: 1 }] }),
);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function cli(argv: string[], env: Record<string, string> = {}) {
  return runCliInProcess(argv, { DOCKER_HOST: "unix:///nonexistent/docker.sock", ...env });
}

const base = ["--dry-run", "--cwd", ws, "--model", "scripted/x"];

describe("configuration from inside the workspace", () => {
  it("a policy or models file in the workspace is refused by default (review: `cd repo && sandbox-run --policy policies/examples/npm-install.json` read the repository's file); a shipped example is named instead", async () => {
    const inside = await cli([
      ...base,
      "--models",
      path.join(dir, "trusted-models.json"),
      "--policy",
      path.join(ws, "policy.json"),
      "t",
    ]);
    expect(inside.code).toBe(2);
    expect(inside.stderr).toContain(
      `sandbox-run: Refusing configuration from inside the sandboxed trees: the policy file ${ws}/policy.json lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's boundary (mounts, network, secrets).`,
    );
    expect(inside.stderr).toMatch(/--allow-workspace-config/);
    expect(inside.stdout).toBe("");
    fs.writeFileSync(path.join(ws, "plain-models.json"), models("$SOME_KEY"));
    const modelsInside = await cli([...base, "--models", path.join(ws, "plain-models.json"), "t"]);
    expect(modelsInside.code).toBe(2);
    expect(modelsInside.stderr).toMatch(/chooses this run's models, and where your provider keys are sent/);
    // The hint fits what was refused: no built-in policy helps with a models file (review, session 31).
    expect(modelsInside.stderr).toContain("Read the file from a place the tree under test cannot change");
    expect(modelsInside.stderr).not.toContain("Name a policy");
    expect(inside.stderr).toContain("Name a policy that ships with sandbox-run");
    const example = await cli([
      ...base,
      "--models",
      path.join(dir, "trusted-models.json"),
      "--policy",
      "npm-install",
      "t",
    ]);
    expect(example.code, example.stderr).toBe(0);
    expect(JSON.parse(example.stdout).policyName).toBe("npm-install");
  });

  it("with --allow-workspace-config (or the variable) a policy, schema and prompt file in the workspace are warned about, naming each", async () => {
    const run = await cli([
      ...base,
      "--allow-workspace-config",
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
      `sandbox-run: warning: the policy file ${ws}/policy.json lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's boundary (mounts, network, secrets)`,
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

  it("an engines file in the workspace, and the files it names, are warned about; strict mode refuses them", async () => {
    const models = ["--models", path.join(dir, "trusted-models.json")];
    const refused = await cli([...base, ...models, "--engines", path.join(ws, "engines.json"), "review"]);
    expect(refused.code).toBe(2);
    const run = await cli([...base, ...models, "--engines", path.join(ws, "engines.json"), "review"], {
      SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG: "1",
    });
    expect(run.code, run.stderr).toBe(0);
    const warnings = run.stderr.split("\n").filter((l) => l.startsWith("sandbox-run: warning: "));
    const named = (pem: string) =>
      `sandbox-run: warning: the file ${ws}/certs/${pem}, which the engines file ${ws}/engines.json names, lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's engine`;
    expect(warnings).toEqual([
      `sandbox-run: warning: the engines file ${ws}/engines.json lies inside ${ws}, which this run sandboxes: whoever can change that tree chooses this run's engine`,
      named("ca.pem"),
      named("cert.pem"),
      named("key.pem"),
    ]);
    const strict = await cli([...base, ...models, "--refuse-workspace-config", "review"], {
      SANDBOX_RUN_ENGINES: path.join(dir, "engines.json"),
    });
    expect(strict.code).toBe(2);
    expect(strict.stderr).toContain(
      `sandbox-run: Refusing configuration from inside the sandboxed trees: the file ${ws}/docker.sock, which the engines file ${dir}/engines.json names, lies inside ${ws}`,
    );
  });

  it("the library's agent: an engines file in the workspace is refused in strict mode too", () => {
    const agent = new ContainerPiAgent({
      engines: path.join(ws, "engines.json"),
      model: "scripted/x",
      models: path.join(dir, "trusted-models.json"),
      refuseWorkspaceConfig: true,
      reapOrphans: false,
    });
    try {
      expect(() => agent.plan("review", { cwd: ws })).toThrow(
        `Refusing configuration from inside the sandboxed trees: the engines file ${ws}/engines.json lies inside ${ws}`,
      );
    } finally {
      void agent.close();
    }
  });

  it("a models file inside the workspace never runs its !command, strict or not", async () => {
    const run = await cli([...base, "--models", path.join(ws, "models.json"), "review"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `sandbox-run: The models file ${ws}/models.json lies inside ${ws}, which this run sandboxes, and holds "!command" values: sandbox-run never runs commands from such a file.`,
    );
    expect(fs.existsSync(marker)).toBe(false);
  });

  it("a prompt or schema file named in the workspace that links out of it is refused, strict or not: the tree picked the host file (review, session 35: /proc/self/environ became the prompt)", async () => {
    const trusted = path.join(dir, "trusted-models.json");
    fs.writeFileSync(path.join(dir, "host-notes.md"), "the host's own file\n");
    fs.symlinkSync(path.join(dir, "host-notes.md"), path.join(ws, "TASK.md"));
    fs.writeFileSync(path.join(dir, "host-schema.json"), JSON.stringify({ type: "object" }));
    fs.symlinkSync(path.join(dir, "host-schema.json"), path.join(ws, "linked-schema.json"));
    for (const strict of [[], ["--refuse-workspace-config"]]) {
      const prompt = await cli([...base, ...strict, "--models", trusted, "--prompt-file", path.join(ws, "TASK.md")]);
      expect(prompt.code).toBe(2);
      expect(prompt.stderr).toContain(
        `sandbox-run: The prompt file ${ws}/TASK.md lies inside ${ws}, which this run sandboxes, and leads out of it to ${dir}/host-notes.md: whoever`,
      );
      expect(prompt.stdout).toBe("");
      const schema = await cli([
        ...base,
        ...strict,
        "--models",
        trusted,
        "--schema",
        path.join(ws, "linked-schema.json"),
        "t",
      ]);
      expect(schema.code).toBe(2);
      expect(schema.stderr).toContain(`The schema file ${ws}/linked-schema.json lies inside ${ws}`);
    }
    // A folder on the way that links out (session 35's second review: only the file itself was judged).
    fs.mkdirSync(path.join(dir, "host-prompts"));
    fs.writeFileSync(path.join(dir, "host-prompts", "task.md"), "AWS_SECRET=from-the-host\n");
    fs.symlinkSync(path.join(dir, "host-prompts"), path.join(ws, "prompts"));
    const viaFolder = await cli([...base, "--models", trusted, "--prompt-file", path.join(ws, "prompts", "task.md")]);
    expect(viaFolder.code).toBe(2);
    expect(viaFolder.stderr).toContain(
      `sandbox-run: The prompt file ${ws}/prompts/task.md lies inside ${ws}, which this run sandboxes, and leads out of it through the link ${ws}/prompts to ${dir}/host-prompts/task.md: whoever`,
    );
    // A policy linked out is refused even where a policy from the tree would be allowed.
    fs.symlinkSync(path.resolve("policies/workspace-write.json"), path.join(ws, "linked-policy.json"));
    const policy = await cli([
      ...base,
      "--allow-workspace-config",
      "--models",
      trusted,
      "--policy",
      path.join(ws, "linked-policy.json"),
      "t",
    ]);
    expect(policy.code).toBe(2);
    expect(policy.stderr).toContain(`The policy file ${ws}/linked-policy.json lies inside ${ws}`);
    // The target named itself is what the caller may pass.
    const direct = await cli([...base, "--models", trusted, "--prompt-file", path.join(dir, "host-notes.md")]);
    expect(direct.code, direct.stderr).toBe(0);
  });

  it("a config file that is a FIFO, a device, a kernel file or too large is refused before it is read whole (review, session 35: /dev/zero grew the CLI without bound)", async () => {
    const trusted = path.join(dir, "trusted-models.json");
    const outside = path.join(dir, "odd");
    fs.mkdirSync(outside);
    fs.symlinkSync("/dev/zero", path.join(outside, "zero.json"));
    fs.symlinkSync("/proc/self/environ", path.join(outside, "environ.md"));
    execFileSync("mkfifo", [path.join(outside, "fifo.json")]);
    fs.writeFileSync(path.join(outside, "big.json"), Buffer.alloc(8 * 1024 * 1024 + 1, 32));
    const cases: Array<[string[], RegExp]> = [
      [
        ["--schema", path.join(outside, "zero.json"), "t"],
        /Cannot read the schema file .*zero\.json: it is not a regular file \(a device\)/,
      ],
      [
        ["--prompt-file", path.join(outside, "environ.md")],
        /Cannot read the prompt file .*environ\.md: it is \/proc\/\d+\/environ, a file of the kernel's/,
      ],
      [
        ["--schema", path.join(outside, "fifo.json"), "t"],
        /Cannot read the schema file .*fifo\.json: it is not a regular file \(a FIFO\)/,
      ],
      [
        ["--policy", path.join(outside, "big.json"), "t"],
        /Cannot read the policy file .*big\.json: it holds more than 8 MiB/,
      ],
    ];
    for (const [args, message] of cases) {
      const run = await cli([...base, "--models", trusted, ...args]);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(message);
    }
  });
});
