// Whole runs on an engine of "another machine" (tests/support/second-engine.ts: a second dockerd in
// its own network and mount namespace, reached only over TCP with mutual TLS), through
// ContainerPiAgent and an engine pool, with real Pi: copy mode end to end, a violation that changes
// nothing on the host, the runner image loaded from the local engine, a link cut mid-run, a
// controller killed mid-run on both engines, and concurrent runs spread over both engines.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { DockerEngine } from "../../src/engine/docker-engine.js";
import { EnginePool } from "../../src/engine/engine-pool.js";
import { ensureRunnerImage } from "../../src/image/ensure-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { runDirsParent } from "../../src/run/run-dirs.js";
import { LABEL_RUN_ID, LAUNCHER_DEADLINE_GRACE_MS, LAUNCHER_EXIT, type RunPlan } from "../../src/sandbox-contract.js";
import { docker, killedThroughEngine, engine as localEngine, runBuiltCli } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  fingerprint,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  type SpawnedController,
  spawnController,
  treeSnapshot,
  useHostileModelServer,
} from "../support/hostile-model.js";
import {
  engineFileEntry,
  openExtraLink,
  remoteEngine,
  type SecondEngineState,
  secondEngineExpected,
  useSecondEngine,
} from "../support/second-engine.js";

const server = useHostileModelServer();
const copy = { workspaceMode: "copy" as const };
const LOCAL_ENTRY = { name: "local", host: "unix:///var/run/docker.sock" };

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Staging folders copy mode left next to a tree. */
const stagingLeftNextTo = (dir: string) =>
  fs.readdirSync(path.dirname(dir)).filter((name) => name.startsWith(`.sandbox-run-staging-${path.basename(dir)}-`));

/** The run folders in `tmpdir`'s private per-user parent (src/run/run-dirs.ts). */
const runDirsIn = (tmpdir: string) => {
  const parent = runDirsParent(tmpdir);
  return fs.existsSync(parent) ? fs.readdirSync(parent).filter((name) => name.startsWith("run-")) : [];
};

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms).unref(),
    ),
  ]);
}

/** Polls `check` every 250 ms until it holds or `limitMs` passes. */
async function eventually(check: () => Promise<boolean>, limitMs: number): Promise<boolean> {
  const end = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Whether a file exists inside a running container of `engine` (copy mode: the host sees nothing yet). */
async function sandboxHasFile(engine: DockerEngine, containerId: string, file: string): Promise<boolean> {
  try {
    const exec = await engine.docker
      .getContainer(containerId)
      .exec({ Cmd: ["test", "-f", file], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    stream.resume();
    await new Promise((resolve) => stream.once("end", resolve));
    return (await exec.inspect()).ExitCode === 0;
  } catch {
    return false;
  }
}

describe.skipIf(!secondEngineExpected())("runs on a remote engine (TCP, mutual TLS)", () => {
  let state: SecondEngineState;
  let release: () => Promise<void>;
  let remote: DockerEngine;
  let configDir: string;
  /** Engines files: the remote engine alone (the local one only as an image source), and both. */
  const files = { remote: "", local: "", both: "" };
  /** Every run of this file, on either engine: none may be left. */
  const runIds: string[] = [];
  const onRemote = () => ({
    agent: {
      engines: new EnginePool([
        { engine: remote, capacity: 4 },
        { engine: localEngine, capacity: 0 },
      ]),
    },
  });

  beforeAll(async () => {
    ({ state, release } = await useSecondEngine());
    remote = remoteEngine(state);
    // The runner image, once, before the runs: loaded from this machine's engine when missing.
    await ensureRunnerImage(remote, { sources: [localEngine] });
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-engines-"));
    const write = (name: string, engines: unknown[]) => {
      const file = path.join(configDir, `${name}.json`);
      fs.writeFileSync(file, JSON.stringify({ engines }));
      return file;
    };
    files.remote = write("remote", [engineFileEntry(state, 4), { ...LOCAL_ENTRY, capacity: 0 }]);
    files.local = write("local", [{ ...LOCAL_ENTRY, capacity: 4 }]);
    files.both = write("both", [{ ...LOCAL_ENTRY, capacity: 4 }, engineFileEntry(state, 4)]);
  });

  afterAll(async () => {
    const left: string[] = [];
    for (const engine of [localEngine, remote]) {
      for (const runId of runIds.filter(Boolean)) {
        for (const c of await engine.listContainers([`${LABEL_RUN_ID}=${runId}`])) {
          left.push(`${engine.name}: ${runId}`);
          await engine.removeContainer(c.id).catch(() => {});
        }
      }
    }
    fs.rmSync(configDir, { recursive: true, force: true });
    await release?.();
    expect(left).toEqual([]);
  });

  const leftOn = async (engine: DockerEngine, ids: string[]) =>
    (await Promise.all(ids.map((id) => engine.listContainers([`${LABEL_RUN_ID}=${id}`])))).flat();

  it("a schema run in copy mode: nothing is mounted, the result and changed files are right, the host workspace changes only when the run's changes are applied", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n", "b.txt": "b\n", "dir/c.txt": "c\n", "keep.txt": "keep\n" });
    const before = fingerprint(ws);
    let plan: RunPlan | undefined;
    // The host workspace at moments of the run: after the tool changed the sandbox's copy (the
    // model's next request), and once the changes came back but before they were applied.
    const seen: Record<string, Record<string, string>> = {};
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "pwd",
            'grep " $PWD " /proc/mounts | cut -d" " -f3',
            "echo changed > a.txt && rm b.txt && mkdir new && echo d > new/d.txt",
          ].join("\n"),
        ),
        finish({ done: true }),
      ],
      {
        ...onRemote(),
        ...copy,
        cwd: ws,
        onPlan: (p) => (plan = p),
        onEvent: (event) => {
          if (event.type === "gateway.exchange" && event.data.seq === 2) seen.afterTool = fingerprint(ws);
          if (event.type === "workspace.copied-out") seen.copiedOut = fingerprint(ws);
          if (event.type === "workspace.applied") seen.applied = fingerprint(ws);
        },
      },
    );
    runIds.push(outcome.runId);
    expect(outcome.details?.result, describeOutcome(outcome)).toEqual({ done: true });
    expect(plan?.workspaceMode).toBe("copy");
    expect(plan?.mounts).toEqual([]);
    expect(outcome.events.find((e) => e.type === "engine.chosen")?.data).toEqual({
      engine: state.name,
      address: `tcp://127.0.0.1:${state.port} (TLS)`,
    });
    // Inside: the workspace's own path, on a tmpfs of the remote machine.
    expect(outcome.toolResults[0]).toBe(`${ws}\ntmpfs\n`);
    expect(outcome.details?.changedFiles).toEqual({ created: ["new/d.txt"], modified: ["a.txt"], deleted: ["b.txt"] });
    // Not a byte of the host workspace changed while the sandbox worked, nor when its tree came back ...
    expect(seen.afterTool).toEqual(before);
    expect(seen.copiedOut).toEqual(before);
    // ... the apply made the changes, and only those.
    expect(seen.applied).toEqual(fingerprint(ws));
    expect(treeSnapshot(ws)).toEqual({
      ".": expect.stringMatching(/^dir:0:0:/),
      "a.txt": "file:0:0:644:changed\n",
      dir: "dir:0:0:755",
      "dir/c.txt": "file:0:0:644:c\n",
      "keep.txt": "file:0:0:644:keep\n",
      new: "dir:0:0:755",
      "new/d.txt": "file:0:0:644:d\n",
    });
    expect(before["keep.txt"]).toBe(fingerprint(ws)["keep.txt"]);
    expect(stagingLeftNextTo(ws)).toEqual([]);
    expect(await leftOn(remote, [outcome.runId])).toEqual([]);
  });

  it("a protected-path violation on the remote engine leaves the host workspace byte for byte as it was", async () => {
    const ws = hostileWorkspace({
      ".github/workflows/ci.yml": "on: push\n",
      "src/a.ts": "export const a = 1;\n",
      "b.txt": "b\n",
    });
    const before = fingerprint(ws);
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "echo 'export const a = 2;' > src/a.ts && rm b.txt",
            "echo 'on: push' > .github/workflows/evil.yml; echo rc=$?",
          ].join("\n"),
        ),
        finish(),
      ],
      { ...onRemote(), ...copy, cwd: ws, policy: hostilePolicy({ protectedPaths: [".github/workflows/**"] }) },
    );
    runIds.push(outcome.runId);
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("policy-violation");
    expect(outcome.error?.message).toMatch(/\.github\/workflows\/evil\.yml \(created\)/);
    expect(outcome.error?.message).toMatch(/none of the run's changes were applied/);
    expect(outcome.toolResults[0]).toBe("rc=0\n");
    expect(outcome.events.find((e) => e.type === "engine.chosen")?.data.engine).toBe(state.name);
    expect(fingerprint(ws)).toEqual(before);
    expect(stagingLeftNextTo(ws)).toEqual([]);
    expect(await leftOn(remote, [outcome.runId])).toEqual([]);
  });

  it("a runner image the remote engine lacks is loaded onto it from the local engine, then the run goes on", async () => {
    // A tag of this test's own, so removing it never takes the runner image from a concurrent run.
    const own = `sandbox-run/pi-remote-run-test:${process.pid}`;
    const [repo, ownTag] = own.split(":") as [string, string];
    await docker.getImage(runnerImageSpec().tag).tag({ repo, tag: ownTag });
    try {
      expect(await remote.imageLabels(own)).toBeUndefined();
      const ws = hostileWorkspace({ "a.txt": "a\n" });
      const outcome = await runHostile(server, [bash("cat a.txt"), finish()], {
        agent: { ...onRemote().agent, image: own },
        ...copy,
        cwd: ws,
      });
      runIds.push(outcome.runId);
      expect(outcome.details?.result, describeOutcome(outcome)).toEqual({ done: true });
      expect(outcome.details?.image).toBe(own);
      expect(outcome.toolResults[0]).toBe("a\n");
      const builds = outcome.events.filter((e) => e.type === "image.build").map((e) => e.data.line);
      expect(builds).toEqual([`Loading ${own} onto engine "${state.name}" from engine "local" ...`]);
      // Before the container: the image is there, and it is the runner image by its labels.
      const order = outcome.events.map((e) => e.type);
      expect(order.indexOf("image.build")).toBeLessThan(order.indexOf("container.created"));
      expect((await remote.imageLabels(own))?.["sandbox-run.content-hash"]).toBe(runnerImageSpec().contentHash);
    } finally {
      await remote.removeImage(own).catch(() => {});
      await localEngine.removeImage(own).catch(() => {});
    }
  });

  /**
   * A run on the remote engine through a link of its own (a second proxy into the engine's network
   * namespace, tests/support/second-engine.ts) that `cut` breaks once Pi runs its tool.
   */
  async function runWithLinkCut(cut: "SIGKILL" | "SIGSTOP", timeoutSeconds: number) {
    const link = await openExtraLink(state);
    const viaLink = remoteEngine(state, link.port);
    let cutAt = 0;
    let containerId = "";
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    // A stopped process takes SIGKILL too: nothing of the link outlives the test (and a frozen
    // link stays frozen until the test has seen what the far side did).
    onTestFinished(() => {
      try {
        process.kill(link.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    });
    const outcome = await runHostile(server, [bash("echo started > started.txt; sleep 3600"), finish()], {
      agent: { engines: new EnginePool([{ engine: viaLink, capacity: 1 }]) },
      ...copy,
      cwd: ws,
      policy: hostilePolicy({ limits: { timeoutSeconds } }),
      onEvent: (event) => {
        if (event.type === "container.created") containerId = String(event.data.containerId);
        // Pi runs its tool in the sandbox: mid-run, the link goes.
        if (!cutAt && event.type === "tool_execution_start") {
          cutAt = Date.now();
          process.kill(link.pid, cut);
        }
      },
    });
    runIds.push(outcome.runId);
    return { outcome, link, cutAt, containerId, unchanged: () => expect(fingerprint(ws)).toEqual(before), ws };
  }

  /** The sandbox as the far side sees it (asked through the intact link), once it stopped or by `by`. */
  async function sandboxStopped(containerId: string, by: number) {
    expect(containerId).not.toBe("");
    const container = remote.docker.getContainer(containerId);
    const exited = await within(
      container.wait() as Promise<{ StatusCode: number }>,
      Math.max(0, by - Date.now()),
      "the sandbox's own stop",
    );
    const running = (await container.inspect()).State.Running;
    await remote.removeContainer(containerId);
    return { running, exitCode: exited.StatusCode };
  }

  it("the link to the remote engine broken mid-run (connections reset): the run fails at once naming the engine; the sandbox stops itself", async () => {
    const timeoutSeconds = 60;
    const { outcome, link, cutAt, containerId, unchanged, ws } = await runWithLinkCut("SIGKILL", timeoutSeconds);
    expect(cutAt).toBeGreaterThan(0);
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("docker-unavailable");
    expect(outcome.error?.shortMessage).toMatch(
      new RegExp(
        `^The link to engine "${state.name}" \\(tcp://127\\.0\\.0\\.1:${link.port} \\(TLS\\)\\) broke during the run: Engine "${state.name}" at tcp://127\\.0\\.0\\.1:${link.port} \\(TLS\\) is not reachable \\((ECONNREFUSED|ECONNRESET)\\)\\.$`,
      ),
    );
    expect(outcome.error?.hint).toMatch(/stops by its deadline.*sandbox-run gc/);
    // Nothing came back, so nothing was applied.
    unchanged();
    expect(stagingLeftNextTo(ws)).toEqual([]);
    // The engine closed the relay's exec with the link; the relay saw its stdin end and the
    // launcher stopped the sandbox (long before its deadline, which bounds the wait here).
    const far = await sandboxStopped(containerId, cutAt + timeoutSeconds * 1000 + LAUNCHER_DEADLINE_GRACE_MS);
    expect(far).toEqual({ running: false, exitCode: LAUNCHER_EXIT.controllerGone });
  });

  it("the link to the remote engine gone silent mid-run (nothing closes, nothing answers): the run fails at its timeout naming the engine; the sandbox stops itself at its deadline", async () => {
    // Room for the sandbox to reach its tool first: 8 s ran out before the tool started under a
    // fresh clone's full load once (session 32), and the link was never cut.
    const timeoutSeconds = 20;
    const { outcome, link, cutAt, containerId, unchanged, ws } = await runWithLinkCut("SIGSTOP", timeoutSeconds);
    expect(cutAt).toBeGreaterThan(0);
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("docker-unavailable");
    expect(outcome.error?.shortMessage).toBe(
      `The link to engine "${state.name}" (tcp://127.0.0.1:${link.port} (TLS)) broke during the run: no answer to its ping within 5 s.`,
    );
    unchanged();
    expect(stagingLeftNextTo(ws)).toEqual([]);
    // No word reached the sandbox (its relay's link stays open on the far side): only the
    // launcher's own deadline, the run's timeout plus a grace period, stops it.
    const far = await sandboxStopped(containerId, cutAt + timeoutSeconds * 1000 + LAUNCHER_DEADLINE_GRACE_MS + 30_000);
    expect(far).toEqual({ running: false, exitCode: LAUNCHER_EXIT.deadlinePassed });
  }, 180_000);

  it("8 concurrent runs spread over both engines (local Docker and the remote one): every result right, nothing left", async () => {
    const pool = new EnginePool([
      { engine: localEngine, capacity: 4 },
      { engine: remote, capacity: 4 },
    ]);
    const schema = {
      type: "object",
      properties: { n: { type: "number" }, square: { type: "number" } },
      required: ["n", "square"],
    };
    const policy = hostilePolicy({ limits: { timeoutSeconds: 240 } });
    const workspaces = Array.from({ length: 8 }, (_, n) => hostileWorkspace({ "n.txt": `${n}\n` }));
    const outcomes = await Promise.all(
      workspaces.map((ws, n) =>
        runHostile(
          server,
          [bash('n=$(cat n.txt); echo $((n * n)) > square.txt; echo "n=$n"'), finish({ n, square: n * n })],
          { agent: { engines: pool }, ...copy, cwd: ws, schema, policy },
        ),
      ),
    );
    runIds.push(...outcomes.map((o) => o.runId));
    const placed: Record<string, number> = {};
    outcomes.forEach((outcome, n) => {
      expect(outcome.details?.result, describeOutcome(outcome)).toEqual({ n, square: n * n });
      expect(outcome.toolResults[0]).toBe(`n=${n}\n`);
      expect(outcome.details?.changedFiles).toEqual({ created: ["square.txt"], modified: [], deleted: [] });
      expect(fs.readFileSync(path.join(workspaces[n]!, "square.txt"), "utf8")).toBe(`${n * n}\n`);
      expect(stagingLeftNextTo(workspaces[n]!)).toEqual([]);
      const engine = String(outcome.events.find((e) => e.type === "engine.chosen")?.data.engine);
      placed[engine] = (placed[engine] ?? 0) + 1;
    });
    // Places are taken before any await: the least-loaded engine each time, so four and four.
    expect(placed).toEqual({ local: 4, [state.name]: 4 });
    const ids = outcomes.map((o) => o.runId);
    expect(await leftOn(localEngine, ids)).toEqual([]);
    expect(await leftOn(remote, ids)).toEqual([]);
  }, 300_000);

  describe("a controller SIGKILLed mid-run", () => {
    /** A controller in its own process whose run (on the engines of `enginesFile`) sleeps once it wrote a file. */
    async function controllerMidRun(enginesFile: string, engine: DockerEngine, tmpdir: string, ws: string) {
      const controller: SpawnedController = spawnController(
        server,
        [bash("echo x > made.txt && sleep 3600"), finish()],
        { cwd: ws, workspaceMode: "copy", reportEvents: ["container.started", "engine.chosen"] },
        { env: { ...process.env, TMPDIR: tmpdir, SANDBOX_RUN_ENGINES: enginesFile } },
      );
      const chosen = await within(controller.event("engine.chosen"), 120_000, "the choice of an engine");
      const started = await within(controller.event("container.started"), 120_000, "the sandbox's start");
      const containerId = String(started.data.containerId);
      // Its exit status, however it ends.
      const exit = engine.docker.getContainer(containerId).wait() as Promise<{ StatusCode: number }>;
      if (!(await eventually(() => sandboxHasFile(engine, containerId, path.join(ws, "made.txt")), 60_000)))
        throw new Error(`the sandbox did not write into its workspace; controller stderr:\n${controller.stderr()}`);
      return { controller, runId: started.runId, engineName: String(chosen.data.engine), containerId, exit };
    }

    it("on either engine: each sandbox stops by itself, and `gc --engines` leaves nothing on either", async () => {
      const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
      const wsRemote = hostileWorkspace({ "a.txt": "a\n" });
      const wsLocal = hostileWorkspace({ "a.txt": "a\n" });
      const before = { remote: fingerprint(wsRemote), local: fingerprint(wsLocal) };
      const [onFar, onNear] = await Promise.all([
        controllerMidRun(files.remote, remote, tmpdir, wsRemote),
        controllerMidRun(files.local, localEngine, tmpdir, wsLocal),
      ]);
      runIds.push(onFar.runId, onNear.runId);
      expect([onFar.engineName, onNear.engineName]).toEqual([state.name, "local"]);
      expect(runDirsIn(tmpdir)).toHaveLength(2);
      for (const { controller } of [onFar, onNear]) controller.child.kill("SIGKILL");
      await Promise.all([onFar.controller.exited, onNear.controller.exited]);
      // The relay of each saw its exec's stdin end (the controller's side of the engine's
      // connection closed with it): the launcher stops the sandbox at once.
      expect((await within(onFar.exit, 30_000, "the remote sandbox's exit")).StatusCode).toBe(
        LAUNCHER_EXIT.controllerGone,
      );
      // The local one may instead be removed first by another controller's start-up reaping (its
      // owner pid is gone; other test files start controllers all the time): then the engine
      // logged a kill, which a sandbox that stopped by itself never has. The remote engine has no
      // such reaper, so the promise is always checked there.
      const nearStatus = (await within(onNear.exit, 30_000, "the local sandbox's exit")).StatusCode;
      if (nearStatus !== LAUNCHER_EXIT.controllerGone)
        expect(await killedThroughEngine(onNear.containerId), `exit ${nearStatus} and no kill through the engine`).toBe(
          true,
        );

      const gc = await runBuiltCli(["gc", "--engines", files.both], { env: { ...process.env, TMPDIR: tmpdir } });
      expect(gc.stderr).not.toContain("not cleaned (engine not reachable)");
      // Where this gc removed a container itself (another controller's start-up reaping may get
      // to the local one first), it says where and why.
      for (const { runId, engineName, containerId } of [onFar, onNear]) {
        const line = gc.stderr.split("\n").find((l) => l.includes(`(run ${runId})`));
        if (line || engineName === state.name)
          expect(line).toMatch(
            new RegExp(
              `removed ${containerId.slice(0, 12)} on ${escapeRegExp(engineName)} \\(run ${runId}\\): owner process \\d+ is gone$`,
            ),
          );
      }
      expect(await leftOn(remote, [onFar.runId, onNear.runId])).toEqual([]);
      expect(await leftOn(localEngine, [onFar.runId, onNear.runId])).toEqual([]);
      expect(runDirsIn(tmpdir)).toEqual([]);
      // Copy mode: the runs never settled, so nothing of them reached the host.
      expect(fingerprint(wsRemote)).toEqual(before.remote);
      expect(fingerprint(wsLocal)).toEqual(before.local);
      expect([...stagingLeftNextTo(wsRemote), ...stagingLeftNextTo(wsLocal)]).toEqual([]);
    }, 240_000);
  });
});
