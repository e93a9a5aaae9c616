// Warm sandboxes on the real engine, the real image and real Pi (both runtimes where gVisor is
// registered): a warm call gives the cold call's result and Pi's event stream, and its record
// replays; a claimed sandbox holds nothing of an earlier claim; a warm sandbox before its claim
// reaches neither the gateway nor the egress proxy nor any network; more calls than warm
// sandboxes never share one; a sandbox whose launcher died while it waited is never used.
// (A controller killed with warm sandboxes up: warm-lifecycle.test.ts.)
import fs from "node:fs";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { ContainerPiAgent, type WarmPoolChange } from "../../src/container-pi-agent.js";
import type { RunEvent } from "../../src/run/run-events.js";
import { LABEL_OWNER_PID, LABEL_WARM, LAUNCHER_COMMAND, SANDBOX_UID, WARM_PATHS } from "../../src/sandbox-contract.js";
import { replayRecord } from "../../src/testing.js";
import {
  bashThenFinal,
  containersOfRuns,
  docker,
  makeWorkspace,
  modelsFor,
  runtimes,
  startModel,
} from "../support/harness.js";
import { DONE_SCHEMA, hostilePolicy } from "../support/hostile-model.js";

const server = await startModel();
const agents: ContainerPiAgent[] = [];
// Each test's agents go with it: their pools' sandboxes do not crowd the next test's.
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});
afterAll(async () => {
  await server.close();
  // Nothing of this file's agents is left: no warm container of this process.
  const left = await warmContainersOfThisProcess();
  for (const id of left) {
    const i = await docker.getContainer(id).inspect();
    console.log("LEFT", id, i.State.Status, i.State.ExitCode, JSON.stringify(i.Config.Labels), i.Created);
  }
  expect(left).toEqual([]);
});

let scripts = 0;
/** A model id with its own script (two steps: a bash command, then the final tool). */
function scripted(command: string, final: unknown = { done: true }): string {
  const id = `warm-${process.pid}-${scripts++}`;
  server.setScript(id, bashThenFinal(command, final));
  return id;
}

function warmAgent(
  runtime: "runc" | "runsc",
  size: number,
  models: string[],
  extra: object = {},
  onChange?: (change: WarmPoolChange) => void,
): ContainerPiAgent {
  const agent = new ContainerPiAgent({
    models: modelsFor(server, models),
    // The agent's own model shapes its pool before any call (each call names its own).
    model: `scripted/${models[0]}`,
    // gVisor's own threads count against the pids limit, warm or cold (~110 of 128 in a 2-turn task).
    policy: hostilePolicy({ runtime, limits: { pids: 256 } }),
    schema: DONE_SCHEMA,
    reapOrphans: false,
    warm: { size, idleSeconds: 120, onChange },
    ...extra,
  });
  agents.push(agent);
  return agent;
}

async function warmContainersOfThisProcess(): Promise<string[]> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [`${LABEL_WARM}=true`, `${LABEL_OWNER_PID}=${process.pid}`] },
  });
  return list.map((c) => c.Id);
}

/** Runs `script` (a shell command) in a container as the sandbox uid, and returns its stdout. */
async function execAsSandbox(containerId: string, script: string): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: ["/bin/bash", "-c", script],
    User: `${SANDBOX_UID}:${SANDBOX_UID}`,
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  await new Promise((resolve) => stream.once("end", resolve));
  // Docker's multiplexed frames: 8-byte headers around each payload.
  const raw = Buffer.concat(chunks);
  let out = "";
  for (let o = 0; o + 8 <= raw.length; ) {
    const size = raw.readUInt32BE(o + 4);
    if (raw[o] === 1) out += raw.subarray(o + 8, o + 8 + size).toString();
    o += 8 + size;
  }
  return out;
}

const events = () => {
  const list: RunEvent[] = [];
  return { list, onEvent: (e: RunEvent) => void list.push(e) };
};
const claimed = (list: RunEvent[]) => list.find((e) => e.type === "warm.claimed")?.data;

describe.each(runtimes())("warm sandboxes on %s", (runtime) => {
  it("a warm call: the cold call's result and Pi's event stream, the workspace at /workspace and back on the host, meta.warm in its record, and the record replays", async () => {
    const model = scripted(`pwd > where.txt && echo made > made.txt && cat input.txt`, { done: true });
    const agent = warmAgent(runtime, 1, [model]);
    await agent.warmUp();
    // Files the sandbox never touches, one of which the user deletes on the host meanwhile.
    const untouched = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`keep/${i}.txt`, `${i}\n`]));
    // And 40 MiB: the tree's tmpfs counts as the sandbox's memory, which a cold call gets on top of memoryMb.
    const ws = makeWorkspace({ "input.txt": "from the host\n", "big.bin": "x".repeat(40 * 1024 * 1024), ...untouched });
    const record = path.join(makeWorkspace(), "record");
    const warm = events();
    let named: Promise<string[]> | undefined;
    let memory: Promise<number | undefined> | undefined;
    const details = await agent.runDetailed("Do the task.", {
      cwd: ws,
      model: `scripted/${model}`,
      record,
      onEvent: (event) => {
        warm.onEvent(event);
        if (event.type === "tool_execution_start") {
          fs.rmSync(path.join(ws, "keep/7.txt"));
          const id = String(claimed(warm.list)?.containerId);
          memory = docker
            .getContainer(id)
            .inspect()
            .then((i) => i.HostConfig.Memory);
        }
        // While the run is on, its container carries the run's name (its labels, the pool's id).
        if (event.type === "agent_end") named = containersOfRuns([event.runId]);
      },
    });
    expect(await named).toEqual([details.containerId]);
    expect(await containersOfRuns([details.runId])).toEqual([]);
    expect(details.result).toEqual({ done: true });
    expect(details.warm).toBe(true);
    expect(claimed(warm.list)).toMatchObject({
      containerId: details.containerId,
      warmId: expect.stringMatching(/^warm-/),
    });
    expect(warm.list.some((e) => e.type === "container.created")).toBe(false);
    // Its memory limit grew by the tree's size at the claim where the runtime allows it (runc).
    const raised = warm.list.find((e) => e.type === "warm.memory")?.data;
    const policyMb = 768;
    if (runtime === "runsc") {
      expect(raised).toEqual({ treesMb: 41, memoryMb: policyMb, notRaised: expect.stringMatching(/gVisor/) });
      expect(await memory).toBe(policyMb * 1024 * 1024);
    } else {
      expect(raised).toEqual({ treesMb: 41, memoryMb: policyMb + 41 });
      expect(await memory).toBe((policyMb + 41) * 1024 * 1024);
    }
    // The workspace was copied in at the fixed path, and what the sandbox made came back.
    expect(fs.readFileSync(path.join(ws, "where.txt"), "utf8")).toBe(`${WARM_PATHS.workspace}\n`);
    expect(fs.readFileSync(path.join(ws, "made.txt"), "utf8")).toBe("made\n");
    expect(details.changedFiles.created.sort()).toEqual(["made.txt", "where.txt"]);
    // Only what the sandbox wrote came back as changed: files extracted in the tick of the copy-in
    // mark came back whole before, and one the user deleted on the host then refused the whole
    // apply as "changed on the host" (review, session 29: 7 warm runs in 10).
    expect(warm.list.find((e) => e.type === "workspace.copied-out")?.data.changed).toBe(2);
    expect(fs.existsSync(path.join(ws, "keep/7.txt"))).toBe(false);
    expect(fs.readFileSync(path.join(ws, "keep/8.txt"), "utf8")).toBe("8\n");

    // Pi's own events are the cold call's, type for type.
    const coldAgent = new ContainerPiAgent({
      models: modelsFor(server, [model]),
      policy: hostilePolicy({ runtime, limits: { pids: 256 } }),
      schema: DONE_SCHEMA,
      reapOrphans: false,
      workspaceMode: "copy",
      workspacePath: WARM_PATHS.workspace,
      warm: 0,
    });
    agents.push(coldAgent);
    const cold = events();
    const coldDetails = await coldAgent.runDetailed("Do the task.", {
      cwd: makeWorkspace({ "input.txt": "from the host\n" }),
      model: `scripted/${model}`,
      onEvent: cold.onEvent,
    });
    expect(coldDetails.warm).toBe(false);
    const piTypes = (list: RunEvent[]) => list.filter((e) => e.source === "pi").map((e) => e.type);
    expect(piTypes(warm.list)).toEqual(piTypes(cold.list));
    expect(piTypes(warm.list)[0]).toBe("session");

    const meta = JSON.parse(fs.readFileSync(path.join(record, "meta.json"), "utf8"));
    expect(meta.warm).toBe(true);
    // The record of a warm call replays (here in a warm sandbox too: the same shape).
    const replayed = await agent.runDetailed("Do the task.", {
      cwd: makeWorkspace({ "input.txt": "from the host\n" }),
      replay: replayRecord(record),
    });
    expect(replayed.result).toEqual({ done: true });
    expect(replayed.replay?.outcome).toEqual({ matches: true, differences: [] });
  });

  it("a claimed sandbox holds nothing of an earlier claim: another container, fresh /tmp, $HOME and workspace, its own gateway", async () => {
    const first = scripted(
      "echo secret-1 > /tmp/left-by-first && echo secret-1 > ~/left-by-first && echo secret-1 > left-by-first && hostname",
    );
    const second = scripted(
      "ls -A /tmp ~ . | tr '\\n' ' '; cat /tmp/left-by-first ~/left-by-first left-by-first 2>&1 | tr '\\n' ' '; hostname",
    );
    const agent = warmAgent(runtime, 1, [first, second]);
    await agent.warmUp();
    const one = events();
    const a = await agent.runDetailed("Do the task.", {
      cwd: makeWorkspace(),
      model: `scripted/${first}`,
      onEvent: one.onEvent,
    });
    const two = events();
    const b = await agent.runDetailed("Do the task.", {
      cwd: makeWorkspace({ "own.txt": "2" }),
      model: `scripted/${second}`,
      onEvent: two.onEvent,
    });
    expect(a.warm && b.warm).toBe(true);
    expect(b.containerId).not.toBe(a.containerId);
    expect(claimed(two.list)?.warmId).not.toBe(claimed(one.list)?.warmId);
    const seen = toolOutput(second);
    expect(seen).not.toContain("secret-1");
    expect(seen).toContain("No such file or directory");
    expect(seen).toContain("own.txt");
    expect(seen).not.toContain("left-by-first ");
    // Each call's requests went to its own gateway (its own run, its own socket in its own run folder).
    const gatewayRuns = (list: RunEvent[]) =>
      new Set(list.filter((e) => e.type === "gateway.exchange").map((e) => e.runId));
    expect([...gatewayRuns(one.list)]).toEqual([a.runId]);
    expect([...gatewayRuns(two.list)]).toEqual([b.runId]);
    // The first sandbox is gone.
    await expect(docker.getContainer(a.containerId).inspect()).rejects.toThrow(/no such container/i);
  });

  it("before its claim a warm sandbox holds no workspace and no secret, and reaches neither the gateway nor the proxy nor any network", async () => {
    const model = scripted("true");
    const agent = new ContainerPiAgent({
      models: modelsFor(server, [model]),
      model: `scripted/${model}`,
      policy: hostilePolicy({
        runtime,
        network: "allowlist",
        allowedDomains: ["example.com"],
        limits: { pids: 256 },
      }),
      schema: DONE_SCHEMA,
      reapOrphans: false,
      warm: { size: 1, idleSeconds: 120 },
      env: { CALL_SECRET: "call-secret-value" },
    });
    agents.push(agent);
    await agent.warmUp();
    const [id] = await warmContainersOfThisProcess().then((ids) => ids.filter(Boolean));
    expect(id).toBeDefined();
    const inspect = await docker.getContainer(id!).inspect();
    expect(inspect.HostConfig.NetworkMode).toBe("none");
    expect(inspect.Mounts).toEqual([]);
    expect(JSON.stringify(inspect.Config.Env)).not.toContain("call-secret-value");
    expect(JSON.stringify(inspect.Config.Env)).not.toContain("scripted");
    // Code running as the sandbox's uid in the waiting sandbox (as anything in there would).
    const probe = await execAsSandbox(
      id!,
      [
        "ls -A /workspace | wc -l",
        "ls -A /run/sandbox-run",
        'for port in 18080 18081; do timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && echo open-$port || echo closed-$port; done',
        "timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443' 2>/dev/null && echo internet || echo no-internet",
        "timeout 5 bash -c 'exec 3<>/dev/tcp/172.17.0.1/2375' 2>/dev/null && echo host || echo no-host",
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c CALL_SECRET",
      ].join("; echo ---; "),
    );
    const [workspaceEntries, socketDir, ports, internet, host, secret] = probe.split("---").map((s) => s.trim());
    expect(workspaceEntries).toBe("0");
    // Only the relay's bridge socket's place: no gateway, no proxy socket.
    expect(socketDir).not.toMatch(/gateway|proxy/);
    expect(ports).toBe("closed-18080\nclosed-18081");
    expect(internet).toBe("no-internet");
    expect(host).toBe("no-host");
    expect(secret).toBe("0");
  });

  // The pool's own logic (claims racing for fewer sandboxes, a call it cannot serve) is the same
  // whatever runs the containers: on runc only (on gVisor: 84 s of the file's 362 s).
  const poolLogic = runtime === "runc" ? it : undefined;

  poolLogic?.(
    "more calls at once than warm sandboxes: each its own sandbox, each its own result, nothing left",
    async () => {
      const models = Array.from({ length: 5 }, (_, i) => scripted(`cat id.txt`, { done: true, id: i }));
      const agent = warmAgent(runtime, 2, models, { schema: undefined });
      await agent.warmUp();
      const logs = models.map(() => events());
      const results = await Promise.all(
        models.map((model, i) =>
          agent.runDetailed("Do the task.", {
            cwd: makeWorkspace({ "id.txt": `call ${i}\n` }),
            model: `scripted/${model}`,
            schema: { type: "object", properties: { done: { type: "boolean" }, id: { type: "number" } } },
            onEvent: logs[i]!.onEvent,
          }),
        ),
      );
      for (const [i, r] of results.entries()) expect(r.result).toEqual({ done: true, id: i });
      for (const [i, model] of models.entries()) expect(toolOutput(model)).toContain(`call ${i}`);
      const containers = results.map((r) => r.containerId);
      expect(new Set(containers).size).toBe(5);
      const warmIds = logs.flatMap((l) => (claimed(l.list) ? [String(claimed(l.list)!.warmId)] : []));
      expect(new Set(warmIds).size).toBe(warmIds.length);
      expect(warmIds.length).toBeGreaterThanOrEqual(2);
      // The others waited for a sandbox being made, or started cold and said why.
      for (const log of logs.filter((l) => !claimed(l.list)))
        expect(log.list.find((e) => e.type === "warm.miss")?.data.reason).toMatch(/taken|could not/);
      for (const id of containers)
        await expect(docker.getContainer(id).inspect()).rejects.toThrow(/no such container/i);
    },
  );

  it("a warm sandbox whose launcher was killed while it waited is never used: the call gets another, or starts cold", async () => {
    const model = scripted("echo ok");
    const made: string[] = [];
    const agent = warmAgent(runtime, 1, [model], {}, (change) => {
      if (change.type === "warm.made") made.push(change.containerId);
    });
    await agent.warmUp();
    const [victim] = made;
    // As the sandbox's uid, find the waiting launcher (the process Pi would become), then kill it
    // from an exec nobody waits on: the container ends with it, and on gVisor an exec the
    // container's end cuts short may never close its output stream.
    const launcher = await execAsSandbox(
      victim!,
      `for p in /proc/[0-9]*; do [ "\${p#/proc/}" = "$$" ] && continue; if [ "$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)" = '${LAUNCHER_COMMAND.join(" ")} ' ]; then echo \${p#/proc/}; fi; done`,
    );
    expect(launcher.trim()).toMatch(/^\d+$/);
    const kill = await docker.getContainer(victim!).exec({
      Cmd: ["/bin/bash", "-c", `kill -9 ${launcher.trim()}`],
      User: `${SANDBOX_UID}:${SANDBOX_UID}`,
    });
    await kill.start({ Detach: true });
    // The call comes once the launcher is gone (its container stopped with it), so the sandbox
    // it finds has certainly died while it waited.
    const running = () =>
      docker
        .getContainer(victim!)
        .inspect()
        .then(
          (i) => i.State.Running,
          () => false,
        );
    while (await running()) await new Promise((resolve) => setTimeout(resolve, 50));
    const log = events();
    const details = await agent.runDetailed("Do the task.", {
      cwd: makeWorkspace(),
      model: `scripted/${model}`,
      onEvent: log.onEvent,
    });
    expect(details.result).toEqual({ done: true });
    expect(details.containerId).not.toBe(victim);
    expect(agent.warmStats()?.discarded).toBeGreaterThanOrEqual(1);
    await expect(docker.getContainer(victim!).inspect()).rejects.toThrow(/no such container/i);
  });

  it("a warm sandbox that stops while it is made says why (here its idle deadline passes before Pi is loaded), and is removed", async () => {
    const changes: WarmPoolChange[] = [];
    const agent = warmAgent(runtime, 1, [scripted("true")], {
      warm: { size: 1, idleSeconds: 0.2, onChange: (change: WarmPoolChange) => changes.push(change) },
    });
    const launcherSaid = /its stderr: sandbox-run launcher: no call claimed this warm sandbox within 0\.2 s; stopping/;
    await expect(agent.warmUp()).rejects.toThrow(launcherSaid);
    const failed = changes.find((change) => change.type === "warm.make-failed");
    const reason = failed && "reason" in failed ? failed.reason : undefined;
    expect(reason).toMatch(launcherSaid);
    // Found when it stopped, not at the end of the load timeout (under gVisor its relay's exec
    // could stay open after the sandbox stopped, and the pool waited 120 s to say so).
    expect(reason).not.toMatch(/did not load Pi/);
    await agent.close();
    expect(await warmContainersOfThisProcess()).toEqual([]);
  });

  poolLogic?.(
    "a call the pool cannot serve starts cold and says why (another runtime's limits, bind mode asked)",
    async () => {
      const model = scripted("true");
      const agent = warmAgent(runtime, 1, [model]);
      const log = events();
      const details = await agent.runDetailed("Do the task.", {
        cwd: makeWorkspace(),
        model: `scripted/${model}`,
        policy: hostilePolicy({ runtime, limits: { pids: 256, memoryMb: 640 } }),
        onEvent: log.onEvent,
      });
      expect(details.warm).toBe(false);
      expect(log.list.find((e) => e.type === "warm.miss")?.data.reason).toMatch(/limit memoryMb 640/);
      expect(log.list.some((e) => e.type === "container.created")).toBe(true);
      const bind = events();
      await agent.runDetailed("Do the task.", {
        cwd: makeWorkspace(),
        model: `scripted/${model}`,
        workspaceMode: "bind",
        onEvent: bind.onEvent,
      });
      expect(bind.list.find((e) => e.type === "warm.miss")?.data.reason).toMatch(/bind mode/);
    },
  );
});

/** What the sandbox's bash printed for `model`'s run (the last tool result the model was sent). */
function toolOutput(model: string): string {
  const requests = server.requests.filter((r) => r.body.model === model);
  const messages = requests[requests.length - 1]?.body.messages ?? [];
  const tool = [...messages].reverse().find((m: { role: string }) => m.role === "tool");
  const content = tool?.content;
  return typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((c: { text?: string }) => c.text ?? "").join("")
      : "";
}
