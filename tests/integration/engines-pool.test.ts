// Runs through the pool against real engines: a link that breaks mid-run fails the run naming the
// engine (the engine here is this host's Docker behind a unix-socket proxy the test cuts), and a
// pool none of whose engines answers names each one and why.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { EnginePool } from "../../src/engine/engine-pool.js";
import { LABEL_RUN_ID } from "../../src/sandbox-contract.js";
import { dockerAvailable, engine as localEngine, modelsFor } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** A unix socket that forwards to the Docker socket until cut(). */
async function socketProxy(dir: string) {
  const socketPath = path.join(dir, "engine.sock");
  const open = new Set<net.Socket>();
  const proxy = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ path: "/var/run/docker.sock", allowHalfOpen: true });
    for (const s of [client, upstream]) {
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(socketPath, resolve));
  return {
    socketPath,
    cut: () => {
      proxy.close();
      for (const s of open) s.destroy();
    },
  };
}

describe.skipIf(!dockerAvailable())("runs through an engine pool", () => {
  const leftovers: string[] = [];

  afterAll(async () => {
    for (const runId of leftovers) {
      for (const c of await localEngine.listContainers([`${LABEL_RUN_ID}=${runId}`]))
        await localEngine.removeContainer(c.id);
    }
  });

  it("a link that breaks mid-run: the run fails naming the engine and where it is", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-proxy-"));
    const link = await socketProxy(dir);
    const proxied = new DockerEngine({ name: "proxied", endpoint: { kind: "unix", socketPath: link.socketPath } });
    let cut = false;
    const outcome = await runHostile(server, [bash("echo started; sleep 30"), finish()], {
      agent: { engines: new EnginePool([{ engine: proxied, capacity: 2 }]) },
      onEvent: (event) => {
        // Pi is running its tool: the sandbox is mid-run when the link goes.
        if (!cut && event.type === "tool_execution_start") {
          cut = true;
          link.cut();
        }
      },
    });
    leftovers.push(outcome.plan?.runId ?? "");
    fs.rmSync(dir, { recursive: true, force: true });
    expect(cut).toBe(true);
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("docker-unavailable");
    expect(outcome.error?.shortMessage).toMatch(
      new RegExp(
        `^The link to engine "proxied" \\(unix://${link.socketPath.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\) broke during the run: Engine "proxied" at unix://.* is not reachable \\((ENOENT|ECONNREFUSED)\\)\\.$`,
      ),
    );
    expect(outcome.error?.hint).toMatch(/sandbox-run gc/);
    // A bind-mode run wrote the workspace itself: it says that nothing judged it (review, session 33).
    expect(outcome.plan?.workspaceMode).toBe("bind");
    expect(outcome.error?.hint).toContain(`What the sandbox wrote in ${outcome.plan?.workingDir} was not judged`);
    expect(outcome.error?.hint).toMatch(/do not run git, direnv or an editor there/);
  });

  it("when no engine of the pool answers, the run fails naming each engine and why", async () => {
    const refused = net.createServer();
    await new Promise<void>((resolve) => refused.listen(0, "127.0.0.1", resolve));
    const port = (refused.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => refused.close(() => resolve()));
    const pool = new EnginePool([
      {
        engine: new DockerEngine({ name: "gone", endpoint: { kind: "unix", socketPath: "/nonexistent/docker.sock" } }),
        capacity: 1,
      },
      { engine: new DockerEngine({ name: "down", endpoint: { kind: "tcp", host: "127.0.0.1", port } }), capacity: 1 },
    ]);
    const events: string[] = [];
    const agent = new ContainerPiAgent({
      engines: pool,
      model: "scripted/none",
      models: modelsFor(server, ["none"]),
      reapOrphans: false,
    });
    const error = await agent
      .run("task", {
        cwd: hostileWorkspace(),
        onEvent: (e) => {
          if (e.type === "engine.skipped") events.push(String(e.data.engine));
        },
      })
      .catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe("docker-unavailable");
    expect((error as Error).message).toContain(
      'No engine of the pool answered: gone (unix:///nonexistent/docker.sock): Engine "gone" at unix:///nonexistent/docker.sock is not reachable (ENOENT); ' +
        `down (tcp://127.0.0.1:${port}): Engine "down" at tcp://127.0.0.1:${port} ${
          // As root, plain tcp is refused before any connection, even to loopback.
          process.geteuid?.() === 0
            ? "would be reached without TLS, and this controller runs as root"
            : "is not reachable (ECONNREFUSED)."
        }`,
    );
    expect(events).toEqual(["gone", "down"]);
  });
});
