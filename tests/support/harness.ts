// Shared pieces of the integration tests: a scripted model server, a models.json that
// points at it, throw-away workspaces, and a check that no container of a run survives.
import { spawn } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, expect, inject } from "vitest";
import { createDockerClient } from "../../src/engine/docker-connection.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import type { RunEvent } from "../../src/run/run-events.js";
import { LABEL_RUN_ID, LAUNCHER_EXIT } from "../../src/sandbox-contract.js";
import {
  type Script,
  type ScriptedModelServer,
  startScriptedModelServer,
} from "../../src/scripted-model/scripted-model-server.js";
import type { TestScript } from "./bundle-test-scripts.js";
import { engineFileEntry, remoteEngine } from "./second-engine.js";

/** The key the scripted provider "needs": it must reach the upstream and never the sandbox. */
export const SECRET_KEY = "sk-scripted-SECRET-4f9a2c";

export const dockerAvailable = (): boolean => inject("dockerAvailable");
/** The runtimes the core cases run on: runc, and gVisor where it is registered (always on CI). */
export const runtimes = (): Array<"runc" | "runsc"> => (inject("runscAvailable") ? ["runc", "runsc"] : ["runc"]);
/**
 * The workspace mode every run of this test process uses unless a test picks one: the
 * "integration-copy" project sets SANDBOX_RUN_WORKSPACE=copy (see vitest.config.ts), so the
 * security suites prove their promises in both modes. Expectations that differ by mode ask this.
 */
export const workspaceMode = (): "bind" | "copy" => (process.env.SANDBOX_RUN_WORKSPACE === "copy" ? "copy" : "bind");
/**
 * The "integration-warm" project sets SANDBOX_RUN_WARM=1 (see vitest.config.ts): every agent keeps a
 * warm sandbox and its calls are served by one (copy mode, the workspace at /workspace inside).
 */
export const warmCalls = (): boolean => Number(process.env.SANDBOX_RUN_WARM ?? 0) > 0;
/**
 * The "integration-remote" project (SANDBOX_RUN_TEST_ENGINE=remote, see vitest.config.ts) runs the
 * security suites on the second engine (tests/support/second-engine.ts: another machine reached over
 * mutual TLS): every ContainerPiAgent, controller process and CLI of the test process reads the
 * engines file naming only that engine, and `docker`/`engine` below are that engine's.
 */
const remote = process.env.SANDBOX_RUN_TEST_ENGINE === "remote" ? inject("remoteEngine") : undefined;
if (remote) process.env.SANDBOX_RUN_ENGINES = remote.enginesFile;
/** Where this test process's runs go. */
export const testEngine = (): "local" | "remote" => (remote ? "remote" : "local");
/** The engine runs go to (the library goes through it); its dockerode client for tests that inspect what it holds. */
export const engine = remote ? remoteEngine(remote.state) : new DockerEngine(createDockerClient());
export const docker = engine.docker;

/** The container events `docker` logged from `since` (seconds since the epoch) until now that match `filters`. */
export async function containerEvents(since: number, filters: Record<string, string[]>): Promise<unknown[]> {
  const stream = (await docker.getEvents({
    since,
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: { type: ["container"], ...filters },
  })) as NodeJS.ReadableStream;
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line));
}

/**
 * A sandbox whose controller died stops by itself within a second or two (its launcher's link to the
 * controller closes). A start-up reaper that stopped it instead did so within this long, or the
 * sandbox's own stop would have come first; a later kill means the sandbox did not stop itself.
 */
const REAPED_FIRST_WITHIN_MS = 10_000;

/**
 * A sandbox whose controller died at `diedAt` (ms) and that ended with `status` (undefined: already
 * removed) at `stoppedAt`: its launcher stopped it (exit 91), or, before the launcher saw the link
 * close, another process's start-up reaping did (its owner is gone; other test files start CLIs and
 * controllers all the time). Then the engine logged a kill, which a sandbox's own exit never has,
 * and it came soon.
 */
export async function expectStoppedByItselfOrReaped(
  containerId: string,
  status: number | undefined,
  diedAt: number,
  stoppedAt = Date.now(),
): Promise<void> {
  // Already removed: another process's start-up reaping may remove a sandbox that had stopped by
  // itself before this test read its state (seen once in CI, runsc): the engine's log has its exit.
  const code = status ?? (await exitCodeLogged(containerId));
  if (code === LAUNCHER_EXIT.controllerGone) return;
  expect(await killedThroughEngine(containerId), `exit ${code} and no kill through the engine`).toBe(true);
  expect(stoppedAt - diedAt).toBeLessThan(REAPED_FIRST_WITHIN_MS);
}

/** The exit code the local engine logged for this container's last end in the last 10 minutes. */
async function exitCodeLogged(containerId: string): Promise<number | undefined> {
  const dies = (await containerEvents(Math.floor(Date.now() / 1000) - 600, {
    event: ["die"],
    container: [containerId],
  })) as Array<{ Actor?: { Attributes?: { exitCode?: string } } }>;
  const code = dies.at(-1)?.Actor?.Attributes?.exitCode;
  return code === undefined ? undefined : Number(code);
}

/**
 * Whether the local engine logged a kill for this container in the last 10 minutes: it was stopped
 * by force (`docker kill`, as the start-up reaping of any CLI or controller does for a container
 * whose owner is gone), not by its own exit.
 */
export async function killedThroughEngine(containerId: string): Promise<boolean> {
  const kills = await containerEvents(Math.floor(Date.now() / 1000) - 600, {
    event: ["kill"],
    container: [containerId],
  });
  return kills.length > 0;
}

/**
 * What a controller running as another user needs to reach the engine runs go to: nothing for the
 * local socket (its group does), and for the remote engine an engines file and client certificates
 * of its own in `dir` (the test run's are root's), as that user would have.
 */
export function enginesEnvFor(dir: string, owner: { uid: number; gid: number }): Record<string, string> {
  if (!remote) return {};
  const certs = path.join(dir, "engine-certs");
  fs.mkdirSync(certs, { mode: 0o700 });
  for (const name of ["ca.pem", "cert.pem", "key.pem"]) {
    fs.copyFileSync(path.join(remote.state.clientCertDir, name), path.join(certs, name));
    fs.chownSync(path.join(certs, name), owner.uid, owner.gid);
  }
  fs.chownSync(certs, owner.uid, owner.gid);
  const file = path.join(dir, "engines.json");
  fs.writeFileSync(file, JSON.stringify({ engines: [{ ...engineFileEntry(remote.state, 16), tls: certs }] }));
  fs.chownSync(file, owner.uid, owner.gid);
  return { SANDBOX_RUN_ENGINES: file };
}

export async function startModel(scripts: Record<string, Script> = {}): Promise<ScriptedModelServer> {
  return startScriptedModelServer({ scripts });
}

/** A Pi models.json with one custom provider "scripted" that serves the given model ids. */
export function modelsFor(server: ScriptedModelServer, ids: string[]): Record<string, unknown> {
  return {
    providers: {
      scripted: {
        baseUrl: server.baseUrl,
        api: "openai-completions",
        apiKey: SECRET_KEY,
        models: ids.map((id) => ({ id, contextWindow: 32000, maxTokens: 4096 })),
      },
    },
  };
}

export function makeWorkspace(files: Record<string, string> = {}, prefix = "sandbox-run-ws-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

/** Collects events and the run ids they carry. */
export function eventLog() {
  const events: RunEvent[] = [];
  return {
    events,
    onEvent: (event: RunEvent) => void events.push(event),
    runIds: () => [...new Set(events.map((e) => e.runId))],
    ofType: (type: string) => events.filter((e) => e.type === type),
  };
}

/** Containers (running or not) that belong to the given runs. */
/**
 * For a describe block whose agent reports every event to `onEvent`: after each test, no
 * container of the runs it saw may be left (checked, then forgotten).
 */
export function checkNoContainersLeftAfterEach(): { onEvent: (event: RunEvent) => void } {
  const runIds = new Set<string>();
  // A warm sandbox's container carries the pool's id, not the run's: it is found by its own id.
  const containerIds = new Set<string>();
  afterEach(async () => {
    expect(await containersOfRuns([...runIds])).toEqual([]);
    const left = await Promise.all(
      [...containerIds].map((id) =>
        docker
          .getContainer(id)
          .inspect()
          .then(
            () => [id],
            () => [],
          ),
      ),
    );
    expect(left.flat()).toEqual([]);
    runIds.clear();
    containerIds.clear();
  });
  return {
    onEvent: (event) => {
      runIds.add(event.runId);
      if (event.type === "warm.claimed") containerIds.add(String(event.data.containerId));
    },
  };
}

export async function containersOfRuns(runIds: string[]): Promise<string[]> {
  const found: string[] = [];
  for (const runId of runIds) {
    const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN_ID}=${runId}`] } });
    // A warm sandbox's labels carry the pool's id; it takes its run's name at the claim.
    const named = await docker.listContainers({ all: true, filters: { name: [`^/sandbox-run-${runId}$`] } });
    found.push(...new Set([...list, ...named].map((c) => c.Id)));
  }
  return found;
}

/** A bash step then a final-tool step: the benchmark's and many tests' 2-turn task. */
export function bashThenFinal(command: string, final: unknown): Script {
  return [
    { toolCalls: [{ name: "bash", arguments: { command } }] },
    { toolCalls: [{ name: "sandbox_run_final_result", arguments: final }] },
  ];
}

/** The text of the last tool result the model was sent (what the sandbox's bash printed). */
export function lastToolResult(server: ScriptedModelServer, model: string): string {
  const requests = server.requests.filter((r) => r.body.model === model);
  const last = requests[requests.length - 1];
  const messages = last?.body.messages ?? [];
  const tool = [...messages].reverse().find((m) => m.role === "tool");
  const content = tool?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c: { text?: string }) => c.text ?? "").join("");
  return "";
}

export interface ProcessResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command without blocking this process (the scripted model answers from here). */
export function runProcess(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

/** A helper program the global set-up bundled (bundle-test-scripts.ts), to run with `node <path>`. */
export function testScript(name: TestScript): string {
  return path.join(inject("testScriptsDir"), `${name}.mjs`);
}

/** The built CLI (dist/cli/main.js, made by `npm run build`). */
export const builtCli = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** The CLI from source (through tsx), as a child process: for unit tests, which must not need a build. */
export function runSourceCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ProcessResult> {
  return runProcess(process.execPath, ["--import", tsxLoader, sourceCli, ...args], options);
}

const sourceCli = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
/** tsx's loader by absolute URL: the CLI may run in a folder where `tsx` does not resolve. */
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;

/** Runs the built CLI as a child process. */
export function runBuiltCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ProcessResult> {
  return runProcess(process.execPath, [builtCli, ...args], options);
}
