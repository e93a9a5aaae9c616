// Lifecycle and crash safety: a controller killed with SIGKILL leaves no container running for
// long (the launcher notices its liveness connection closing) and start-up reaping or
// `sandbox-run gc` removes what is left; SIGINT/SIGTERM on the CLI remove the container and exit
// 130/143; concurrent runs stay apart; files the sandbox writes belong to the caller.
// Runs in its own vitest invocation (see package.json "test"): its controllers are killed on
// purpose, and another file's start-up reaping would race the launcher's own exit.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { handBackGoneRuns, reapContainers } from "../../src/run/reap-orphans.js";
import { reapRunDirs } from "../../src/run/reap-run-dirs.js";
import { runDirsParent } from "../../src/run/run-dirs.js";
import {
  LAUNCHER_DEADLINE_GRACE_MS,
  LAUNCHER_EXIT,
  type RunPlan,
  SANDBOX_UID,
  WARM_PATHS,
} from "../../src/sandbox-contract.js";
import { commitAll } from "../support/git-repo.js";
import {
  builtCli,
  containersOfRuns,
  docker,
  engine,
  enginesEnvFor,
  expectStoppedByItselfOrReaped,
  lastToolResult,
  modelsFor,
  warmCalls,
  workspaceMode,
} from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  type SpawnedController,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** Polls `check` every 250 ms until it returns true or `limitMs` passes; returns the last answer. */
async function eventually(check: () => Promise<boolean>, limitMs: number): Promise<boolean> {
  const end = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Starts a controller whose sandbox sleeps, and waits until the sandbox is running. */
async function controllerMidRun(
  tmpdir: string,
  ws: string,
): Promise<{
  controller: SpawnedController;
  runId: string;
  containerId: string;
  exit: Promise<{ StatusCode: number }>;
}> {
  const controller = spawnController(
    server,
    [bash("mkdir made && echo x > made/file.txt && sleep 3600"), finish()],
    { cwd: ws, reportEvents: ["container.started"] },
    { env: { ...process.env, TMPDIR: tmpdir } },
  );
  const started = await within(controller.event("container.started"), 60_000, "the sandbox's start");
  // Its exit status, however it ends (any controller's start-up reaping may remove it soon after).
  const exit = docker.getContainer(String(started.data.containerId)).wait() as Promise<{ StatusCode: number }>;
  // Wait until the sandbox has written into its workspace (the lent host tree, or its copy).
  const container = docker.getContainer(String(started.data.containerId));
  // (A warm sandbox holds the workspace at /workspace, a cold one at its host path.)
  const made = path.join(warmCalls() ? WARM_PATHS.workspace : ws, "made/file.txt");
  if (!(await eventually(() => sandboxHasFile(container, made), 30_000))) {
    throw new Error(`the sandbox did not write into the workspace; controller stderr:\n${controller.stderr()}`);
  }
  return { controller, runId: started.runId, containerId: String(started.data.containerId), exit };
}

/** Whether a file exists inside the running container (in copy mode the host sees nothing yet). */
async function sandboxHasFile(container: ReturnType<typeof docker.getContainer>, file: string): Promise<boolean> {
  try {
    const exec = await container.exec({ Cmd: ["test", "-f", file], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    stream.resume();
    await new Promise((resolve) => stream.once("end", resolve));
    return (await exec.inspect()).ExitCode === 0;
  } catch {
    return false;
  }
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms).unref(),
    ),
  ]);
}

/** uid:gid of every entry under `dir`. */
function owners(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    out[path.relative(dir, p) || "."] = `${st.uid}:${st.gid}`;
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
  };
  walk(dir);
  return out;
}

/** Staging folders copy mode left next to a workspace. */
const siblingsOf = (ws: string) =>
  fs.readdirSync(path.dirname(ws)).filter((name) => name.startsWith(`.sandbox-run-staging-${path.basename(ws)}-`));

/** The run folders in `dir`'s private per-user parent (see src/run/run-dirs.ts). */
const runDirsIn = (dir: string) => {
  const parent = runDirsParent(dir);
  return fs.existsSync(parent) ? fs.readdirSync(parent).filter((name) => name.startsWith("run-")) : [];
};

// Not concurrent: `gc` reaps every orphan, so the two kill tests would reap each other's.
describe("a controller killed with SIGKILL", () => {
  it("its container stops by itself (launcher exit 91); `sandbox-run gc` removes it, its run directory, and hands the workspace back", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace({ "old.txt": "old\n" });
    const { controller, runId, containerId, exit } = await controllerMidRun(tmpdir, ws);
    expect(runDirsIn(tmpdir)).toHaveLength(1);
    // Bind mode: lent to the sandbox uid while the run is on. Copy mode: nothing reached the host.
    if (workspaceMode() === "bind") expect(fs.statSync(path.join(ws, "made/file.txt")).uid).not.toBe(0);
    else expect(fs.existsSync(path.join(ws, "made"))).toBe(false);
    controller.child.kill("SIGKILL");
    await controller.exited;
    const died = Date.now();
    // The launcher's liveness connection closed with the controller (copy mode: the relay saw its
    // stdin end and exited, which closed it), or a reaper got there first (the other projects run
    // this file at once).
    const status = (await within(exit, 30_000, "the container's exit")).StatusCode;
    await expectStoppedByItselfOrReaped(containerId, status, died);

    // Another controller's start-up reaping (other test files run alongside) may get to the
    // container first, even between a check and the gc call; the end state is what counts.
    const gc = await runCliProcess(["gc"], { TMPDIR: tmpdir });
    expect(gc.code, gc.stderr).toBe(0);
    expect(gc.stderr).toMatch(/\d+ container\(s\), \d+ run folder\(s\) and \d+ tree hold\(s\) removed/);
    // Where this gc removed the container itself, it says why.
    for (const line of gc.stderr.split("\n").filter((l) => l.includes(`(run ${runId})`))) {
      expect(line).toMatch(/: owner process \d+ is gone$/);
    }
    expect(await containersOfRuns([runId])).toEqual([]);
    expect(runDirsIn(tmpdir)).toEqual([]);
    // Bind mode: the dead controller could not hand the workspace back; the reaper did. Copy mode:
    // the run never settled, so nothing of it was applied.
    expect(owners(ws)).toEqual(
      workspaceMode() === "bind"
        ? { ".": "0:0", "old.txt": "0:0", made: "0:0", "made/file.txt": "0:0" }
        : { ".": "0:0", "old.txt": "0:0" },
    );
    expect(siblingsOf(ws)).toEqual([]);
  });

  it("in read-only mode too: `gc` leaves every tree owned as before, including a root-only file", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace({ "secret.txt": "root only\n" });
    fs.chmodSync(path.join(ws, "secret.txt"), 0o600);
    const controller = spawnController(
      server,
      [bash("sleep 3600"), finish()],
      {
        cwd: ws,
        policy: hostilePolicy({ workspace: "read-only", tools: ["read", "bash", "grep", "find", "ls"] }),
        reportEvents: ["container.started"],
      },
      { env: { ...process.env, TMPDIR: tmpdir } },
    );
    const started = await within(controller.event("container.started"), 60_000, "the sandbox's start");
    // Bind mode: lent to the sandbox uid while the run is on, so it can read the root-only file.
    // Copy mode: the sandbox reads its own copy; the host tree is never lent.
    expect(fs.statSync(path.join(ws, "secret.txt")).uid).toBe(workspaceMode() === "bind" ? 65532 : 0);
    controller.child.kill("SIGKILL");
    await controller.exited;
    const gc = await runCliProcess(["gc"], { TMPDIR: tmpdir });
    expect(gc.code, gc.stderr).toBe(0);
    expect(await containersOfRuns([started.runId])).toEqual([]);
    expect(owners(ws)).toEqual({ ".": "0:0", "secret.txt": "0:0" });
    expect(fs.statSync(path.join(ws, "secret.txt")).mode & 0o777).toBe(0o600);
  });

  it("start-up reaping of the next controller removes its container, and its run directory and lent workspace once nothing is left to judge", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace();
    const { controller, runId, exit } = await controllerMidRun(tmpdir, ws);
    controller.child.kill("SIGKILL");
    await controller.exited;
    await within(exit, 30_000, "the container's exit");
    const orphanLeft = (await containersOfRuns([runId])).length > 0;
    // What a ContainerPiAgent does before its first run (there with the default temp dir, here with
    // the dead controller's: its run folder holds the lease record the trees are handed back from).
    const reaped = await reapContainers(engine, { tmpDir: tmpdir });
    await handBackGoneRuns(engine, { tmpDir: tmpdir });
    reapRunDirs(tmpdir);
    // Files run in parallel: another controller's start-up reaping may take the orphan first (then
    // it is gone all the same, checked below, and handBackGoneRuns hands the trees back from the
    // record, which only this temp dir holds); when this reaping took it, it says why.
    const mine = reaped.find((r) => r.runId === runId);
    if (orphanLeft && mine) expect(mine.reason).toMatch(/owner process \d+ is gone/);
    // A removal another reaper started is in progress (the engine's 409 counts as gone): it ends.
    const gone = await eventually(async () => (await containersOfRuns([runId])).length === 0, 15_000);
    expect(gone, `still listed: ${JSON.stringify(await containersOfRuns([runId]))}`).toBe(true);
    if (workspaceMode() === "bind") {
      // The sandbox wrote the host's tree and nothing judged it: start-up reaping leaves the run's
      // folder and its lent trees to `gc`, which judges the run first (here: nothing to put back).
      expect(runDirsIn(tmpdir)).toEqual([`run-${runId}`]);
      expect(fs.statSync(path.join(ws, "made/file.txt")).uid).toBe(SANDBOX_UID);
      const gc = await runCliProcess(["gc"], { TMPDIR: tmpdir });
      expect(gc.code, gc.stderr).toBe(0);
      expect(gc.stderr).toContain(
        `judged run ${runId} (never judged by its controller): ${ws}\n  nothing it was not allowed to change\n`,
      );
    }
    expect(runDirsIn(tmpdir)).toEqual([]);
    expect(owners(ws)).toEqual(
      workspaceMode() === "bind" ? { ".": "0:0", made: "0:0", "made/file.txt": "0:0" } : { ".": "0:0" },
    );
  });
});

// Bind mode only (in copy mode nothing of a run reaches the host before the host has judged it):
// left unregistered in the other projects rather than skipped.
const describeBindOnly = (workspaceMode() === "bind" && !warmCalls() ? describe : () => undefined) as typeof describe;

describeBindOnly("a bind-mode run whose controller was killed before it judged the workspace", () => {
  it("a new run over the tree is refused until `sandbox-run gc` has judged it: the planted hook and .envrc are put back, the run's own work stays", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace({ "src/a.ts": "a\n" });
    commitAll(ws);
    const hooksBefore = fs.readdirSync(path.join(ws, ".git/hooks")).sort();
    const env = { ...process.env, TMPDIR: tmpdir };
    const plant = [
      "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
      "echo 'touch /tmp/pwned' > .envrc",
      "echo work > src/b.ts",
      "touch planted-all",
      "sleep 3600",
    ].join(" && ");
    const controller = spawnController(
      server,
      [bash(plant), finish()],
      { cwd: ws, reportEvents: ["container.started"] },
      { env },
    );
    const started = await within(controller.event("container.started"), 60_000, "the sandbox's start");
    const exit = docker.getContainer(String(started.data.containerId)).wait() as Promise<{ StatusCode: number }>;
    const planted = await eventually(async () => fs.existsSync(path.join(ws, "planted-all")), 30_000);
    expect(planted, controller.stderr()).toBe(true);
    // The next run over the tree (another controller, the same user and temp folder) waits for it ...
    const next = spawnController(
      server,
      [bash("echo hello"), finish()],
      { cwd: ws, reportEvents: ["workspace.waiting"] },
      { env },
    );
    await within(next.event("workspace.waiting"), 60_000, "the next run's wait for the tree");
    controller.child.kill("SIGKILL");
    await controller.exited;
    await within(exit, 30_000, "the container's exit");

    // ... and once that controller is gone, it is refused, saying what to do (it does not start from what that sandbox left).
    const refused = await next.done;
    expect(refused.ok).toBe(false);
    expect(refused.error?.code).toBe("usage");
    expect(refused.error?.message).toContain(
      `Run ${started.runId} wrote ${ws} and was never judged (its controller died first, or its judgement failed)`,
    );
    expect(fs.existsSync(path.join(ws, ".git/hooks/pre-commit"))).toBe(true);

    const gc = await runCliProcess(["gc"], { TMPDIR: tmpdir });
    expect(gc.code, gc.stderr).toBe(0);
    expect(gc.stderr).toContain(`judged run ${started.runId} (never judged by its controller): ${ws}\n`);
    expect(gc.stderr).toContain("  refused .envrc: created\n");
    expect(gc.stderr).toContain("  refused .git/hooks/pre-commit: created\n");
    expect(fs.readdirSync(path.join(ws, ".git/hooks")).sort()).toEqual(hooksBefore);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(fs.readFileSync(path.join(ws, "src/b.ts"), "utf8")).toBe("work\n");
    expect(runDirsIn(tmpdir)).toEqual([]);
    // Handed back to the caller (root here) once judged.
    expect(fs.statSync(path.join(ws, "src/b.ts")).uid).toBe(process.getuid?.());

    const after = spawnController(server, [bash("echo hello"), finish()], { cwd: ws }, { env });
    const done = await after.done;
    expect(done.ok, JSON.stringify(done.error)).toBe(true);
  });
});

describeBindOnly("a bind-mode run stopped while its workspace is judged", () => {
  it("packs that take the host's git minutes to verify: SIGINT (a CI cancel's first signal) ends their verification after a short grace, the run is judged and restored, exit 130", async () => {
    const ws = hostileWorkspace({
      "bomb.mjs": fs.readFileSync(path.join(import.meta.dirname, "../support/delta-bomb-packs.mjs"), "utf8"),
    });
    execFileSync("git", ["init", "-q"], { cwd: ws });
    const modelId = "hostile-cli-packs";
    // 40 packs of 20 deltas of 64 MiB: ~10 s of the host's index-pack each, past the test's own timeout in all.
    server.setScript(modelId, [
      bash("node bomb.mjs .git/objects/pack 40 20 64 && echo 'touch /tmp/pwned' > .envrc"),
      finish(),
    ]);
    const dir = hostileWorkspace({ "models.json": JSON.stringify(modelsFor(server, [modelId])) }, "sandbox-run-cli-");
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const eventsFile = path.join(dir, "events.jsonl");
    const args = ["--model", `scripted/${modelId}`, "--models", path.join(dir, "models.json"), "--cwd", ws];
    const result = await runCliProcess(
      [...args, "--events", eventsFile, "Do the task."],
      { TMPDIR: tmpdir },
      (child) => {
        let seen = "";
        child.stderr?.on("data", (chunk: Buffer) => {
          seen += chunk.toString();
          // The container is gone and the judgement under way: stop it the way a CI cancel starts to.
          if (seen.includes("sandbox stopped")) {
            seen = "";
            setTimeout(() => child.kill("SIGINT"), 1000);
          }
        });
      },
    );
    expect(result.code, `${result.stderr}\n${fs.readFileSync(eventsFile, "utf8").slice(-3000)}`).toBe(130);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(fs.readdirSync(path.join(ws, ".git/objects/pack"))).toEqual([]);
    const events = fs
      .readFileSync(eventsFile, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { runId: string; type: string; data: { code?: string; message?: string } });
    expect(events.find((e) => e.type === "run.failed")?.data.message).toContain(
      "not checked: the run was stopped, and its packs took longer to verify than a stopped run waits",
    );
    expect(await containersOfRuns([events[0]!.runId])).toEqual([]);
    expect(runDirsIn(tmpdir)).toEqual([]);
  });
});

/** The frozen controller's run timeout: the sandbox's own deadline comes this much later than its start. */
const FROZEN_RUN_TIMEOUT_MS = 20_000;

describe("a controller that stops answering (a lost host or link)", () => {
  it("the sandbox stops itself at the run's deadline (launcher exit 92), without any word from the host", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace();
    const controller = spawnController(
      server,
      [bash("sleep 3600"), finish()],
      // Pi's first request must come before the controller's own timer, or the controller stops the
      // run itself (exit 137): under a full suite's load on two cores a start has taken over 8 s,
      // and once the request came only at ~10 s (fresh clone, session 25).
      { cwd: ws, timeoutMs: FROZEN_RUN_TIMEOUT_MS, reportEvents: ["container.started", "gateway.request"] },
      { env: { ...process.env, TMPDIR: tmpdir } },
    );
    const started = await within(controller.event("container.started"), 60_000, "the sandbox's start");
    const exit = docker.getContainer(String(started.data.containerId)).wait() as Promise<{ StatusCode: number }>;
    // Pi is at work (it asked the model), then the controller freezes: not dead, so its sockets
    // stay open, and neither an EOF nor the controller's own timer comes.
    await within(controller.event("gateway.request"), 60_000, "the sandbox's first model request");
    controller.child.kill("SIGSTOP");
    try {
      const status = await within(
        exit,
        FROZEN_RUN_TIMEOUT_MS + LAUNCHER_DEADLINE_GRACE_MS + 30_000,
        "the sandbox's own stop",
      );
      expect(status.StatusCode).toBe(LAUNCHER_EXIT.deadlinePassed);
    } finally {
      controller.child.kill("SIGKILL");
      await controller.exited;
    }
    await reapContainers(engine, { tmpDir: tmpdir });
    reapRunDirs(tmpdir);
    expect(await containersOfRuns([started.runId])).toEqual([]);
  }, 120_000);
});

interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runCliProcess(
  args: string[],
  env: Record<string, string> = {},
  onSpawn?: (child: ReturnType<typeof spawn>) => void,
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [builtCli, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
    onSpawn?.(child);
  });
}

describe.concurrent("the CLI interrupted", () => {
  for (const [signal, exitCode] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    // A closed terminal or ssh session: not an end between the sandbox's writes and their judgement.
    ["SIGHUP", 129],
  ] as const) {
    it(`${signal} mid-run removes the container and exits ${exitCode}`, async () => {
      const modelId = `hostile-cli-${signal.toLowerCase()}`;
      server.setScript(modelId, [bash("sleep 3600"), finish()]);
      const dir = hostileWorkspace({ "models.json": JSON.stringify(modelsFor(server, [modelId])) }, "sandbox-run-cli-");
      const ws = hostileWorkspace();
      const eventsFile = path.join(dir, "events.jsonl");
      const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
      const result = await runCliProcess(
        [
          "--model",
          `scripted/${modelId}`,
          "--models",
          path.join(dir, "models.json"),
          "--cwd",
          ws,
          "--events",
          eventsFile,
          "Do the task.",
        ],
        { TMPDIR: tmpdir },
        (child) => {
          // Interrupt once the sandbox's bash is running.
          const timer = setInterval(() => {
            const text = fs.existsSync(eventsFile) ? fs.readFileSync(eventsFile, "utf8") : "";
            if (text.includes('"tool_execution_start"')) {
              clearInterval(timer);
              child.kill(signal);
            }
          }, 100);
          child.on("close", () => clearInterval(timer));
        },
      );
      expect(result.code, result.stderr).toBe(exitCode);
      expect(result.stderr).toContain(`${signal} received, stopping the sandbox`);
      expect(result.stderr).not.toMatch(/^\s+at /m);
      const runId = (JSON.parse(fs.readFileSync(eventsFile, "utf8").split("\n")[0]!) as { runId: string }).runId;
      expect(await containersOfRuns([runId])).toEqual([]);
      expect(runDirsIn(tmpdir)).toEqual([]);
    });
  }
});

describe("the CLI's reader goes away", () => {
  it("stderr closed by its reader (`2>&1 | head -1`): the CLI does not die of EPIPE mid-run; the run is judged and nothing is left", async () => {
    const modelId = "hostile-cli-epipe";
    server.setScript(modelId, [
      bash("echo 'touch /tmp/pwned' > .envrc"),
      ...Array.from({ length: 5 }, (_, i) => bash(`echo step ${i}`)),
      finish(),
    ]);
    const dir = hostileWorkspace({ "models.json": JSON.stringify(modelsFor(server, [modelId])) }, "sandbox-run-cli-");
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const eventsFile = path.join(dir, "events.jsonl");
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const args = ["--model", `scripted/${modelId}`, "--models", path.join(dir, "models.json"), "--cwd", ws];
    const result = await runCliProcess([...args, "--events", eventsFile, "Do the task."], { TMPDIR: tmpdir }, (child) =>
      // Every progress line after this fails with EPIPE in the CLI.
      child.stderr?.destroy(),
    );
    // Judged: the .envrc was refused (bind mode: put back; copy mode: never applied), exit 1.
    expect(result.code).toBe(1);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    const events = fs
      .readFileSync(eventsFile, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { runId: string; type: string; data: { code?: string } });
    expect(events.find((e) => e.type === "run.failed")).toMatchObject({ data: { code: "policy-violation" } });
    expect(await containersOfRuns([events[0]!.runId])).toEqual([]);
    expect(runDirsIn(tmpdir)).toEqual([]);
  });
});

describe.concurrent("isolation and ownership", () => {
  it("8 concurrent runs all complete, each with its own result, events, socket and container; nothing is left", async () => {
    const schema = {
      type: "object",
      properties: { tag: { type: "string" }, seen: { type: "string" } },
      required: ["tag", "seen"],
    };
    const plans = new Map<number, RunPlan>();
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => {
        const ws = hostileWorkspace({ "tag.txt": `run-${i}` });
        // Each run reports what it can see; a crossed wire shows up as another run's tag or files.
        const script = (_request: unknown, turn: number) =>
          turn === 0
            ? bash(
                'cat tag.txt; echo; ls /run/sandbox-run; cd "$(dirname "$PWD")" && { ls -d sandbox-run-* workspace 2>/dev/null || true; }',
              )
            : { toolCalls: [{ name: "sandbox_run_final_result", arguments: { tag: `run-${i}`, seen: "checked" } }] };
        return runHostile(server, script, { cwd: ws, schema, onPlan: (plan) => plans.set(i, plan) });
      }),
    );
    runs.forEach((run, i) => {
      expect(run.details, describeOutcome(run)).toBeDefined();
      expect(run.details?.result).toEqual({ tag: `run-${i}`, seen: "checked" });
      expect(run.toolResults[0]).toMatch(new RegExp(`^run-${i}\\n`));
      // Only its own socket, and next to its workspace no other run's workspace.
      expect(run.toolResults[0]).toBe(`run-${i}\ngateway.sock\n${path.basename(plans.get(i)!.workingDir)}\n`);
      expect(new Set(run.events.map((e) => e.runId))).toEqual(new Set([run.runId]));
    });
    expect(new Set(runs.map((r) => r.runId)).size).toBe(8);
    expect(new Set(runs.map((r) => r.details?.containerId)).size).toBe(8);
    const sockets = [...plans.values()].map((p) => path.join(runDirsParent(), `run-${p.runId}`, "gateway.sock"));
    expect(new Set(sockets).size).toBe(8);
    expect(await containersOfRuns(runs.map((r) => r.runId))).toEqual([]);
    for (const socket of sockets) expect(fs.existsSync(path.dirname(socket)), socket).toBe(false);
  });

  it("as root: what the sandbox writes in a workspace with spaces and non-ASCII in its path belongs to the caller afterwards", async () => {
    const parent = hostileWorkspace();
    const ws = path.join(parent, "Ünïcödé wörk space ✓");
    fs.mkdirSync(path.join(ws, "sub dir"), { recursive: true });
    fs.writeFileSync(path.join(ws, "theirs.txt"), "owned by someone else\n");
    fs.chownSync(path.join(ws, "theirs.txt"), 1234, 1234);
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            'echo "workspace-owner=$(stat -c %u .)"',
            "mkdir -p 'new dir/ñested' && echo new > 'new dir/ñested/fïle.txt' && ln -s 'new dir' 'link ✓'",
            "echo more >> theirs.txt && echo changed > 'sub dir/x.txt'",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    // During the run the tree was lent to the unprivileged sandbox uid ...
    expect(outcome.toolResults[0]).toMatch(/workspace-owner=[1-9]\d*/);
    // ... and afterwards everything is the caller's again, except what was someone else's before.
    expect(owners(ws)).toEqual({
      ".": "0:0",
      "sub dir": "0:0",
      "sub dir/x.txt": "0:0",
      "theirs.txt": "1234:1234",
      "new dir": "0:0",
      "new dir/ñested": "0:0",
      "new dir/ñested/fïle.txt": "0:0",
      "link ✓": "0:0",
    });
    expect(fs.readFileSync(path.join(ws, "theirs.txt"), "utf8")).toBe("owned by someone else\nmore\n");
  });

  it("as an unprivileged caller: what the sandbox writes belongs to the caller (bind mode: it runs as the caller's uid)", async () => {
    const uid = 1500;
    const gid = 1500;
    const dockerGid = fs.statSync("/var/run/docker.sock").gid;
    const home = hostileWorkspace({}, "sandbox-run-home-");
    const parent = hostileWorkspace();
    const ws = path.join(parent, "üser wörkspace");
    fs.mkdirSync(ws);
    for (const dir of [home, parent, ws]) fs.chownSync(dir, uid, gid);
    const controller = spawnController(
      server,
      [bash("id -u; id -g; mkdir -p 'out dir' && echo hi > 'out dir/fïle.txt'"), finish()],
      { cwd: ws },
      {
        asUser: { uid, gid, groups: [dockerGid] },
        env: { ...process.env, HOME: home, TMPDIR: home, ...enginesEnvFor(home, { uid, gid }) },
      },
    );
    const done = await controller.done;
    expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(true);
    // Bind mode runs the sandbox as the caller; copy mode as the fixed sandbox uid (the host side
    // writes the changes back as the caller).
    expect(lastToolResult(server, controller.modelId)).toMatch(
      workspaceMode() === "bind" ? /^1500\n1500\n/ : new RegExp(`^${SANDBOX_UID}\n${SANDBOX_UID}\n`),
    );
    for (const entry of [".", "out dir", "out dir/fïle.txt"]) {
      const st = fs.lstatSync(path.join(ws, entry));
      expect(`${st.uid}:${st.gid}`, entry).toBe(`${uid}:${gid}`);
    }
    expect(await containersOfRuns([done.runId!])).toEqual([]);
    expect(runDirsIn(home)).toEqual([]);
  });

  // Review, round 3, session 38 (N2; docs/security.md P7): the caller's own project-local service
  // (PostgreSQL in `.devenv/state/postgres`, 0700, peer auth) ran a program on the host for it.
  it("as an unprivileged caller: a unix socket of its own in the workspace keeps bind mode from starting; copy mode carries no socket", async () => {
    const uid = 1500;
    const gid = 1500;
    const dockerGid = fs.statSync("/var/run/docker.sock").gid;
    const home = hostileWorkspace({}, "sandbox-run-home-");
    const ws = hostileWorkspace({ "README.md": "hi\n" });
    const socket = path.join(ws, ".devenv/state/postgres/.s.PGSQL.5432");
    fs.mkdirSync(path.dirname(socket), { recursive: true });
    let served = 0;
    const service = net.createServer((c) => {
      served++;
      c.end("the caller's service answered\n");
    });
    await new Promise<void>((resolve) => service.listen(socket, resolve));
    // Owner-only, the caller's: what a service of the caller's makes.
    fs.chmodSync(socket, 0o700);
    execFileSync("chown", ["-R", `${uid}:${gid}`, home, ws]);
    try {
      const connect = `node -e 'const c=require("net").connect(process.argv[1]);c.on("data",d=>process.stdout.write(d));c.on("error",e=>console.log("connect:",e.code))' ${socket}`;
      const controller = spawnController(
        server,
        [bash(connect), finish()],
        { cwd: ws },
        {
          asUser: { uid, gid, groups: [dockerGid] },
          env: { ...process.env, HOME: home, TMPDIR: home, ...enginesEnvFor(home, { uid, gid }) },
        },
      );
      const done = await controller.done;
      if (workspaceMode() === "bind") {
        expect(done.ok).toBe(false);
        expect(done.error?.code).toBe("usage");
        expect(done.error?.message).toContain(
          `The workspace holds a unix socket the sandbox could connect to: .devenv/state/postgres/.s.PGSQL.5432 (mode 0700, owner uid ${uid}).`,
        );
        expect(done.error?.message).toContain("--workspace copy");
      } else {
        expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(true);
        expect(lastToolResult(server, controller.modelId)).toContain("connect: ENOENT");
      }
      expect(served).toBe(0);
      expect(runDirsIn(home)).toEqual([]);
    } finally {
      await new Promise((resolve) => service.close(resolve));
    }
  });
});
