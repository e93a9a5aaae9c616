// The controller's end of the relay (src/relay/relay-session.ts) against a relay the sandbox wrote:
// a plain HTTP/2 client on the other end of a unix socket pair, as on the exec's stdio in a run.
// What can such a relay make the controller hold, or spend?
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { PassThrough, Transform } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { EngineContainer, ExecSession } from "../../src/engine/engine.js";
import { DEFAULT_RELAY_LIMITS, repliesTo, UNASKED_RELAY_MESSAGES } from "../../src/relay/relay-protocol.js";
import { Relay, type RelaySocket } from "../../src/relay/relay-session.js";
import { socketPair } from "../support/socket-pair.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  // Last made, first undone: sessions before the sockets under them.
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-hostile-relay-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The controller's end, the hostile relay's session, and the bytes the relay has put on the link. */
async function hostileRelay(dir: string, sockets: RelaySocket[] = []) {
  const { hostEnd, relayEnd } = await socketPair(dir);
  cleanups.push(() => {
    hostEnd.destroy();
    relayEnd.destroy();
  });
  let sent = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sent += chunk.length;
      done(null, chunk);
    },
  });
  const exec: ExecSession = {
    stdin: hostEnd,
    stdout: hostEnd.pipe(counted),
    stderr: new PassThrough(),
    exit: new Promise(() => {}),
  };
  const container = { exec: async () => exec } as unknown as EngineContainer;
  const starting = Relay.start({ container, user: "0:0", socketDir: dir, sockets });
  const session = http2.connect("http://hostile", { createConnection: () => relayEnd });
  // Ends with its socket (the cleanup above): destroying a client session from here spins on Node 20.
  session.on("error", () => {});
  const relay = await starting;
  cleanups.push(() => relay.close());
  const failures: string[] = [];
  relay.onFailure((error) => failures.push(error.shortMessage));
  const control = session.request({ ":method": "POST", ":path": "/control" }, { endStream: false });
  control.on("error", () => {});
  control.write(`${JSON.stringify({ op: "ready" })}\n`);
  await relay.ready;
  return { relay, session, control, failures, sent: () => sent };
}

/** Resolves once `value()` has stayed the same over a few samples (the link has gone quiet). */
async function settled(value: () => number): Promise<number> {
  let last = -1;
  for (let same = 0; same < 5; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = value();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

describe("a hostile relay", () => {
  it("makes the controller hold at most a stream's window (plus socket buffers) per connection whose host side stops reading, and loses nothing once it reads", async () => {
    const dir = tempDir();
    // A host server that takes connections and reads nothing until told (a refused CONNECT, a
    // stalled server), then reads everything.
    const upstreams: net.Socket[] = [];
    const received: number[] = [];
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.pause();
      const index = upstreams.push(socket) - 1;
      received[index] = 0;
      socket.on("data", (chunk) => (received[index]! += chunk.length));
    });
    const upstream = path.join(dir, "upstream.sock");
    await new Promise<void>((resolve) => server.listen(upstream, resolve));
    cleanups.push(() => {
      for (const socket of upstreams) socket.destroy();
      server.close();
    });
    const { relay, session, failures, sent } = await hostileRelay(dir, [
      { name: "proxy", containerPath: "/nowhere", hostPath: upstream },
    ]);
    relay.mark();
    relay.open();

    const streams = 8;
    const perStream = 8 * 1024 * 1024;
    const block = Buffer.alloc(64 * 1024, 0x41);
    for (let i = 0; i < streams; i++) {
      const stream = session.request({ ":method": "POST", ":path": "/connect/proxy" }, { endStream: false });
      stream.on("error", () => {});
      stream.resume();
      let written = 0;
      const pump = () => {
        while (written < perStream) {
          written += block.length;
          const more = stream.write(block);
          if (written >= perStream) return void stream.end();
          if (!more) return void stream.once("drain", pump);
        }
      };
      pump();
    }
    await expect.poll(() => upstreams.length, { timeout: 10_000 }).toBe(streams);
    const held = await settled(sent);
    // What the relay could put on the link: per stream its window, plus what the host's socket
    // (its kernel buffer) and Node's stream buffers take before the window closes. With the session's
    // 4 MiB as each stream's window, every stream took over 4 MiB.
    const slack = 768 * 1024;
    expect(held).toBeLessThan(streams * (DEFAULT_RELAY_LIMITS.streamWindowBytes + slack));
    expect(failures).toEqual([]);

    // Flow control, not loss: once the host reads, every byte arrives.
    for (const socket of upstreams) socket.resume();
    await expect.poll(() => received, { timeout: 30_000 }).toEqual(Array.from({ length: streams }, () => perStream));
    expect(failures).toEqual([]);
  }, 60_000);

  it("opens the archive it is asked for and resets it in the same write: the run fails as refused, the controller lives on (review, session 45: an uncaught throw ended the process)", async () => {
    const dir = tempDir();
    const { relay, session, control, failures } = await hostileRelay(dir);
    // The commands the controller sends, read off the control stream.
    let commands = "";
    control.setEncoding("utf8");
    control.on("data", (text: string) => {
      commands += text;
      const archive = /"op":"archive","id":(\d+)/.exec(commands);
      if (!archive) return;
      commands = "";
      // HEADERS and RST_STREAM queued in one tick go out in one write.
      const stream = session.request({ ":method": "POST", ":path": `/archive/${archive[1]}` }, { endStream: false });
      stream.on("error", () => {});
      stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      await expect(relay.archive("/workspace")).rejects.toThrow(
        /the relay reset a stream in the same breath as it opened it/,
      );
      expect(failures).toEqual([expect.stringMatching(/reset a stream in the same breath/)]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(uncaught).toEqual([]);
    } finally {
      process.off("uncaughtException", onUncaught);
    }
  });

  it("is read for as many control messages as the controller asked for: 10,000 valid lines end the session after a handful", async () => {
    const dir = tempDir();
    const { relay, control, failures } = await hostileRelay(dir);
    // Each `full` the controller reads reaches its listeners: the count of lines it acted on.
    const full: string[] = [];
    relay.onFull((root) => full.push(root));
    relay.mark(["/workspace"]);
    const lines = Array.from({ length: 10_000 }, (_, i) => `${JSON.stringify({ op: "full", root: `/r${i}` })}\n`);
    control.write(lines.join(""));
    await expect.poll(() => failures, { timeout: 10_000 }).toHaveLength(1);
    expect(failures[0]).toMatch(/the relay sent more control messages than this side asked for/);
    // Its `ready` was one of its own; the rest of its allowance, and no more, went to these lines.
    expect(full.length).toBe(UNASKED_RELAY_MESSAGES - 1 + repliesTo({ op: "mark", watchFull: ["/workspace"] }));
  });
});
