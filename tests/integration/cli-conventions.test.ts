// The command line as people type it, through the built CLI: a mistyped command is never taken as
// a (paid) prompt, `help` and shell completion work, --json prints an envelope for usage errors
// too, --dry-run shows an allow-list's hosts, `doctor --models` checks a custom provider without
// printing its key, and a model that hangs ends in a timeout that says the run was waiting on it.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  builtCli,
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  type ProcessResult,
  runBuiltCli,
} from "../support/harness.js";

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-conventions-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** No engine behind DOCKER_HOST: a command that reaches for one exits 3. A paid-run set-up otherwise. */
const noEngine = {
  PATH: process.env.PATH ?? "",
  HOME: process.env.HOME ?? "",
  DOCKER_HOST: `unix://${path.join(scratch, "no-engine.sock")}`,
  SANDBOX_RUN_MODEL: "anthropic/claude-sonnet-4-5",
  ANTHROPIC_API_KEY: "sk-ant-not-a-real-key",
};

const cli = (args: string[], env: Record<string, string> = noEngine, cwd = scratch): Promise<ProcessResult> =>
  runBuiltCli(args, { env, cwd });

describe("a mistyped command is not a prompt", () => {
  it.each([
    [["doctr"], "sandbox-run doctor"],
    [["Doctor"], "sandbox-run doctor"],
    [["imag", "build"], "sandbox-run image build"],
    [["polcy", "list"], "sandbox-run policy list"],
    [["complition"], "sandbox-run completion"],
    [["hlep"], "sandbox-run help"],
    [["complition", "bash"], "sandbox-run completion bash"],
    [["replai", "records/review"], "sandbox-run replay records/review"],
  ])("%j: exit 2 naming the command (and how to send it as a prompt), no run", async (args, command) => {
    const run = await cli(args);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(`looks like the command \`${command}\``);
    expect(run.stderr).toContain(`sandbox-run -- ${args.join(" ")}`);
  });

  it("`--` sends the same words as the prompt: the run starts (and stops at the missing engine, exit 3)", async () => {
    const run = await cli(["--", "doctr"]);
    expect(run.status).toBe(3);
    expect(run.stderr).toMatch(/not reachable/);
  });

  it("a one-word prompt that is no command's near miss is a prompt", async () => {
    const run = await cli(["refactor"]);
    expect(run.status).toBe(3);
  });
});

describe("help", () => {
  it("`help` prints the usage, `help <command>` the command's", async () => {
    const top = await cli(["help"]);
    expect(top.status).toBe(0);
    expect(top.stdout).toContain("Usage: sandbox-run [options] [command] [prompt...]");
    expect(top.stdout).toContain("completion <shell>");
    const doctor = await cli(["help", "doctor"]);
    expect(doctor.status).toBe(0);
    expect(doctor.stdout).toContain("Usage: sandbox-run doctor");
    expect(doctor.stdout).toContain("--models <file>");
  });
});

describe("--json with a usage error", () => {
  it.each([
    [["--json", "--frobnicate", "task"], /Unknown option '--frobnicate'\./],
    [["--json", "doctr"], /looks like the command `sandbox-run doctor`/],
    [["--json", "--timeout", "soon", "task"], /--timeout must be a positive number/],
    [["--json"], /No prompt given/],
  ])("%j: exit 2, the message on stderr and one envelope on stdout", async (args, message) => {
    const run = await cli(args);
    expect(run.status).toBe(2);
    const envelope = JSON.parse(run.stdout);
    expect(envelope).toMatchObject({ ok: false, result: null, exitCode: 2, runId: null });
    expect(envelope.error.code).toBe("usage");
    expect(envelope.error.message).toMatch(message);
    expect(envelope.error).not.toHaveProperty("exitCode");
    expect(run.stderr).toMatch(message);
  });

  it("without --json a usage error prints nothing on stdout", async () => {
    const run = await cli(["--frobnicate", "task"]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
  });
});

describe("shell completion", () => {
  let bashScript: string;
  const completionWorkspace = makeWorkspace({ "review.schema.json": "{}", "notes.txt": "" });

  beforeAll(async () => {
    const run = await cli(["completion", "bash"]);
    expect(run.status).toBe(0);
    bashScript = path.join(scratch, "sandbox-run.bash");
    fs.writeFileSync(bashScript, run.stdout);
  });

  /** What bash completes for the words (the last one being completed), with the generated script sourced. */
  function complete(words: string[]): string[] {
    const quoted = words.map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(" ");
    const script = `source '${bashScript}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _sandbox_run; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const result = spawnSync("bash", ["--norc", "-c", script], { cwd: completionWorkspace, encoding: "utf8" });
    expect(result.status, result.stderr).toBe(0);
    return result.stdout.split("\n").filter(Boolean).sort();
  }

  it("bash: commands, subcommands, flags of the command being typed, files for flags that take one", () => {
    expect(complete(["sandbox-run", ""])).toEqual(
      ["batch", "completion", "demo", "doctor", "gc", "help", "image", "policy", "replay", "show"].sort(),
    );
    expect(complete(["sandbox-run", "doc"])).toEqual(["doctor"]);
    expect(complete(["sandbox-run", "image", ""])).toEqual(["build", "help", "load", "prune", "tag"]);
    expect(complete(["sandbox-run", "--sch"])).toEqual(["--schema"]);
    expect(complete(["sandbox-run", "doctor", "--mod"])).toEqual(["--model", "--models"]);
    expect(complete(["sandbox-run", "image", "build", "--b"])).toEqual(["--base"]);
    expect(complete(["sandbox-run", "--schema", "rev"])).toEqual(["review.schema.json"]);
    // A flag's value is skipped: after `--model x` the command's flags come again.
    expect(complete(["sandbox-run", "--model", "x", "--dry"])).toEqual(["--dry-run"]);
    // After `--` everything is the prompt.
    expect(complete(["sandbox-run", "--", "doc"])).toEqual([]);
  });

  it("zsh (through bashcompinit) and fish scripts come from the same definitions", async () => {
    const zsh = await cli(["completion", "zsh"]);
    expect(zsh.status).toBe(0);
    expect(zsh.stdout.split("\n")[0]).toBe("#compdef sandbox-run");
    expect(zsh.stdout).toContain("bashcompinit");
    expect(zsh.stdout).toContain("complete -o default -o bashdefault -F _sandbox_run sandbox-run");
    const fish = await cli(["completion", "fish"]);
    expect(fish.status).toBe(0);
    expect(fish.stdout).toContain("complete -c sandbox-run -n '__fish_use_subcommand' -a 'doctor'");
    expect(fish.stdout).toMatch(
      /-n '__fish_seen_subcommand_from image; and not __fish_seen_subcommand_from [^']*build[^']*' -a 'build'/,
    );
    expect(fish.stdout).toMatch(/__fish_seen_subcommand_from doctor' -l models -r -F/);
  });

  it("an unknown shell is a usage error", async () => {
    const run = await cli(["completion", "powershell"]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("bash, zsh, fish");
  });
});

describe("--dry-run with an allow-list policy", () => {
  it("lists the hosts the egress proxy lets through (the container's own network stays none)", async () => {
    const ws = makeWorkspace();
    const policy = path.resolve(import.meta.dirname, "../../policies/examples/npm-install.json");
    const run = await cli(["--dry-run", "--cwd", ws, "--policy", policy, "task"]);
    expect(run.status, run.stderr).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect(plan.network).toBe("none");
    expect(plan.egress).toEqual({
      mode: "allowlist",
      via: "egress proxy on the host",
      ports: [80, 443],
      allowedDomains: ["registry.npmjs.org"],
    });
    const none = JSON.parse((await cli(["--dry-run", "--cwd", ws, "task"])).stdout);
    expect(none.egress).toEqual({ mode: "none" });
  });
});

describe("doctor --models", () => {
  const KEY = "sk-local-SECRET-d41d8c";
  let up: http.Server;
  let upUrl: string;

  beforeAll(async () => {
    up = http.createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => up.listen(0, "127.0.0.1", resolve));
    upUrl = `http://127.0.0.1:${(up.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    await new Promise((resolve) => up.close(resolve));
  });

  function modelsFile(dir: string, providers: Record<string, unknown>): string {
    const file = path.join(dir, "models.json");
    fs.writeFileSync(file, JSON.stringify({ providers }));
    return file;
  }

  it("checks each custom provider's baseUrl from this host and its key source, never printing the key", async () => {
    const dir = fs.mkdtempSync(path.join(scratch, "models-"));
    const marker = path.join(dir, "command-ran");
    const file = modelsFile(dir, {
      local: { baseUrl: upUrl, api: "openai-completions", apiKey: "$LOCAL_KEY", models: [{ id: "m" }] },
      down: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "$DOWN_KEY", models: [{ id: "m" }] },
      vault: {
        baseUrl: upUrl,
        api: "openai-completions",
        apiKey: `!touch '${marker}'; echo ${KEY}`,
        models: [{ id: "m" }],
      },
    });
    // Run from another folder: the models file is not inside the current directory.
    const run = await cli(
      ["doctor", "--models", file, "--model", "local/m"],
      { ...noEngine, LOCAL_KEY: KEY },
      makeWorkspace(),
    );
    // The engine is missing too (exit 3); every check still ran.
    expect(run.status).toBe(3);
    expect(run.stderr).toContain(`ok    provider local: ${upUrl} answers from this host (HTTP 404)`);
    expect(run.stderr).toContain("ok    providers.local.apiKey resolves (from $LOCAL_KEY");
    expect(run.stderr).toMatch(
      /FAIL {2}provider down: http:\/\/127\.0\.0\.1:9\/v1 does not answer from this host \(ECONNREFUSED\)/,
    );
    expect(run.stderr).toContain(
      "FAIL  providers.down.apiKey does not resolve: environment variable DOWN_KEY is not set",
    );
    // A models file outside the current directory: its command runs, as a run's would.
    expect(run.stderr).toContain("ok    providers.vault.apiKey resolves (from a command");
    expect(fs.existsSync(marker)).toBe(true);
    expect(run.stderr).toContain("ok    credentials for local/m are available");
    expect(`${run.stdout}${run.stderr}`).not.toContain(KEY);

    // The model's provider key does not resolve: one FAIL for it, not the file's and the model's
    // (review, session 37); an unset ANTHROPIC_API_KEY with an anthropic model: the FAIL, no note.
    const down = await cli(["doctor", "--models", file, "--model", "down/m"], noEngine, makeWorkspace());
    const fails = down.stderr.split("\n").filter((line) => line.startsWith("  FAIL"));
    expect(
      fails.filter((line) => line.includes("providers.down.apiKey")),
      down.stderr,
    ).toEqual(["  FAIL  providers.down.apiKey does not resolve: environment variable DOWN_KEY is not set"]);
    const { ANTHROPIC_API_KEY: _set, ...noKey } = noEngine;
    const anthropic = await cli(["doctor", "--model", "anthropic/claude-sonnet-4-5"], noKey, makeWorkspace());
    expect(anthropic.stderr).toContain('FAIL  No API key for provider "anthropic"');
    expect(anthropic.stderr).not.toContain("ANTHROPIC_API_KEY is not set");
    expect(anthropic.stderr).toContain("note  OPENAI_API_KEY is not set");
  });

  it("runs no command of a models file inside the current directory (a run's workspace), like a run", async () => {
    const ws = makeWorkspace();
    const marker = path.join(scratch, `must-not-exist-${Date.now()}`);
    const file = modelsFile(ws, {
      vault: { baseUrl: upUrl, api: "openai-completions", apiKey: `!touch '${marker}'; echo x`, models: [{ id: "m" }] },
    });
    const run = await cli(["doctor", "--models", file], noEngine, ws);
    expect(run.stderr).toContain("FAIL  providers.vault.apiKey comes from a command");
    expect(fs.existsSync(marker)).toBe(false);
  });
});

describe.skipIf(!dockerAvailable())("a model server that hangs", () => {
  it("ends in exit 124 whose message says the run was waiting for the model's reply", async () => {
    const silent = http.createServer((req) => req.resume());
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const dir = fs.mkdtempSync(path.join(scratch, "hang-"));
      const models = path.join(dir, "models.json");
      fs.writeFileSync(
        models,
        JSON.stringify({
          providers: {
            stuck: { baseUrl: `${origin}/v1`, api: "openai-completions", apiKey: "k", models: [{ id: "m" }] },
          },
        }),
      );
      const ws = makeWorkspace();
      const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" };
      // 20 s: the container's and Pi's start must fit in it before the request is open, and in a
      // full suite on two cores they once took over 8 s (the message then had no request to name).
      const run = await runBuiltCli(
        ["-q", "--json", "--cwd", ws, "--models", models, "--model", "stuck/m", "--timeout", "20", "Say hello."],
        { env: { ...process.env, ...env } },
      );
      expect(run.status, run.stderr).toBe(124);
      const envelope = JSON.parse(run.stdout);
      expect(envelope.exitCode).toBe(124);
      expect(envelope.error.code).toBe("timeout");
      expect(envelope.error.message).toMatch(
        new RegExp(
          `^The run did not finish within 20 s: it was waiting for the model's reply \\(a request to ${origin.replace(/\./g, "\\.")} open for [\\d.]+ s\\)\\.$`,
        ),
      );
      expect(envelope.error.hint).toMatch(/model did not answer in time/);
      expect(run.stderr).toContain("waiting for the model's reply");
      expect(await containersOfRuns([envelope.runId])).toEqual([]);
    } finally {
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe.skipIf(!dockerAvailable())("a workspace whose configs name more paths than a run protects", () => {
  it.each(["bind", "copy"])(
    "%s mode: exit 2 before any container, with the file named and what to do; the tree keeps its owners and nothing is left",
    async (mode) => {
      // 10,001 vendor/bin folders: past a file's budget (a committed .envrc of 10,000, each folder
      // then guarding every host command name as a path, once took the controller to a 4.4 GB heap
      // abort, and a root caller's tree stayed lent to the sandbox's uid).
      const ws = makeWorkspace({
        ".envrc": `${Array.from({ length: 10_001 }, (_, i) => `PATH_add p${i}/vendor/bin`).join("\n")}\n`,
      });
      const owners = () => [ws, path.join(ws, ".envrc")].map((p) => `${fs.statSync(p).uid}:${fs.statSync(p).gid}`);
      const before = owners();
      const dir = fs.mkdtempSync(path.join(scratch, "budget-"));
      const models = path.join(dir, "models.json");
      fs.writeFileSync(
        models,
        JSON.stringify({
          providers: {
            p: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] },
          },
        }),
      );
      const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" };
      const run = await runBuiltCli(
        ["-q", "--json", "--cwd", ws, "--workspace", mode, "--models", models, "--model", "p/m", "Say hello."],
        { env: { ...process.env, ...env } },
      );
      expect(run.status, run.stderr).toBe(2);
      const envelope = JSON.parse(run.stdout);
      expect(envelope.error.code).toBe("usage");
      expect(envelope.error.message).toMatch(
        /\.envrc names more than 10000 paths to run, load or put on PATH\. Nothing was started\.$/,
      );
      expect(envelope.error.hint).toContain('disableBuiltinProtections: ["git-config-paths"]');
      expect(run.stderr).not.toMatch(/\n\s+at /);
      expect(owners()).toEqual(before);
      expect(await containersOfRuns([envelope.runId])).toEqual([]);
    },
  );
});

// The built CLI is what these run: make sure it is there (npm run build) rather than fail obscurely.
it("runs the built CLI", () => {
  expect(fs.existsSync(builtCli)).toBe(true);
});

// Review, session 34: under `ulimit -n 40` Node's own EMFILE stack trace came out of the CLI's module
// loading; at 40-56 "unexpected error ... This is a bug".
describe("a process with few open files", () => {
  it("is told the limit and what to raise it to, before anything loads (exit 2)", () => {
    const run = spawnSync("bash", ["-c", `ulimit -n 40 && exec "${process.execPath}" "${builtCli}" --version`], {
      encoding: "utf8",
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(
      "sandbox-run: this process may open only 40 files (ulimit -n); sandbox-run needs at least 64, and 1024 or more for large workspaces and batches.\n  Raise the limit (`ulimit -n 1024`) and run again.\n",
    );
  });
});

describe("a shell whose folder was removed", () => {
  it("is told to cd into a folder that exists (exit 2), not that sandbox-run has a bug (review, session 34)", () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-gone-cwd-"));
    try {
      const run = spawnSync(
        "bash",
        [
          "-c",
          `mkdir gone && cd gone && rmdir ../gone && exec "${process.execPath}" "${builtCli}" --dry-run --model openai/x "hi"`,
        ],
        { cwd: parent, encoding: "utf8", env: { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-test" } },
      );
      expect(run.status, run.stderr).toBe(2);
      expect(run.stderr).toContain("sandbox-run: the current folder no longer exists");
      expect(run.stderr).not.toContain("bug");
    } finally {
      fs.rmSync(parent, { recursive: true, force: true });
    }
  });
});
