// An engine's answers are untrusted input (E7): one that answers its ping and then nothing (or a
// byte at a time) cannot keep gc or doctor waiting, and one that answers with hundreds of MB cannot
// make the controller hold them. The engines here are stand-ins on unix sockets in a private
// folder, reached through the real DockerEngine (dockerode and docker-modem).
import fs from "node:fs";
import http from "node:http";
import type { Socket } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MAX_ENGINE_ANSWER_BYTES } from "../../src/engine/bounded-answers.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
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
    const started = Date.now();
    await expect(engineAt(engine.socketPath, 300).listContainers(["sandbox-run.managed=true"])).rejects.toThrow(
      `Engine "mute" at unix://${engine.socketPath} did not answer GET /containers/json within 0.3 s.`,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
  });

  it("an answer that trickles in a byte at a time fails at the same deadline", async () => {
    const engine = await standIn(trickle);
    await expect(engineAt(engine.socketPath, 300).listContainers([])).rejects.toThrow(
      /did not answer GET \/containers\/json within 0\.3 s/,
    );
    expect(await until(() => engine.openConnections() === 0)).toBe(true);
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
