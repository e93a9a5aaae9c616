// The "hostile model" of the security suite: scripted steps that drive Pi's real tools (bash,
// write, edit, read) against the boundary, run through the real ContainerPiAgent in the real
// image. A run never throws here; the test gets the result or the SandboxRunError, the events,
// what every tool printed (as the model saw it) and the requests the model server recorded,
// and judges them itself.
import { type ChildProcess, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { ContainerPiAgent, type ContainerPiAgentConfig, type RunCallOptions } from "../../src/container-pi-agent.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import type { Limits, Policy } from "../../src/policy/policy-schema.js";
import type { RunDetails } from "../../src/run/execute-run.js";
import type { RunEvent } from "../../src/run/run-events.js";
import type { RunPlan } from "../../src/sandbox-contract.js";
import type {
  RecordedRequest,
  Script,
  ScriptedModelServer,
  ScriptStep,
} from "../../src/scripted-model/scripted-model-server.js";
import { hostPlatform, normalizePlatform } from "../../src/util/platform.js";
import { engine, modelsFor, startModel, testScript, workspaceMode } from "./harness.js";
import type { ControllerDone, ControllerSpec } from "./hostile-controller.js";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The schema every hostile run ends with, so "the run finished normally" is unambiguous. */
export const DONE_SCHEMA = {
  type: "object",
  properties: { done: { type: "boolean" } },
  required: ["done"],
} as const;

export const bash = (command: string): ScriptStep => ({ toolCalls: [{ name: "bash", arguments: { command } }] });
export const writeFile = (filePath: string, content: string): ScriptStep => ({
  toolCalls: [{ name: "write", arguments: { path: filePath, content } }],
});
export const editFile = (filePath: string, oldText: string, newText: string): ScriptStep => ({
  toolCalls: [{ name: "edit", arguments: { path: filePath, edits: [{ oldText, newText }] } }],
});
export const readFile = (filePath: string): ScriptStep => ({
  toolCalls: [{ name: "read", arguments: { path: filePath } }],
});
export const finish = (value: unknown = { done: true }): ScriptStep => ({
  toolCalls: [{ name: FINAL_TOOL_NAME, arguments: value }],
});

/**
 * workspace-write with small limits, so exhaustion tests trip quickly, and no protected paths,
 * so a test sees the protection it is about and not the change detector. Validated like a
 * policy file (defaults filled in), then passed as a policy object.
 */
export function hostilePolicy(overrides: Partial<Omit<Policy, "limits">> & { limits?: Partial<Limits> } = {}): Policy {
  const base = loadPolicy("workspace-write");
  const { limits, ...rest } = overrides;
  return parsePolicy(
    {
      ...base,
      name: "hostile-test",
      protectedPaths: [],
      ...rest,
      limits: {
        ...base.limits,
        memoryMb: 768,
        cpus: 1,
        pids: 128,
        tmpMb: 64,
        homeMb: 32,
        // Runs here take seconds, but on a loaded or slower machine a heavy one (hundreds of MB
        // through Pi's bash tool, eight runs at once, gVisor) took more than a minute: the
        // tests are about limits and results, not speed (tests about the timeout set their own).
        timeoutSeconds: 180,
        maxOutputMb: 64,
        maxLineMb: 4,
        diskMb: 256,
        ...limits,
      },
    },
    "hostile-test",
  );
}

export interface HostileOutcome {
  details?: RunDetails;
  error?: SandboxRunError;
  runId: string;
  plan?: RunPlan;
  events: RunEvent[];
  /** Text of every tool result the model was sent, in order (bash output + Pi's status lines). */
  toolResults: string[];
  /** Every request the model server received for this run's model id. */
  requests: RecordedRequest[];
  modelId: string;
}

export interface HostileRunOptions extends RunCallOptions {
  prompt?: string;
  /** Extra agent configuration (image, docker, env, ...). */
  agent?: Partial<ContainerPiAgentConfig>;
  /** The models.json for this run's model id; default: modelsFor(server, [id]). */
  modelsJson?: (modelId: string) => Record<string, unknown>;
  /** Receives the run's plan before it starts. */
  onPlan?: (plan: RunPlan) => void;
}

/**
 * Runs `steps` as a fresh model on the shared scripted server. Defaults: a hostile policy, a
 * final-result schema, a fresh empty workspace. Errors other than SandboxRunError are thrown:
 * the controller must never fail any other way.
 */
export async function runHostile(
  server: ScriptedModelServer,
  steps: ScriptStep[] | Script,
  options: HostileRunOptions = {},
): Promise<HostileOutcome> {
  const modelId = `hostile-${crypto.randomBytes(5).toString("hex")}`;
  server.setScript(modelId, steps);
  const events: RunEvent[] = [];
  const { prompt = "Do the task.", agent: agentConfig, modelsJson, onPlan, onEvent, signal, ...runOptions } = options;
  let plan: RunPlan | undefined;
  const agent = new ContainerPiAgent({
    models: modelsJson ? modelsJson(modelId) : modelsFor(server, [modelId]),
    reapOrphans: false,
    // One call: in the integration-warm project (SANDBOX_RUN_WARM) no refill is made after it
    // only to be removed at close (~0.6 CPU-s of a container and Pi's loading per run).
    warm: { calls: 1 },
    ...agentConfig,
  });
  const outcome: HostileOutcome = { runId: "", events, toolResults: [], requests: [], modelId };
  try {
    const planned = agent.plan(prompt, {
      model: `scripted/${modelId}`,
      cwd: runOptions.cwd ?? hostileWorkspace(),
      policy: hostilePolicy(),
      schema: DONE_SCHEMA,
      ...runOptions,
    });
    plan = planned.plan;
    // The integration-copy project must really run in copy mode (and the other one in bind mode).
    // Under emulation a run is copied in and out whatever the project's default (session 33).
    const emulated = runOptions.platform !== undefined && normalizePlatform(runOptions.platform) !== hostPlatform();
    const expectedMode = runOptions.workspaceMode ?? (emulated ? "copy" : workspaceMode());
    if (plan.workspaceMode !== expectedMode)
      throw new Error(`expected a ${expectedMode}-mode run, the plan says ${plan.workspaceMode}`);
    onPlan?.(planned.plan);
    outcome.details = await agent.runPlanned(planned, {
      signal,
      onEvent: (event) => {
        events.push(event);
        onEvent?.(event);
      },
    });
  } catch (error) {
    if (!isSandboxRunError(error)) throw error;
    outcome.error = error;
  } finally {
    // Its warm sandboxes (the integration-warm project) go with it.
    await agent.close();
  }
  // The integration-warm project must really run warm (unless the plan says why it could not).
  if (process.env.SANDBOX_RUN_WARM && plan && !outcome.details?.warm && !outcome.error?.warm) {
    const miss = events.find((e) => e.type === "warm.miss")?.data.reason;
    if (!miss) throw new Error("expected a warm run: it was neither warm nor said why not");
  }
  // The integration-remote project must really run on the remote engine (unless a test chose one).
  const chosen = events.find((e) => e.type === "engine.chosen")?.data.engine;
  if (!agentConfig?.engine && !agentConfig?.engines && chosen !== undefined && chosen !== engine.name)
    throw new Error(`expected a run on engine "${engine.name}", it went to "${String(chosen)}"`);
  outcome.plan = plan;
  outcome.runId = events[0]?.runId ?? "";
  outcome.requests = server.requests.filter((r) => r.body.model === modelId);
  outcome.toolResults = toolResultsOf(outcome.requests);
  return outcome;
}

function toolResultsOf(requests: RecordedRequest[]): string[] {
  const last = requests[requests.length - 1];
  return (last?.body.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) =>
      typeof m.content === "string"
        ? m.content
        : Array.isArray(m.content)
          ? m.content.map((c: { text?: string }) => c.text ?? "").join("")
          : "",
    );
}

/** The system prompt of the first request of a run, as Pi sent it to the model. */
export function systemPromptOf(outcome: HostileOutcome): string {
  const first = outcome.requests[0];
  const system = first?.body.messages.find((m) => m.role === "system" || m.role === "developer");
  const content = system?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c: { text?: string }) => c.text ?? "").join("");
  return "";
}

/** Names of the tools Pi offered the model in the run's first request. */
export function toolNamesOf(outcome: HostileOutcome): string[] {
  return (outcome.requests[0]?.body.tools ?? []).map((t) => t.function?.name ?? "");
}

const made: string[] = [];

/**
 * The host's own temp dir, not the test run's TMPDIR: escape tests rely on the workspace and the
 * "outside" folders being siblings right under it, so a write to an outside path inside the
 * sandbox lands in the sandbox's empty /tmp tmpfs (nested under TMPDIR, the shared parent would
 * be a root-owned mountpoint there and the write would fail for another reason).
 */
export const hostTmp = (): string => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir();

/** A throw-away directory (workspace or "host" directory outside the roots), removed by cleanupHostileDirs. */
export function hostileWorkspace(files: Record<string, string> = {}, prefix = "sandbox-run-hostile-"): string {
  const dir = fs.mkdtempSync(path.join(hostTmp(), prefix));
  made.push(dir);
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

export function cleanupHostileDirs(): void {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

/** Every entry under `dir` with its type and content (files) or target (links): a tamper check. */
export function treeSnapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    const rel = path.relative(dir, p) || ".";
    if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir:${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}`;
      for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name));
    } else out[rel] = `file:${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}:${fs.readFileSync(p, "utf8")}`;
  };
  walk(dir);
  return out;
}

/** Everything about every entry: type, owner, mode, size, inode, times and content (a byte-for-byte check). */
export function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    const rel = path.relative(dir, p) || ".";
    const facts = `${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}:${st.size}:${st.ino}:${st.mtimeMs}:${st.ctimeMs}`;
    if (st.isSymbolicLink()) out[rel] = `link:${facts}:${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir:${facts}`;
      for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name));
    } else out[rel] = `file:${facts}:${fs.readFileSync(p, "base64")}`;
  };
  walk(dir);
  return out;
}

/** What to print in a failed expectation: the run's error and tool output, briefly. */
export function describeOutcome(outcome: HostileOutcome): string {
  const error = outcome.error
    ? `${outcome.error.code}${outcome.error.limit ? `/${outcome.error.limit}` : ""}: ${outcome.error.message}\n${outcome.error.stderrTail ?? ""}`
    : `no error; the result: ${JSON.stringify(outcome.details?.result)?.slice(0, 2000)}`;
  return `${error}\n--- tool results ---\n${outcome.toolResults.map((t) => t.slice(0, 2000)).join("\n---\n")}`;
}

export interface SpawnedController {
  child: ChildProcess;
  modelId: string;
  /** Resolves with the first reported event of this type (rejects if the process ends first). */
  event(type: string): Promise<{ runId: string; type: string; data: Record<string, unknown> }>;
  /** The final record; rejects if the process ended without one (e.g. it was killed). */
  done: Promise<ControllerDone>;
  /** Resolves with the exit code or signal once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** Every event reported so far, of the types asked for (for failure messages). */
  reported(): Array<Record<string, unknown>>;
}

/**
 * Starts tests/support/hostile-controller.ts (bundled by the global set-up) in a child Node process
 * running `steps` as a fresh model on `server`.
 */
export function spawnController(
  server: ScriptedModelServer,
  steps: ScriptStep[] | Script,
  spec: Partial<Omit<ControllerSpec, "models" | "model">> & { cwd: string },
  spawnOptions: {
    /** Run the controller as this user (via setpriv; the caller must be root). */
    asUser?: { uid: number; gid: number; groups: number[] };
    env?: NodeJS.ProcessEnv;
  } = {},
): SpawnedController {
  const modelId = `hostile-${crypto.randomBytes(5).toString("hex")}`;
  server.setScript(modelId, steps);
  const full: ControllerSpec = {
    models: modelsFor(server, [modelId]),
    model: `scripted/${modelId}`,
    policy: hostilePolicy(),
    schema: { ...DONE_SCHEMA },
    ...spec,
  };
  const node = [process.execPath, testScript("hostileController"), JSON.stringify(full)];
  const user = spawnOptions.asUser;
  const argv = user
    ? [
        "setpriv",
        `--reuid=${user.uid}`,
        `--regid=${user.gid}`,
        `--groups=${user.groups.join(",") || user.gid}`,
        "--inh-caps=-all",
        ...node,
      ]
    : node;
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: spawnOptions.env ?? process.env,
  });
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-8000)));
  const records: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buffered = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.startsWith("{")) records.push(JSON.parse(line) as Record<string, unknown>);
      for (const wake of waiters.splice(0)) wake();
    }
  });
  let ended = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => {
      // Before waking the waiters: a waiter that finds nothing must see that nothing more will come.
      ended = true;
      for (const wake of waiters.splice(0)) wake();
      resolve({ code, signal });
    }),
  );
  const find = <T>(predicate: (r: Record<string, unknown>) => boolean, what: string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const found = records.find(predicate);
        if (found) return resolve(found as T);
        if (ended) return reject(new Error(`the controller ended without ${what}; stderr:\n${stderr}`));
        waiters.push(check);
      };
      check();
    });
  const done = find<ControllerDone>((r) => r.kind === "done", "a done record");
  // A test that kills the controller never awaits it: that rejection is expected, not unhandled.
  done.catch(() => {});
  return {
    child,
    modelId,
    event: (type) => find((r) => r.kind === "event" && r.type === type, `a ${type} event`),
    done,
    exited,
    stderr: () => stderr,
    reported: () => records.filter((r) => r.kind === "event"),
  };
}

/**
 * The scripted model server of one test file: started before its tests, closed after them
 * (with the file's hostile workspaces). Usable at module level; its members reach the live server.
 */
export function useHostileModelServer(): ScriptedModelServer {
  let current: ScriptedModelServer | undefined;
  beforeAll(async () => {
    current = await startModel();
  });
  afterAll(async () => {
    await current?.close();
    cleanupHostileDirs();
  });
  const live = () => {
    if (!current) throw new Error("the scripted model server starts in beforeAll");
    return current;
  };
  return {
    get baseUrl() {
      return live().baseUrl;
    },
    get requests() {
      return live().requests;
    },
    get scriptErrors() {
      return live().scriptErrors;
    },
    baseUrlFor: (api) => live().baseUrlFor(api),
    setScript: (modelId, script) => live().setScript(modelId, script),
    close: () => live().close(),
  };
}
