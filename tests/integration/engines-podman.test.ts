// The same seam against Podman's Docker-compatible service (Debian's Podman 4.3.1, rootful, cgroup
// v1): real Pi in a real sandbox, the boundary and the limits hold as on Docker, a runtime Podman
// would ignore is refused instead of silently swapped, rootless Podman that would drop the limits
// is refused, and a pool spreads concurrent runs over Docker and Podman.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { EnginePool } from "../../src/engine/engine-pool.js";
import type { SandboxRunError } from "../../src/errors.js";
import { ensureRunnerImage } from "../../src/image/ensure-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { containerLabels, LABEL_RUN_ID, SANDBOX_UID } from "../../src/sandbox-contract.js";
import { containersOfRuns, engine as localEngine, modelsFor } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";
import {
  podmanInstalled,
  ROOTFUL_SOCKET,
  rootlessSocket,
  serviceAnswers,
  startRootfulService,
  startRootlessService,
} from "../support/podman-service.js";

const server = useHostileModelServer();
const podmanExpected = Boolean(process.env.CI) || podmanInstalled();

describe.skipIf(!podmanExpected)("Podman's Docker-compatible service", () => {
  let stopService: () => void = () => {};
  const podman = new DockerEngine({ name: "podman", endpoint: { kind: "unix", socketPath: ROOTFUL_SOCKET } });
  const onPodman = { agent: { engine: podman } };
  const runIds: string[] = [];

  beforeAll(async () => {
    stopService = await startRootfulService();
    // A new engine lacks the runner image: it is loaded from the controller's Docker engine.
    await ensureRunnerImage(podman, { sources: [localEngine] });
  });

  afterAll(async () => {
    // Nothing of any run is left on Podman.
    const left = (await Promise.all(runIds.map((id) => podman.listContainers([`${LABEL_RUN_ID}=${id}`])))).flat();
    stopService();
    expect(left).toEqual([]);
  });

  it("says it is Podman, and lists only the runtime its service really runs", async () => {
    const info = await podman.info();
    expect(info.product).toBe("podman");
    expect(info.version).toMatch(/^4\./);
    expect(Object.keys(info.runtimes)).toEqual(["runc"]);
    expect(podman.sharesHostFilesystem).toBe(true);
  });

  it("runs real Pi: the result, and a file written to the workspace that belongs to the caller", async () => {
    const ws = hostileWorkspace({ "README.md": "# project\n" });
    const outcome = await runHostile(server, [bash("id -u; echo from-podman > out.txt"), finish({ done: true })], {
      ...onPodman,
      cwd: ws,
    });
    runIds.push(outcome.runId);
    expect(outcome.details?.result, describeOutcome(outcome)).toEqual({ done: true });
    expect(outcome.toolResults[0]).toMatch(
      new RegExp(`^${process.getuid?.() === 0 ? SANDBOX_UID : process.getuid?.()}\\n`),
    );
    expect(outcome.details?.changedFiles.created).toEqual(["out.txt"]);
    expect(fs.readFileSync(path.join(ws, "out.txt"), "utf8")).toBe("from-podman\n");
    expect(fs.statSync(path.join(ws, "out.txt")).uid).toBe(process.getuid?.());
    expect(outcome.events.find((e) => e.type === "engine.chosen")?.data.engine).toBe("podman");
  });

  it("the boundary holds as on Docker: read-only root, no capabilities, no-new-privileges, seccomp, no network, limits", async () => {
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "touch /etc/x 2>/dev/null && echo root=writable || echo root=read-only",
            "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status",
            "echo ifaces=$(ls /sys/class/net | tr '\\n' ' ')",
            "echo memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)",
            "echo pids=$(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max)",
            "echo core=$(ulimit -c)",
            // Podman gives a tmpfs root the mode of the image's folder (755), not the `mode=` asked for.
            'echo home=$(stat -c "%u" $HOME) tmp=$(stat -c "%a" /tmp)',
            "printf '#!/bin/sh\\necho tmp-exec\\n' > /tmp/x && chmod +x /tmp/x && { /tmp/x 2>/dev/null || echo tmp-noexec; }",
            // Podman's own tmpfs on /var/tmp and /run (writable, unbounded) is replaced by ours.
            "touch /var/tmp/x 2>/dev/null && echo var-tmp=writable || echo var-tmp=read-only",
            "echo run-kb=$(df -k /run | tail -1 | awk '{print $2}')",
            "dd if=/dev/zero of=/run/fill bs=1M count=4 2>/dev/null && echo run=4m-written || echo run=full",
          ].join("\n"),
        ),
        finish(),
      ],
      { ...onPodman, policy: hostilePolicy({ limits: { memoryMb: 512, pids: 96 } }) },
    );
    runIds.push(outcome.runId);
    const uid = process.getuid?.() === 0 ? SANDBOX_UID : process.getuid?.();
    expect(outcome.toolResults[0]?.trim().split("\n"), describeOutcome(outcome)).toEqual([
      "root=read-only",
      "CapEff:\t0000000000000000",
      "NoNewPrivs:\t1",
      "Seccomp:\t2",
      "ifaces=lo",
      `memory=${512 * 1024 * 1024}`,
      "pids=96",
      "core=0",
      // The home tmpfs is the sandbox user's (Podman's `U`), /tmp is shared and exec as on Docker
      // (session 27: `go test` runs the binaries it builds there).
      `home=${uid} tmp=1777`,
      "tmp-exec",
      "var-tmp=read-only",
      "run-kb=1024",
      "run=full",
    ]);
  });

  it("memory hog: the memory limit kills it (Podman does not report a tool's OOM kill; see podman-compat.ts)", async () => {
    const outcome = await runHostile(
      server,
      [
        bash(
          `node -e 'const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))'; echo exit=$?; grep oom_kill /sys/fs/cgroup/memory/memory.oom_control`,
        ),
        // The container then ends by itself, before any stop of the host's, and its cgroup with it:
        // the counter must have been read as the tool ended (a run that settled and exited first
        // went unreported, a flaky test in session 36).
        bash("kill -KILL $PPID"),
      ],
      { ...onPodman, policy: hostilePolicy({ limits: { memoryMb: 256 } }) },
    );
    runIds.push(outcome.runId);
    // Killed by the kernel inside the 256 MiB cgroup, not by anything of ours.
    expect(outcome.toolResults[0], describeOutcome(outcome)).toMatch(/exit=137\noom_kill_disable 0\noom_kill [1-9]/);
    // The host read the cgroup's counter when it stopped the container: the run reports the limit as on Docker.
    expect(outcome.error, describeOutcome(outcome)).toMatchObject({ code: "limit", limit: "memory" });
  });

  // Review, session 34: the counter was read by an exec of `cat` as uid 0, found on the image's
  // PATH, and a derived image's own `cat` ran as root beside the sandbox, in its workspace.
  it("the OOM counter is read on the host: nothing of the image runs as root when the host stops a container", async () => {
    const tag = `sandbox-run-test/podman-cat:${process.pid}`;
    const podmanCli = (...args: string[]) => {
      const result = spawnSync("podman", args, { encoding: "utf8" });
      expect(result.status, `${args.join(" ")}: ${result.stderr}`).toBe(0);
      return result.stdout.trim();
    };
    const maker = `sandbox-run-test-podman-cat-${process.pid}`;
    // Where the workspace is inside (bind mode: its host path), for the stand-in `cat` to write
    // (an exec's environment is not the image's).
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    podmanCli(
      "run",
      "--name",
      maker,
      // Podman's own defaults (1048576) are more than this host grants (podman-compat.ts).
      "--ulimit",
      "nofile=1024:1024",
      "--ulimit",
      "nproc=1024:1024",
      "--user",
      "0:0",
      "--entrypoint",
      "/bin/sh",
      runnerImageSpec().tag,
      "-c",
      `mkdir -p /usr/local/sbin && printf '#!/bin/sh\\nid -u > "${ws}/drop/cat-ran-as" 2>/dev/null\\nexec /bin/cat "$@"\\n' > /usr/local/sbin/cat && chmod 755 /usr/local/sbin/cat`,
    );
    const imagePath = (
      JSON.parse(podmanCli("image", "inspect", "--format", "{{json .Config.Env}}", runnerImageSpec().tag)) as string[]
    )
      .find((e) => e.startsWith("PATH="))!
      .slice("PATH=".length);
    podmanCli("commit", "--change", `ENV PATH=/usr/local/sbin:${imagePath}`, maker, tag);
    onTestFinished(() => {
      spawnSync("podman", ["rm", "-f", maker]);
      spawnSync("podman", ["rmi", "-f", tag]);
    });
    const since = new Date(Date.now() - 1000).toISOString();
    // Stopped by the host (its timeout) while running: the counter is read then. The folder anyone
    // may write to is where a uid 0 without capabilities could write (the review's `drop/`).
    const outcome = await runHostile(server, [bash("mkdir drop && chmod 777 drop; sleep 120"), finish()], {
      ...onPodman,
      cwd: ws,
      image: tag,
      // Long enough for Pi's first turn on a loaded machine (at 8 s, a suite beside other work
      // timed out before the tool ran, with no folder to judge).
      timeoutMs: 20_000,
    });
    runIds.push(outcome.runId);
    // The folder's mode is a violation of its own (set back), which outranks the timeout.
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("policy-violation");
    expect(outcome.events.some((e) => e.type === "limit.tripped" && e.data.code === "timeout")).toBe(true);
    expect(fs.existsSync(path.join(ws, "drop"))).toBe(true);
    // Nothing made it, and the host saw nothing made (the judge sets a root-owned file's fate at the hand-back).
    expect(fs.existsSync(path.join(ws, "drop", "cat-ran-as"))).toBe(false);
    expect(JSON.stringify([outcome.events, outcome.error?.changedFiles ?? null])).not.toContain("cat-ran-as");
    // And the engine's own log: no exec in the run's container at all.
    const execs = podmanCli(
      "events",
      "--since",
      since,
      "--stream=false",
      "--filter",
      "event=exec",
      "--format",
      "{{.Name}}",
    );
    expect(execs.split("\n")).not.toContain(`sandbox-run-${outcome.runId}`);
  });

  it("fork bomb: the pids limit stops it", async () => {
    const outcome = await runHostile(
      server,
      [
        bash(
          `for i in $(seq 200); do sleep 30 & done 2>&1 | grep -m1 -o 'Resource temporarily unavailable'; echo forked`,
        ),
        finish(),
      ],
      { ...onPodman, policy: hostilePolicy({ limits: { pids: 64 } }) },
    );
    runIds.push(outcome.runId);
    expect(outcome.toolResults[0], describeOutcome(outcome)).toContain("Resource temporarily unavailable");
  });

  it("a read-only run cannot change the workspace", async () => {
    const ws = hostileWorkspace({ "keep.txt": "original\n" });
    const outcome = await runHostile(
      server,
      // One pipe for both streams: the shell's own redirection errors then come before the status line.
      [bash("{ echo changed > keep.txt; echo > new.txt; echo status=$?; } 2>&1"), finish()],
      { ...onPodman, cwd: ws, sandbox: "read-only", policy: undefined },
    );
    runIds.push(outcome.runId);
    expect(outcome.toolResults[0], describeOutcome(outcome)).toMatch(/Read-only file system[\s\S]*status=1/);
    expect(fs.readFileSync(path.join(ws, "keep.txt"), "utf8")).toBe("original\n");
    expect(fs.existsSync(path.join(ws, "new.txt"))).toBe(false);
  });

  it("a run that asks for gVisor is refused, not run on runc behind its back", async () => {
    const outcome = await runHostile(server, [finish()], {
      ...onPodman,
      policy: hostilePolicy({ runtime: "runsc" }),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("usage");
    // The pool asks the engine which runtimes it really runs (Podman ignores the one a container asks for).
    expect(outcome.error?.shortMessage).toBe("No engine of the pool offers the runtime runsc (podman: runc).");
    expect(await podman.listContainers([`${LABEL_RUN_ID}=${outcome.plan?.runId}`])).toEqual([]);
    // Below the pool, the engine itself refuses such a container, naming why.
    const error = await podman
      .createContainer({
        image: "unused",
        entrypoint: ["true"],
        cmd: [],
        env: {},
        user: "65532:65532",
        labels: {},
        runtime: "runsc",
        network: "none",
        mounts: [],
        tmpfs: {},
        limits: { memoryMb: 64, pids: 16 },
        openStdin: false,
        init: false,
      })
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(
      /^Engine "podman" is Podman 4\.[\d.]+, which runs every container with its service's runtime \(runc\); it cannot give this run runsc\./,
    );
  });

  it("rootless Podman: refused where it would drop the limits (cgroup v1), else it runs as the caller", async () => {
    // CI's (scripts/test-engines.sh), or one started here for this test.
    const stopRootless = await startRootlessService();
    onTestFinished(stopRootless);
    const socket = rootlessSocket();
    expect(socket && (await serviceAnswers(socket)), `no rootless service at ${socket}`).toBe(true);
    const rootless = new DockerEngine({ name: "rootless", endpoint: { kind: "unix", socketPath: socket! } });
    const service = await rootless.podman();
    expect(service?.rootless).toBe(true);
    if (!service?.cgroupControllers.includes("memory")) {
      // Refused before anything is created (or any image is needed).
      const error = await rootless
        .createContainer({
          image: "unused",
          entrypoint: ["true"],
          cmd: [],
          env: {},
          user: "65532:65532",
          labels: {},
          runtime: "runc",
          network: "none",
          mounts: [],
          tmpfs: {},
          limits: { memoryMb: 64, pids: 16, cpus: 1 },
          openStdin: false,
          init: false,
        })
        .catch((e: unknown) => e);
      expect((error as SandboxRunError).code).toBe("docker-unavailable");
      expect((error as SandboxRunError).shortMessage).toBe(
        `Engine "rootless" is rootless Podman ${service?.version} on cgroup ${service?.cgroupVersion}, which cannot enforce the sandbox's memory, pids, cpu limits (it would silently drop them).`,
      );
    } else {
      await ensureRunnerImage(rootless, { sources: [localEngine] });
      const outcome = await runHostile(server, [bash("id -u"), finish()], { agent: { engine: rootless } });
      expect(outcome.details?.result, describeOutcome(outcome)).toEqual({ done: true });
    }
  });

  it("start-up reaping covers every engine of the pool, also one no run goes to", async () => {
    const dead = spawnSync("true").pid!;
    const orphanRun = `orphan-podman-${process.pid}`;
    const orphan = await podman.createContainer({
      image: runnerImageSpec().tag,
      entrypoint: ["true"],
      cmd: [],
      env: {},
      user: `${SANDBOX_UID}:${SANDBOX_UID}`,
      labels: containerLabels({ runId: orphanRun, pid: dead, host: os.hostname(), createdAt: new Date() }),
      runtime: "runc",
      network: "none",
      mounts: [],
      tmpfs: {},
      limits: { memoryMb: 64, pids: 16 },
      openStdin: false,
      init: true,
    });
    runIds.push(orphanRun);
    const pool = new EnginePool([
      { engine: localEngine, capacity: 2 },
      { engine: podman, capacity: 0 },
    ]);
    server.setScript("reap-start", [finish({ done: true })]);
    const agent = new ContainerPiAgent({ engines: pool, models: modelsFor(server, ["reap-start"]) });
    const details = await agent.runDetailed("task", {
      model: "scripted/reap-start",
      cwd: hostileWorkspace(),
      policy: hostilePolicy(),
      schema: { type: "object", properties: { done: { type: "boolean" } }, required: ["done"] },
    });
    expect(details.result).toEqual({ done: true });
    // Reaping runs in the background: wait (bounded) for the orphan on Podman to go.
    for (let i = 0; i < 120 && (await podman.listContainers([`${LABEL_RUN_ID}=${orphanRun}`])).length > 0; i++)
      await new Promise((r) => setTimeout(r, 250));
    expect(await podman.listContainers([`${LABEL_RUN_ID}=${orphanRun}`])).toEqual([]);
    expect(orphan.id).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a pool spreads 8 concurrent runs over Docker and Podman; all results correct, nothing left", async () => {
    const pool = new EnginePool([
      { engine: localEngine, capacity: 4 },
      { engine: podman, capacity: 4 },
    ]);
    const ids = Array.from({ length: 8 }, (_, i) => `pool-${i}`);
    for (const id of ids) server.setScript(id, [bash(`echo ${id} > ${id}.txt`), finish({ done: true, id })]);
    const agent = new ContainerPiAgent({ engines: pool, models: modelsFor(server, ids), reapOrphans: false });
    const workspaces = Object.fromEntries(ids.map((id) => [id, hostileWorkspace()]));
    const chosen: Record<string, string> = {};
    const results = await Promise.all(
      ids.map((id) =>
        agent.runDetailed(`task ${id}`, {
          model: `scripted/${id}`,
          cwd: workspaces[id],
          policy: hostilePolicy(),
          schema: {
            type: "object",
            properties: { done: { type: "boolean" }, id: { type: "string" } },
            required: ["done", "id"],
          },
          onEvent: (e) => {
            if (e.type === "engine.chosen") chosen[id] = String(e.data.engine);
          },
        }),
      ),
    );
    expect(results.map((r) => r.result)).toEqual(ids.map((id) => ({ done: true, id })));
    for (const id of ids) expect(fs.readFileSync(path.join(workspaces[id]!, `${id}.txt`), "utf8")).toBe(`${id}\n`);
    expect(Object.values(chosen).filter((e) => e === "local")).toHaveLength(4);
    expect(Object.values(chosen).filter((e) => e === "podman")).toHaveLength(4);
    const runs = results.map((r) => r.runId);
    runIds.push(...runs);
    expect(await containersOfRuns(runs)).toEqual([]);
    expect(pool.load()).toEqual([
      { engine: "local", active: 0, capacity: 4 },
      { engine: "podman", active: 0, capacity: 4 },
    ]);
  });
});
