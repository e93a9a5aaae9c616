// An engine's answers are untrusted input (E7): one that answers its ping and then nothing (or a
// byte at a time) cannot keep gc or doctor waiting, and one that answers with hundreds of MB cannot
// make the controller hold them. The engines here are stand-ins on unix sockets in a private
// folder, reached through the real DockerEngine (dockerode and docker-modem).
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { Socket } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { reportError } from "../../src/cli/report-error.js";
import { MAX_ENGINE_ANSWER_BYTES } from "../../src/engine/bounded-answers.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { doctor } from "../../src/operations/doctor.js";
import { collectGarbage } from "../../src/operations/garbage.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-bounded-answers-");
// gc's run folders and lease records: this file's own, never the host's.
const ownTmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-bounded-answers-tmp-")));
const { TMPDIR: tmpDir } = process.env;
beforeAll(() => {
  process.env.TMPDIR = ownTmp;
});
afterAll(() => {
  if (tmpDir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = tmpDir;
  fs.rmSync(ownTmp, { recursive: true, force: true });
});
const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0)) await close();
});

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A stand-in engine on a unix socket: answers its ping, the rest as `handler` does. */
async function standIn(handler: Handler) {
  const socketPath = path.join(dir(), "engine.sock");
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    if (req.url?.includes("/_ping")) return res.end("OK");
    handler(req, res);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  open.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const enginesFile = path.join(path.dirname(socketPath), "engines.json");
  fs.writeFileSync(
    enginesFile,
    JSON.stringify({ engines: [{ name: "mute", host: `unix://${socketPath}`, capacity: 1 }] }),
  );
  return { socketPath, enginesFile, openConnections: () => sockets.size };
}

/** Never answers. */
const silent: Handler = () => {};

/** Sends the headers, then one byte every 50 ms, never the end. */
const trickle: Handler = (_req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.write("[");
  const timer = setInterval(() => res.write(" "), 50);
  res.on("close", () => clearInterval(timer));
};

const engineAt = (socketPath: string, timeoutMs: number) =>
  new DockerEngine({ name: "mute", endpoint: { kind: "unix", socketPath }, answers: { timeoutMs } });

const until = async (condition: () => boolean) => {
  for (let i = 0; i < 100 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return condition();
};

describe("an engine that answers its ping and nothing after", () => {
  it("a list it never answers fails after the deadline, naming the engine and the request, and its connection is closed", async () => {
    const engine = await standIn(silent);
    // The message says the deadline fired (a hang would be the test's timeout).
    await expect(engineAt(engine.socketPath, 300).listContainers(["sandbox-run.managed=true"])).rejects.toThrow(
      `Engine "mute" at unix://${engine.socketPath} did not answer GET /containers/json within 0.3 s.`,
    );
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
  });

  it("a request its caller can cancel (a run's signal that never fires) still fails at the deadline: a create never answered", async () => {
    // Answers /version (Docker, not Podman) and /info (its limits), then nothing: the create waits on the engine alone.
    const engine = await standIn((req, res) => {
      if (req.url?.includes("/version")) return res.end(JSON.stringify({ Version: "27.0.0", Components: [] }));
      if (req.url?.includes("/info")) return res.end(JSON.stringify({ MemoryLimit: true, PidsLimit: true }));
    });
    const cancel = new AbortController();
    const create = engineAt(engine.socketPath, 300).createContainer(
      {
        image: "x",
        entrypoint: ["true"],
        cmd: [],
        env: {},
        user: "65532:65532",
        labels: {},
        runtime: "runc",
        network: "none",
        mounts: [],
        tmpfs: {},
        limits: { memoryMb: 64, pids: 16 },
        openStdin: false,
        init: false,
      },
      cancel.signal,
    );
    await expect(create).rejects.toThrow(/did not answer POST \/containers\/create within 0\.3 s/);
    expect(cancel.signal.aborted).toBe(false);
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
  });

  it("an answer that trickles in a byte at a time fails at the same deadline", async () => {
    const engine = await standIn(trickle);
    await expect(engineAt(engine.socketPath, 300).listContainers([])).rejects.toThrow(
      /did not answer GET \/containers\/json within 0\.3 s/,
    );
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
  });

  it("gc fails with the CLI's message, hint and exit code 3, no stack trace", async () => {
    const engine = await standIn(silent);
    const error = await collectGarbage({ engines: engine.enginesFile, env: {}, answers: { timeoutMs: 300 } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    let stderr = "";
    const io = { stderr: (text: string) => void (stderr += text), env: {} } as unknown as CliIo;
    expect(reportError(error, io)).toBe(3);
    expect(stderr).toBe(
      `sandbox-run: Engine "mute" at unix://${engine.socketPath} did not answer GET /containers/json within 0.3 s.\n` +
        "  Check that the engine runs and answers (`docker version`), then run the command again.\n",
    );
  });

  it("gc over a pool: the engine that stops answering is reported, the other one is cleaned", async () => {
    const mute = await standIn(silent);
    // One orphan (past its deadline), listed until it is removed.
    let orphans = [
      {
        Id: "b".repeat(64),
        State: "exited",
        Labels: { "sandbox-run.managed": "true", "sandbox-run.deadline": "2000-01-01T00:00:00Z" },
      },
    ];
    const good = await standIn((req, res) => {
      if (req.method === "DELETE") {
        orphans = [];
        res.writeHead(204);
        return res.end();
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(orphans));
    });
    const enginesFile = path.join(dir(), "engines.json");
    fs.writeFileSync(
      enginesFile,
      JSON.stringify({
        engines: [
          { name: "mute", host: `unix://${mute.socketPath}`, capacity: 1 },
          { name: "good", host: `unix://${good.socketPath}`, capacity: 1 },
        ],
      }),
    );
    const collected = await collectGarbage({ engines: enginesFile, env: {}, answers: { timeoutMs: 300 } });
    expect(collected.engines).toEqual([
      {
        name: "mute",
        removed: [],
        unreachable: `Engine "mute" at unix://${mute.socketPath} did not answer GET /containers/json within 0.3 s.`,
      },
      { name: "good", removed: [{ id: "b".repeat(64), reason: "past its deadline" }] },
    ]);
    expect(orphans).toEqual([]);
  });

  it("gc stops at the second removal that runs out of time, instead of waiting out the deadline once per container", async () => {
    const listed = ["c", "d", "e"].map((c) => ({
      Id: c.repeat(64),
      State: "exited",
      Labels: { "sandbox-run.managed": "true", "sandbox-run.deadline": "2000-01-01T00:00:00Z" },
    }));
    let removals = 0;
    const engine = await standIn((req, res) => {
      if (req.method === "DELETE") return void removals++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(listed));
    });
    await expect(
      collectGarbage({ engines: engine.enginesFile, env: {}, answers: { timeoutMs: 300, removalTimeoutMs: 300 } }),
    ).rejects.toThrow(/stopped removing orphaned containers at d{12}: two removals ran out of time/);
    expect(removals).toBe(2);
  });

  it("one slow removal (a fork bomb dying) does not stop gc: the engine still answers, the others are removed", async () => {
    let listed = ["f", "a"].map((c) => ({
      Id: c.repeat(64),
      State: "exited",
      Labels: { "sandbox-run.managed": "true", "sandbox-run.deadline": "2000-01-01T00:00:00Z" },
    }));
    const engine = await standIn((req, res) => {
      if (req.method === "DELETE") {
        // The first removal takes longer than its deadline; the second is quick.
        if (req.url?.includes("f".repeat(64))) return void setTimeout(() => res.writeHead(204).end(), 1_000);
        listed = listed.filter((c) => !req.url?.includes(c.Id));
        return void res.writeHead(204).end();
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(listed));
    });
    const error = await collectGarbage({
      engines: engine.enginesFile,
      env: {},
      answers: { timeoutMs: 300, removalTimeoutMs: 300 },
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    // Reported as the one container not removed yet, with the others done.
    expect(error?.message).toMatch(
      /could not remove 1 orphaned container\(s\): ffffffffffff: the engine did not finish removing it within 0\.3 s/,
    );
    expect(listed.map((c) => c.Id)).toEqual(["f".repeat(64)]);
  });

  it("a wait is not cut at the answer deadline: it is answered when the container exits, however long it runs", async () => {
    const engine = await standIn((req, res) => {
      if (req.url?.includes("/wait")) return void setTimeout(() => res.writeHead(200).end('{"StatusCode":7}'), 800);
      res.writeHead(404).end();
    });
    const exit = await engineAt(engine.socketPath, 300).docker.getContainer("c0ffee").wait();
    expect(exit).toEqual({ StatusCode: 7 });
  });

  it("doctor reports the engine that never answers /version as a failed check and goes on", async () => {
    const engine = await standIn(silent);
    const bad: string[] = [];
    const result = await doctor({
      engines: engine.enginesFile,
      env: {},
      answers: { timeoutMs: 300 },
      report: { ok: () => {}, note: () => {}, bad: (what) => void bad.push(what) },
    });
    expect(result.ok).toBe(false);
    expect(bad[0]).toMatch(/^Engine "mute" at unix:\/\/.* did not answer GET \/(version|info) within 0\.3 s\.$/);
  });

  it("a process running gc against it ends by itself: no socket or timer is left open", async () => {
    const engine = await standIn(silent);
    const garbage = fileURLToPath(new URL("../../src/operations/garbage.ts", import.meta.url));
    const script = `
      const { collectGarbage } = await import(${JSON.stringify(garbage)});
      await collectGarbage({ engines: process.argv[1], answers: { timeoutMs: 300 } })
        .catch((error) => process.stdout.write(error.message));`;
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script, engine.enginesFile],
      {
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          TMPDIR: dir(),
          DOCKER_HOST: `unix://${engine.socketPath}`,
        },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => void (stdout += chunk));
    const guard = setTimeout(() => child.kill("SIGKILL"), 15_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      child.on("exit", (c, s) => resolve([c, s])),
    );
    clearTimeout(guard);
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(stdout).toContain("did not answer GET /containers/json within 0.3 s");
  });
});

describe("an engine that answers with more than the host takes", () => {
  const ANSWER_BYTES = 300 * 1024 * 1024;
  const chunk = Buffer.alloc(1024 * 1024, " ");

  /** Streams `total` bytes (chunked, no length given) as fast as the reader takes them; counts what it wrote. */
  function flood(status: number, total: number) {
    const written = { bytes: 0, ended: false };
    const handler: Handler = (_req, res) => {
      res.writeHead(status, { "content-type": "application/json" });
      const pump = () => {
        while (written.bytes < total && !res.destroyed) {
          written.bytes += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        if (!res.destroyed) {
          written.ended = true;
          res.end();
        }
      };
      res.on("error", () => {});
      pump();
    };
    return { written, handler };
  }

  it("a 300 MB container list fails at the cap, read no further than near it; memory stays far below the answer", async () => {
    const { written, handler } = flood(200, ANSWER_BYTES);
    const engine = await standIn(handler);
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    await expect(engineAt(engine.socketPath, 30_000).listContainers([])).rejects.toThrow(
      `Engine "mute" at unix://${engine.socketPath} answered GET /containers/json with more than 16 MiB; sandbox-run stopped reading it.`,
    );
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
    expect(written.ended).toBe(false);
    // What the engine got to write: the cap, plus what the socket's buffers held when the host closed it.
    expect(written.bytes).toBeLessThan(MAX_ENGINE_ANSWER_BYTES + 8 * 1024 * 1024);
    expect(rssGrowth).toBeLessThan(ANSWER_BYTES / 4);
  });

  it("an error answer (500) with an endless body fails at the cap too", async () => {
    const { written, handler } = flood(500, Number.POSITIVE_INFINITY);
    const engine = await standIn(handler);
    await expect(engineAt(engine.socketPath, 30_000).removeContainer("c0ffee")).rejects.toThrow(
      /answered DELETE \/containers\/c0ffee with more than 16 MiB/,
    );
    expect(written.bytes).toBeLessThan(MAX_ENGINE_ANSWER_BYTES + 8 * 1024 * 1024);
  });

  it("an answer whose Content-Length is past the cap is refused before its body is read", async () => {
    const engine = await standIn((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": String(ANSWER_BYTES) });
      res.write("[");
    });
    await expect(engineAt(engine.socketPath, 30_000).imageDetails("x")).rejects.toThrow(
      /answered GET \/images\/x\/json with more than 16 MiB/,
    );
  });
});
