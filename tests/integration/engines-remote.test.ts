// A second, real Docker engine that is "another machine": its own network and mount namespace,
// reached only over TCP with mutual TLS (tests/support/second-engine.ts). The seam works against
// it (ping, info, image load from the controller's engine, create/attach/exec/remove), it shares
// none of this machine's paths, a cut link is named, and gc/doctor cover it.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import tls from "node:tls";
import tarStream from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DockerEngine } from "../../src/engine/docker-engine.js";
import type { ContainerSpec, EngineContainer } from "../../src/engine/engine.js";
import { EnginePool } from "../../src/engine/engine-pool.js";
import type { SandboxRunError } from "../../src/errors.js";
import { ensureRunnerImage } from "../../src/image/ensure-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { containerLabels, IMAGE_LABEL_CONTENT_HASH, LABEL_RUN_ID, SANDBOX_UID } from "../../src/sandbox-contract.js";
import { docker, engine as localEngine, runBuiltCli } from "../support/harness.js";
import {
  engineFileEntry,
  openExtraLink,
  remoteEngine,
  type SecondEngineState,
  secondEngineExpected,
  useSecondEngine,
} from "../support/second-engine.js";

const tag = runnerImageSpec().tag;
const USER = `${SANDBOX_UID}:${SANDBOX_UID}`;

function spec(runId: string, overrides: Partial<ContainerSpec> = {}): ContainerSpec {
  return {
    image: tag,
    entrypoint: ["/bin/sh", "-c", "cat; echo stdin-closed"],
    cmd: [],
    env: {},
    user: USER,
    labels: containerLabels({ runId, pid: process.pid, host: os.hostname(), createdAt: new Date() }),
    runtime: "runc",
    network: "none",
    mounts: [],
    tmpfs: { "/tmp": "rw,nosuid,nodev,size=16m" },
    limits: { memoryMb: 128, pids: 64 },
    openStdin: true,
    init: true,
    ...overrides,
  };
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

/** A pid that belonged to a process of this host that has exited. */
function deadPid(): number {
  return spawnSync("true").pid!;
}

describe.skipIf(!secondEngineExpected())("a remote engine over TCP with mutual TLS", () => {
  let state: SecondEngineState;
  let release: () => Promise<void>;
  let remote: DockerEngine;
  const created: EngineContainer[] = [];

  beforeAll(async () => {
    ({ state, release } = await useSecondEngine());
    remote = remoteEngine(state);
    // The runner image the other tests (and other files' runs) use; loaded once if missing.
    await ensureRunnerImage(remote, { sources: [localEngine] });
  });

  afterAll(async () => {
    for (const container of created) await container.remove().catch(() => {});
    await release?.();
  });

  it("answers ping and info, and says it shares no files with this machine", async () => {
    await remote.ping();
    const info = await remote.info();
    expect(info.version).toMatch(/^\d+\.\d+/);
    expect(Object.keys(info.runtimes)).toContain("runc");
    expect(remote.sharesHostFilesystem).toBe(false);
    expect(remote.address).toBe(`tcp://127.0.0.1:${state.port} (TLS)`);
  });

  it("is mutual TLS: a client without a certificate is turned away", async () => {
    const outcome = await new Promise<string>((resolve) => {
      const socket = tls.connect({
        host: "127.0.0.1",
        port: state.port,
        ca: fs.readFileSync(path.join(state.clientCertDir, "ca.pem")),
      });
      socket.on("secureConnect", () => socket.write("GET /_ping HTTP/1.0\r\n\r\n"));
      socket.on("data", (d) => resolve(`answered: ${d.toString().split("\r\n")[0]}`));
      socket.on("error", (e) => resolve(`refused: ${e.message}`));
      socket.on("close", () => resolve("refused: closed"));
    });
    expect(outcome).toMatch(/^refused/);
  });

  it("gets a runner image loaded from the controller's engine, streamed, with the label check", async () => {
    // A tag of this test's own, so removing it never takes the runner image from a concurrent run.
    const own = `sandbox-run/pi-load-test:${process.pid}`;
    const [repo, ownTag] = own.split(":") as [string, string];
    await docker.getImage(tag).tag({ repo, tag: ownTag });
    try {
      expect(await remote.imageLabels(own)).toBeUndefined();
      const lines: string[] = [];
      const ready = await ensureRunnerImage(remote, {
        image: own,
        sources: [remote, localEngine],
        progress: (l) => lines.push(l),
      });
      // With the loaded image's id: the run's containers are made from it, not from the tag.
      expect(ready).toEqual({
        tag: own,
        piVersion: runnerImageSpec().piVersion,
        id: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      });
      expect(lines).toEqual([`Loading ${own} onto engine "${state.name}" from engine "local" ...`]);
      expect((await remote.imageLabels(own))?.[IMAGE_LABEL_CONTENT_HASH]).toBe(runnerImageSpec().contentHash);
      // Present now: nothing is loaded again.
      const again: string[] = [];
      await ensureRunnerImage(remote, { image: own, sources: [localEngine], progress: (l) => again.push(l) });
      expect(again).toEqual([]);
    } finally {
      await remote.removeImage(own).catch(() => {});
      await localEngine.removeImage(own).catch(() => {});
    }
  });

  it("never copies an image that fails the label check: a plain image stays where it is", async () => {
    const plain = `sandbox-run/not-a-runner:${process.pid}`;
    // An image without the runner's labels: a root filesystem of one file, imported.
    const pack = tarStream.pack();
    pack.entry({ name: "hello.txt" }, "not a runner image\n");
    pack.finalize();
    await localEngine.importImage(pack as unknown as Readable, plain);
    try {
      expect(await localEngine.imageLabels(plain)).toEqual({});
      const error = (await ensureRunnerImage(remote, { image: plain, sources: [localEngine] }).catch(
        (e: unknown) => e,
      )) as SandboxRunError;
      expect(error.code).toBe("image-missing");
      expect(error.shortMessage).toBe(`The runner image ${plain} is not built (or is out of date).`);
      expect(await remote.imageLabels(plain)).toBeUndefined();
    } finally {
      await localEngine.removeImage(plain).catch(() => {});
    }
  });

  it("creates, attaches, starts, execs in and removes a hardened container", async () => {
    const runId = `remote-seam-${process.pid}`;
    const container = await remote.createContainer(spec(runId));
    created.push(container);
    const streams = await container.attach();
    await container.start();
    const stdout = readAll(streams.stdout);
    const exec = await container.exec({
      cmd: ["/bin/sh", "-c", "id -u; cat > /tmp/got; wc -c < /tmp/got"],
      user: USER,
    });
    exec.stdin.end("twelve bytes");
    expect((await readAll(exec.stdout)).trim().split("\n")).toEqual([String(SANDBOX_UID), "12"]);
    expect(await exec.exit).toBe(0);
    // The hardening travels with the seam: read-only root, no capabilities.
    const probe = await container.exec({
      cmd: [
        "/bin/sh",
        "-c",
        "touch /etc/x 2>/dev/null && echo writable || echo read-only; grep CapEff /proc/self/status",
      ],
      user: USER,
    });
    probe.stdin.end();
    expect((await readAll(probe.stdout)).trim().split("\n")).toEqual(["read-only", "CapEff:\t0000000000000000"]);
    streams.stdin.end("hello from the controller\n");
    expect(await stdout).toBe("hello from the controller\nstdin-closed\n");
    expect((await container.wait()).exitCode).toBe(0);
    await container.remove();
    expect(await remote.listContainers([`${LABEL_RUN_ID}=${runId}`])).toEqual([]);
  });

  it("has none of this machine's paths: the workspace does not exist there", async () => {
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-ws-"));
    fs.writeFileSync(path.join(workspace, "here.txt"), "on the controller");
    const container = await remote.createContainer(
      spec(`remote-paths-${process.pid}`, {
        entrypoint: ["/bin/sh", "-c", `ls ${workspace} ${process.cwd()}; echo done`],
      }),
    );
    created.push(container);
    const streams = await container.attach();
    await container.start();
    streams.stdin.end();
    const [out, err] = await Promise.all([readAll(streams.stdout), readAll(streams.stderr)]);
    await container.remove();
    fs.rmSync(workspace, { recursive: true, force: true });
    expect(out).toBe("done\n");
    expect(err).toContain(`ls: cannot access '${workspace}': No such file or directory`);
    expect(err).toContain(`ls: cannot access '${process.cwd()}': No such file or directory`);
  });

  it("a link cut mid-call: the attach ends, and the engine is named as unreachable, then skipped by a pool", async () => {
    const link = await openExtraLink(state);
    const viaLink = remoteEngine(state, link.port);
    const container = await viaLink.createContainer(
      spec(`remote-cut-${process.pid}`, { entrypoint: ["/bin/sh", "-c", "echo started; exec cat"] }),
    );
    created.push(container);
    const attached = await container.attach();
    await container.start();
    const firstLine = await new Promise<string>((resolve) =>
      attached.stdout.once("data", (d) => resolve(d.toString())),
    );
    expect(firstLine).toBe("started\n");
    const ended = new Promise<void>((resolve) => attached.stdout.once("end", resolve));
    process.kill(link.pid, "SIGKILL");
    await ended;
    const error = (await viaLink.ping().catch((e: unknown) => e)) as SandboxRunError;
    expect(error.code).toBe("docker-unavailable");
    // Refused, or reset by a listener that was dying as the ping arrived: either way, named.
    expect(error.shortMessage).toMatch(
      new RegExp(
        `^Engine "${state.name}" at tcp://127\\.0\\.0\\.1:${link.port} \\(TLS\\) is not reachable \\((ECONNREFUSED|ECONNRESET)\\)\\.$`,
      ),
    );
    // A pool passes over the engine behind the cut link, naming it, and uses the other.
    const pool = new EnginePool([
      { engine: viaLink, capacity: 4 },
      { engine: localEngine, capacity: 4 },
    ]);
    const skipped: string[] = [];
    const lease = await pool.acquire({ onSkipped: (s) => skipped.push(`${s.engine}: ${s.reason}`) });
    lease.release();
    expect(lease.engine).toBe(localEngine);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatch(
      new RegExp(
        `^${state.name}: failed its ping: Engine "${state.name}" at tcp://127\\.0\\.0\\.1:${link.port} \\(TLS\\) is not reachable \\((ECONNREFUSED|ECONNRESET)\\)$`,
      ),
    );
    // The container itself lives on behind the cut: removed here through the intact link.
    await remote.removeContainer(container.id);
  });

  it("gc --engines removes what a dead controller left on every engine; doctor checks each", async () => {
    const pid = deadPid();
    const labels = (runId: string) => containerLabels({ runId, pid, host: os.hostname(), createdAt: new Date() });
    const orphans = {
      local: await localEngine.createContainer(
        spec(`orphan-local-${process.pid}`, { labels: labels(`orphan-local-${process.pid}`) }),
      ),
      remote: await remote.createContainer(
        spec(`orphan-remote-${process.pid}`, { labels: labels(`orphan-remote-${process.pid}`) }),
      ),
    };
    created.push(orphans.local, orphans.remote);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-engines-"));
    const file = path.join(dir, "engines.json");
    fs.writeFileSync(
      file,
      JSON.stringify({
        engines: [{ name: "local", host: "unix:///var/run/docker.sock", capacity: 2 }, engineFileEntry(state, 2)],
      }),
    );
    const gc = await runBuiltCli(["gc", "--engines", file]);
    // Both engines answered (the exit code may also count other tests' dying containers on the
    // shared local engine, which gc leaves for its next round).
    expect(gc.stderr).not.toContain("not cleaned (engine not reachable)");
    // Files run in parallel, and every controller reaps dead controllers' containers when it starts:
    // one may take an orphan before this gc (then it is gone all the same, checked below). Whatever
    // this gc removed it names, with the reason.
    const removedLines = gc.stderr.split("\n").filter((l) => l.includes("(run orphan-"));
    for (const [engine, id, run] of [
      ["local", orphans.local.id, `orphan-local-${process.pid}`],
      [state.name, orphans.remote.id, `orphan-remote-${process.pid}`],
    ] as const) {
      const line = removedLines.find((l) => l.includes(`(run ${run})`));
      if (line)
        expect(line).toContain(`removed ${id.slice(0, 12)} on ${engine} (run ${run}): owner process ${pid} is gone`);
    }
    expect(await localEngine.listContainers([`${LABEL_RUN_ID}=orphan-local-${process.pid}`])).toEqual([]);
    expect(await remote.listContainers([`${LABEL_RUN_ID}=orphan-remote-${process.pid}`])).toEqual([]);

    const doctor = await runBuiltCli(["doctor", "--engines", file]);
    fs.rmSync(dir, { recursive: true, force: true });
    expect(doctor.stderr).toContain(`engine ${state.name} (tcp://127.0.0.1:${state.port} (TLS))`);
    expect(doctor.stderr).toContain("note  on another machine: runs here copy the workspace in and out (copy mode)");
    expect(doctor.stderr.match(/ok {4}a hardened container starts and exits on runc/g)).toHaveLength(2);
  });
});
