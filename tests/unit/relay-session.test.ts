// The relay's two ends (images/pi/relay.mjs, the in-container side, and src/relay/relay-session.ts,
// the controller's) joined by a unix socket pair on this host, as the exec's stdio joins them in a
// run: many short connections through the relay must not end its session.
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error plain JavaScript shipped in the runner image
import { runRelay } from "../../images/pi/relay.mjs";
import type { EngineContainer, ExecSession } from "../../src/engine/engine.js";
import { Relay } from "../../src/relay/relay-session.js";
import { socketPair } from "../support/socket-pair.js";

const cleanups: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A folder of its own for one test, removed after it. */
function scratchDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-relay-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Both ends of a relay for one in-container socket that leads to `upstream` on the host. */
async function relayTo(upstream: string, dir: string, relayConfig: Record<string, unknown> = {}) {
  const { hostEnd, relayEnd } = await socketPair(dir);
  const exec: ExecSession = { stdin: hostEnd, stdout: hostEnd, stderr: new PassThrough(), exit: new Promise(() => {}) };
  const container = { exec: async () => exec } as unknown as EngineContainer;
  const inside = path.join(dir, "inside");
  fs.mkdirSync(inside);
  const socket = path.join(inside, "gateway.sock");
  const relayEnded: string[] = [];
  const starting = Relay.start({
    container,
    user: "0:0",
    socketDir: inside,
    sockets: [{ name: "gateway", containerPath: socket, hostPath: upstream }],
  });
  runRelay(
    {
      socketDir: inside,
      sockets: [{ name: "gateway", path: socket }],
      windowBytes: 4 << 20,
      maxSessionMemoryMb: 64,
      ...relayConfig,
    },
    relayEnd,
    (code: number, message: string) => relayEnded.push(`${code}: ${message}`),
  );
  const relay = await starting;
  const failures: string[] = [];
  relay.onFailure((error) => failures.push(error.shortMessage));
  await relay.ready;
  relay.mark();
  relay.open();
  cleanups.push(async () => {
    relay.close();
    relayEnd.destroy();
    // relay.mjs keeps its session in module state: let this one end before the next test starts another.
    for (let waited = 0; relayEnded.length === 0 && waited < 2_000; waited += 10)
      await new Promise((resolve) => setTimeout(resolve, 10));
  });
  return { relay, socket, failures, relayEnded, relayEnd };
}

/** One HTTP request on a connection of its own, closed by the client once the answer is complete. */
function oneShot(socket: string): Promise<string> {
  return new Promise((resolve) => {
    const client = net.connect(socket);
    let received = "";
    client.on("connect", () => client.write("GET /x HTTP/1.1\r\nHost: sandbox\r\n\r\n"));
    client.on("data", (chunk) => {
      received += chunk.toString();
      if (received.endsWith("\r\n\r\nrefused")) client.end();
    });
    client.on("error", () => {});
    client.on("close", () => resolve(received));
  });
}

describe("the relay", () => {
  it("carries 1,500 short connections (more than nghttp2's burst of ~1,000 stream resets) without losing its session", async () => {
    const dir = scratchDir();
    // A keep-alive server, like the gateway answering a request it refuses: the connection stays
    // open on the host's side until the sandbox's client closes it.
    const server = http.createServer((_request, response) => {
      response.writeHead(403, { "content-length": "7" });
      response.end("refused");
    });
    const upstream = path.join(dir, "upstream.sock");
    await new Promise<void>((resolve) => server.listen(upstream, resolve));
    cleanups.push(() => void server.close());
    const { relay, socket, failures, relayEnded } = await relayTo(upstream, dir);

    const total = 1500;
    const answers: string[] = [];
    let started = 0;
    // Eight clients at a time, each connection used once.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (started < total && failures.length === 0 && relayEnded.length === 0) {
          started++;
          answers.push(await oneShot(socket));
        }
      }),
    );
    expect(answers.filter((a) => a.startsWith("HTTP/1.1 403 Forbidden") && a.endsWith("refused"))).toHaveLength(total);
    expect(relay.connections).toBe(total);
    expect(failures).toEqual([]);
    expect(relayEnded).toEqual([]);
  });

  it("1,100 connections that end while the host's side stays open: their streams' resets are paced under nghttp2's rapid-reset guard, and the session lives", async () => {
    const dir = scratchDir();
    // An upstream that greets every connection and never closes one, not even after the relay ends
    // its side: every stream stays open on the host's side, and the relay resets it after the grace
    // (20 ms here; under load in a run, the host can be that slow for many connections at once).
    const held: net.Socket[] = [];
    const server = net.createServer({ allowHalfOpen: true }, (socket) => {
      held.push(socket);
      socket.on("error", () => {});
      socket.write("hello");
    });
    const upstream = path.join(dir, "upstream.sock");
    await new Promise<void>((resolve) => server.listen(upstream, resolve));
    cleanups.push(() => {
      for (const socket of held) socket.destroy();
      server.close();
    });
    const { socket, failures, relayEnded } = await relayTo(upstream, dir, { bridgeCloseGraceMs: 20 });

    const greeted = (): Promise<boolean> =>
      new Promise((resolve) => {
        const client = net.connect(socket);
        client.on("data", () => {
          client.destroy();
          resolve(true);
        });
        client.on("error", () => resolve(false));
        client.on("close", () => resolve(false));
      });
    const total = 1100;
    let started = 0;
    let answered = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (started < total && failures.length === 0 && relayEnded.length === 0) {
          started++;
          if (await greeted()) answered++;
        }
      }),
    );
    expect(failures).toEqual([]);
    expect(relayEnded).toEqual([]);
    expect(answered).toBe(total);
    // Past the burst, the waiting resets go out over the next seconds; the session still carries new connections.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await greeted()).toBe(true);
    expect(failures).toEqual([]);
    expect(relayEnded).toEqual([]);
  }, 60_000);

  it("400 connections at once: the relay opens at most 96 streams (the controller takes 128), the rest wait their turn, and every one is carried", async () => {
    const dir = scratchDir();
    // An upstream that holds the connections it gets until 96 are open at once (or none came for
    // 2 s: a loaded machine may be slow to bring the next), then answers them all, and counts how
    // many were open at once.
    let mostOpen = 0;
    const held = new Set<net.Socket>();
    let idle: NodeJS.Timeout | undefined;
    const answerAll = () => {
      for (const socket of held) socket.end("pong");
      held.clear();
    };
    let open = 0;
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      held.add(socket);
      mostOpen = Math.max(mostOpen, ++open);
      socket.on("close", () => {
        open--;
        held.delete(socket);
      });
      clearTimeout(idle);
      if (held.size >= 96) answerAll();
      else idle = setTimeout(answerAll, 2_000);
    });
    const upstream = path.join(dir, "upstream.sock");
    await new Promise<void>((resolve) => server.listen(upstream, resolve));
    cleanups.push(() => {
      clearTimeout(idle);
      server.close();
    });
    const { relay, socket, failures, relayEnded } = await relayTo(upstream, dir);

    const answer = (): Promise<string> =>
      new Promise((resolve) => {
        const client = net.connect(socket);
        let received = "";
        client.on("data", (chunk) => (received += chunk.toString()));
        client.on("error", () => {});
        client.on("close", () => resolve(received));
      });
    const answers = await Promise.all(Array.from({ length: 400 }, answer));
    expect(answers.filter((a) => a === "pong")).toHaveLength(400);
    expect(mostOpen).toBe(96);
    expect(relay.connections).toBe(400);
    expect(failures).toEqual([]);
    expect(relayEnded).toEqual([]);
  }, 60_000);

  it("a connection that closes while it waits for a stream is dropped: it never reaches the host", async () => {
    const dir = scratchDir();
    // An upstream that holds every connection until told, then answers them all.
    const held: net.Socket[] = [];
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      held.push(socket);
    });
    const upstream = path.join(dir, "upstream.sock");
    await new Promise<void>((resolve) => server.listen(upstream, resolve));
    cleanups.push(() => {
      for (const socket of held) socket.destroy();
      server.close();
    });
    const { relay, socket, failures } = await relayTo(upstream, dir);

    const connect = () => {
      const client = net.connect(socket);
      client.on("error", () => {});
      return client;
    };
    const answered = (client: net.Socket): Promise<string> =>
      new Promise((resolve) => {
        let received = "";
        client.on("data", (chunk) => (received += chunk.toString()));
        client.on("close", () => resolve(received));
      });
    const first = Array.from({ length: 96 }, () => answered(connect()));
    await expect.poll(() => held.length, { timeout: 10_000 }).toBe(96);
    // These wait (every stream is taken) and close before their turn.
    const gone = Array.from({ length: 20 }, connect);
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (const client of gone) client.destroy();
    const waiting = Array.from({ length: 5 }, () => answered(connect()));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(held).toHaveLength(96);
    for (const upstreamSide of held.splice(0)) upstreamSide.end("pong");
    await expect.poll(() => held.length, { timeout: 10_000 }).toBe(5);
    for (const upstreamSide of held.splice(0)) upstreamSide.end("pong");
    expect(await Promise.all([...first, ...waiting])).toEqual(Array.from({ length: 101 }, () => "pong"));
    expect(relay.connections).toBe(101);
    expect(failures).toEqual([]);
  }, 60_000);

  it("answers 300 pings in a row: the controller's cap on control messages grows with what it asks", async () => {
    const dir = scratchDir();
    const { relay, failures, relayEnded } = await relayTo(path.join(dir, "nothing.sock"), dir);
    for (let i = 0; i < 300; i++) await relay.ping(10_000);
    expect(failures).toEqual([]);
    expect(relayEnded).toEqual([]);
  });

  it("a session Node ends over a protocol error is named by that error, not by the control stream it closed first", async () => {
    const dir = scratchDir();
    const { failures, relayEnd } = await relayTo(path.join(dir, "nothing.sock"), dir);
    expect(failures).toEqual([]);
    // A WINDOW_UPDATE for a stream the relay never opened (65,537): a connection error that Node
    // reports as the session's "Protocol error", after it has closed the session's streams.
    relayEnd.write(Buffer.from([0, 0, 4, 0x08, 0, 0, 1, 0, 1, 0, 0, 0, 1]));
    await expect.poll(() => failures, { timeout: 5_000 }).toHaveLength(1);
    expect(failures[0]).toMatch(/the relay session failed: Protocol error/);
  });

  it("bytes it cannot read end the session at once, named on this side, while the relay's exec still runs", async () => {
    const dir = scratchDir();
    const { failures, relayEnd } = await relayTo(path.join(dir, "nothing.sock"), dir);
    expect(failures).toEqual([]);
    // What code in the sandbox writing into the exec's stdout puts on the link: a frame header
    // claiming 16 MiB (over the session's frame size), then noise.
    relayEnd.write(Buffer.concat([Buffer.from([0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 1]), Buffer.alloc(4096, 0x5a)]));
    // The exec's exit never comes here (its promise never settles): only this side's own GOAWAY can name it.
    await expect.poll(() => failures, { timeout: 5_000 }).toHaveLength(1);
    expect(failures[0]).toMatch(/could not read what the relay sent \(HTTP\/2 error code 6\)/);
  });
});
