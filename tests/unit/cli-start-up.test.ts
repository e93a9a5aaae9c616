// What the CLI loads before it does anything: `--version` and `--help` load commander and the
// program's own small modules; `--dry-run` with a built-in policy plans without the agent, the
// engines (dockerode, ssh2), the gateway's servers and codecs, zod, Ajv or pi-schema. This is the
// start-up cost every call pays (bench: `npm run bench -- --only=cli-start`); the test fails when an
// eager import comes back. It runs the CLI from source (tsx) with a module tracer
// (tests/support/module-trace.mjs) and reads which modules and packages were loaded: no timing.
// The last test counts the files and bytes of the bundled CLI (scripts/bundle-cli.mjs) a --dry-run
// loads: the package list and the deny-list let the project's own modules grow unnoticed (review,
// session 37: 52 files and 469 KiB, from 29 and 301 KiB, and 2.4x a bare Node's CPU).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { makeWorkspace, type ProcessResult, runProcess, runSourceCli } from "../support/harness.js";

const repo = path.resolve(import.meta.dirname, "../..");
const tracer = pathToFileURL(path.join(repo, "tests/support/module-trace.mjs")).href;

interface Loaded {
  /** Our own modules, relative to the repository: "src/cli/program.ts". */
  own: string[];
  /** Packages: "commander", "zod", "@earendil-works/pi-schema". */
  packages: string[];
  run: ProcessResult;
}

/** The environment of a traced CLI process, which writes its trace into `trace`. */
function tracedEnv(trace: string, env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    // The tracer's hooks see what tsx's resolve to (the .ts files).
    NODE_OPTIONS: `--import ${tracer}`,
    SANDBOX_RUN_MODULE_TRACE: trace,
    DOCKER_HOST: "unix:///nonexistent/docker.sock",
    ...env,
  };
}

function newTraceFile(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-trace-")), "modules");
}

/** Node's own modules a traced process loaded on its main thread ("child_process", "net"). */
function tracedBuiltins(trace: string): string[] {
  const lines = fs.existsSync(trace) ? fs.readFileSync(trace, "utf8").trim().split("\n") : [];
  return lines.filter((line) => line.startsWith("builtin ")).map((line) => line.slice("builtin ".length));
}

/**
 * Node modules a call that only plans or answers --version never needs (commander and the plan path
 * load `child_process` at its first use: util/lazy-builtins.ts, bundle-cli.mjs). Not `net`: Node
 * loads it itself for a stdout or stderr that is a pipe or a terminal.
 */
const NOT_AT_START_UP = ["child_process", "dgram"];

/** The files a traced process loaded: ES modules as resolved, CommonJS ones as required. */
function tracedFiles(trace: string): string[] {
  const lines = fs.existsSync(trace) ? fs.readFileSync(trace, "utf8").trim().split("\n") : [];
  return lines
    .filter((line) => !line.startsWith("builtin "))
    .map((line) => {
      const [kind, where] = [line.slice(0, 3), line.slice(4)];
      return kind === "esm" ? fileURLToPath(where) : where;
    });
}

async function loadedBy(args: string[], env: Record<string, string> = {}): Promise<Loaded> {
  const trace = newTraceFile();
  const run = await runSourceCli(args, { env: tracedEnv(trace, env) });
  const files = tracedFiles(trace);
  const own = new Set<string>();
  const packages = new Set<string>();
  for (const file of files) {
    const inModules = file.split(`${path.sep}node_modules${path.sep}`);
    if (inModules.length > 1) {
      const parts = inModules.at(-1)!.split(path.sep);
      packages.add(parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!);
    } else if (file.startsWith(repo)) own.add(path.relative(repo, file));
  }
  // tsx (the source runner) and the tracer itself are the test's, not the CLI's.
  for (const infrastructure of ["tsx", "get-tsconfig", "resolve-pkg-maps", "esbuild"]) packages.delete(infrastructure);
  own.delete("tests/support/module-trace.mjs");
  return { own: [...own].sort(), packages: [...packages].sort(), run };
}

/**
 * The modules --version and --help may load: the program, its io and error reporting, the version
 * facts, and the library's operations face (operations.ts) with the few small modules it hands on.
 */
const START_UP =
  /^src\/(cli\/[a-z-]+\.ts|errors\.ts|sandbox-contract\.ts|util\/[a-z-]+\.ts|operations\.ts|image\/runner-image\.ts|run\/plan\/held-trees\.ts|run\/record-outcome\.ts)$/;
/** The commands' own modules, and the library operations they call, loaded when their command runs. */
const ACTIONS =
  /^src\/(cli\/((run|replay|gc|image|policy|doctor|demo|show|batch)-command|completion)\.ts$|operations\/)/;
/** What a plan never needs: running containers, the servers a run starts, records, replays. */
const NOT_FOR_A_PLAN = [
  /^src\/container-pi-agent\.ts$/,
  // engine-endpoint (which engine DOCKER_HOST names) and engine-kind (what an engine's docker info
  // says it is: a pure reading of data) are planning; the rest of engine/ talks to engines.
  /^src\/engine\/(?!(engine-endpoint|engine-kind)\.ts$)/,
  /^src\/gateway\/(apis\/|model-gateway|request-handler|forward-request|exchange-tap|conversation-ledger)/,
  /^src\/proxy\/(egress-proxy|tls-terminator|run-ca|tunnel|upstream-client|der)/,
  /^src\/run\/(execute-run|supervise-run|run-services|run-egress|run-workspace|pi-stream|copy-mode\/|open-run-record)/,
  /^src\/(replay|record|relay\/relay-session|scripted-model|demo|image\/(build|ensure|copy|prune))/,
  /^src\/(workspace-transfer\/(?!staging-record\.ts$)|workspace\/(workspace-watch|workspace-snapshot|ownership-lease))/,
];

/**
 * What a --dry-run with a built-in policy may load of the bundled CLI (its chunks): Node spends
 * ~0.5 ms of CPU on each file it resolves, reads and links, more for its imports and bytes, and a
 * --dry-run is to stay within 2x a bare Node (docs/performance.md). Measured 8 files and 405 KiB
 * (session 38, scripts/chunk-groups.mjs; before, 51 files and 422 KiB: esbuild's split bundle made
 * one chunk per set of lazy entry points sharing a module). A new need may raise these: say why,
 * with the bench's cli-start ratios (`npm run bench -- --only=cli-start`).
 */
const DRY_RUN_BUDGET = { files: 10, bytes: 420 * 1024 };

describe("what the CLI loads at start-up", () => {
  it.each([["--version"], ["--help"], ["help"], ["image", "--help"]])(
    "%s loads commander and the program's own start-up modules, nothing else",
    async (...args) => {
      const loaded = await loadedBy(args);
      expect(loaded.run.status, loaded.run.stderr).toBe(0);
      expect(loaded.own).toContain("src/cli/program.ts");
      expect(loaded.packages).toEqual(["commander"]);
      expect(loaded.own.filter((file) => !START_UP.test(file))).toEqual([]);
      // No command's action module: they load when their command runs.
      expect(loaded.own.filter((file) => ACTIONS.test(file))).toEqual([]);
    },
  );

  it("--dry-run with a built-in policy plans without the agent, engines, servers, zod, Ajv or pi-schema", async () => {
    const ws = makeWorkspace();
    const loaded = await loadedBy(["--dry-run", "--cwd", ws, "--model", "anthropic/claude-sonnet-4-5", "task"], {
      ANTHROPIC_API_KEY: "sk-not-a-key",
    });
    expect(loaded.run.status, loaded.run.stderr).toBe(0);
    expect(JSON.parse(loaded.run.stdout).policyName).toBe("workspace-write");
    expect(loaded.own).toContain("src/run/plan/plan-call.ts");
    expect(loaded.packages).toEqual(["commander"]);
    expect(loaded.own.filter((file) => NOT_FOR_A_PLAN.some((re) => re.test(file)))).toEqual([]);
  });

  it("--dry-run with a built-in policy loads at most DRY_RUN_BUDGET of the bundled CLI, and neither child_process nor dgram (nor do --version and --help)", async () => {
    // Bundled from the sources as `npm run build` bundles them (no build needed), two levels below
    // the root like dist/cli, so the bundle finds policies/ and package.json as there.
    const out = path.join(repo, ".test-build", `${process.pid}-cli-start-up`);
    try {
      execFileSync(process.execPath, [path.join(repo, "scripts/bundle-cli.mjs"), out], { stdio: "pipe" });
      const trace = newTraceFile();
      const args = ["--dry-run", "--cwd", makeWorkspace(), "--model", "anthropic/claude-sonnet-4-5", "task"];
      const run = await runProcess(process.execPath, [path.join(out, "main.js"), ...args], {
        env: tracedEnv(trace, { ANTHROPIC_API_KEY: "sk-not-a-key" }),
      });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).policyName).toBe("workspace-write");
      const own = [...new Set(tracedFiles(trace).filter((file) => path.dirname(file) === out))];
      expect(own).toContain(path.join(out, "main.js"));
      const sizes = own.map((file) => fs.statSync(file).size);
      const bytes = sizes.reduce((sum, size) => sum + size, 0);
      const listing = own.map((file, i) => `${sizes[i]} ${path.basename(file)}`).join("\n");
      expect(own.length, `files loaded:\n${listing}`).toBeLessThanOrEqual(DRY_RUN_BUDGET.files);
      expect(bytes, `bytes loaded:\n${listing}`).toBeLessThanOrEqual(DRY_RUN_BUDGET.bytes);
      expect(tracedBuiltins(trace).filter((name) => NOT_AT_START_UP.includes(name))).toEqual([]);
      // --version and --help: the same.
      for (const flag of ["--version", "--help"]) {
        const traced = newTraceFile();
        const shown = await runProcess(process.execPath, [path.join(out, "main.js"), flag], {
          env: tracedEnv(traced, {}),
        });
        expect(shown.status, shown.stderr).toBe(0);
        expect(tracedBuiltins(traced), flag).toContain("fs");
        expect(
          tracedBuiltins(traced).filter((name) => NOT_AT_START_UP.includes(name)),
          flag,
        ).toEqual([]);
      }
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
      // The shared parent too once no other process's folder is in it (as bundle-test-scripts.ts does).
      try {
        fs.rmdirSync(path.join(repo, ".test-build"));
      } catch {
        // Another process's folder is still in it.
      }
    }
  });

  it("a models file and a schema load zod, Ajv and pi-schema for them, and still no engine", async () => {
    const ws = makeWorkspace({
      "m.json": JSON.stringify({
        providers: {
          local: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] },
        },
      }),
      "s.json": JSON.stringify({ type: "object", properties: { a: { type: "string" } } }),
    });
    const loaded = await loadedBy([
      "--dry-run",
      "--cwd",
      makeWorkspace({}),
      "--models",
      path.join(ws, "m.json"),
      "--model",
      "local/m",
      "--schema",
      path.join(ws, "s.json"),
      "task",
    ]);
    expect(loaded.run.status, loaded.run.stderr).toBe(0);
    expect(loaded.packages).toEqual(expect.arrayContaining(["@earendil-works/pi-schema", "ajv", "commander", "zod"]));
    for (const heavy of ["dockerode", "docker-modem", "ssh2", "yaml", "tar-fs", "tar-stream"]) {
      expect(loaded.packages).not.toContain(heavy);
    }
    expect(loaded.own.filter((file) => NOT_FOR_A_PLAN.some((re) => re.test(file)))).toEqual([]);
  });
});
