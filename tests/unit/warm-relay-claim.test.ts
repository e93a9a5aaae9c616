// A warm sandbox's claim over the real relay (images/pi/relay.mjs, in this process) and the
// controller's end (src/relay/relay-session.ts), joined by a unix socket pair as the exec's stdio
// joins them in a run: before the claim the relay listens on nothing and the controller serves no
// socket; the claim is one message (the run's configuration and its trees) after which the trees
// are in place, the run's socket listens and, only then, the launcher gets the run.
import crypto from "node:crypto";
import fs from "node:fs";
import http2 from "node:http2";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error plain JavaScript shipped in the runner image
import { runRelay } from "../../images/pi/relay.mjs";
import type { EngineContainer, ExecSession } from "../../src/engine/engine.js";
import { Relay } from "../../src/relay/relay-session.js";
import { copyIn } from "../../src/run/copy-mode/copy-in.js";
import { walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packSingleFile, packTree } from "../../src/workspace-transfer/pack-tree.js";
import { socketPair } from "../support/socket-pair.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  // Last made, first undone: sessions before the sockets under them.
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The two ends of a socket pair (the controller's: an exec's stdio; the relay's), closed after the test. */
async function closedAfter(dir: string): Promise<{ hostEnd: net.Socket; relayEnd: net.Socket }> {
  const { hostEnd, relayEnd } = await socketPair(dir);
  cleanups.push(() => {
    hostEnd.destroy();
    relayEnd.destroy();
  });
  return { hostEnd, relayEnd };
}

function controllerEnd(hostEnd: net.Socket, warm: boolean, socketDir: string): Promise<Relay> {
  const exec: ExecSession = { stdin: hostEnd, stdout: hostEnd, stderr: new PassThrough(), exit: new Promise(() => {}) };
  const container = { exec: async () => exec } as unknown as EngineContainer;
  return Relay.start({ container, user: "0:0", socketDir, sockets: [], warm });
}

/** A warm sandbox's relay, in this process, and the controller's end of it. */
async function warmRelay() {
  const dir = tempDir("sandbox-run-warm-relay-");
  const inside = path.join(dir, "inside");
  fs.mkdirSync(inside);
  const { hostEnd, relayEnd } = await closedAfter(dir);
  const starting = controllerEnd(hostEnd, true, inside);
  const claims: unknown[] = [];
  let claimedAt = 0;
  runRelay(
    { socketDir: inside, sockets: [], claim: true, windowBytes: 4 << 20, maxSessionMemoryMb: 64 },
    relayEnd,
    () => {},
    {
      onClaim: (run: unknown) => {
        claimedAt = performance.now();
        claims.push(run);
      },
    },
  );
  const relay = await starting;
  cleanups.push(() => relay.close());
  await relay.ready;
  return { relay, dir, inside, claims, claimedAt: () => claimedAt };
}

describe("a warm sandbox's claim", () => {
  it("before it, the relay listens on nothing; then one message puts the trees in place, listens, and only then hands over the run", async () => {
    const { relay, dir, inside, claims } = await warmRelay();
    expect(fs.readdirSync(inside)).toEqual([]);

    const source = path.join(dir, "source");
    fs.mkdirSync(path.join(source, "src", "deep"), { recursive: true });
    fs.writeFileSync(path.join(source, "README.md"), "hello\n");
    fs.writeFileSync(path.join(source, "empty"), "");
    const big = crypto.randomBytes(3 * 1024 * 1024 + 17);
    fs.writeFileSync(path.join(source, "src", "big.bin"), big);
    const longName = `${"ä".repeat(70)}-long-name.txt`;
    fs.writeFileSync(path.join(source, "src", "deep", longName), "pax");
    fs.symlinkSync("../README.md", path.join(source, "src", "link"));
    fs.chmodSync(path.join(source, "src", "deep"), 0o750);
    fs.writeFileSync(path.join(source, "run.sh"), "#!/bin/sh\n");
    fs.chmodSync(path.join(source, "run.sh"), 0o755);
    const caFile = path.join(dir, "ca.crt");
    fs.writeFileSync(caFile, "CA");
    const workspace = path.join(dir, "workspace");
    fs.mkdirSync(workspace);
    const tree = await walkHostTree(source);
    const socket = path.join(inside, "gateway.sock");
    const run = { argv: ["--mode", "json"], cwd: "/workspace", env: { FOO: "bar" } };

    const { statuses, inSandboxMs } = await relay.claim({
      sockets: [{ name: "gateway", containerPath: socket, hostPath: path.join(dir, "nowhere.sock") }],
      trees: [
        { root: workspace, archive: packTree(tree) },
        { root: inside, archive: packSingleFile(caFile, "ca.crt") },
      ],
      watchFull: [workspace],
      run,
    });
    expect(statuses.map((s) => s.code)).toEqual([0, 0]);
    expect(inSandboxMs).toMatchObject({ unpacked: expect.any(Number), marked: expect.any(Number) });
    expect(fs.readFileSync(path.join(workspace, "README.md"), "utf8")).toBe("hello\n");
    expect(fs.readFileSync(path.join(workspace, "empty"), "utf8")).toBe("");
    expect(fs.readFileSync(path.join(workspace, "src", "big.bin")).equals(big)).toBe(true);
    expect(fs.readFileSync(path.join(workspace, "src", "deep", longName), "utf8")).toBe("pax");
    expect(fs.readlinkSync(path.join(workspace, "src", "link"))).toBe("../README.md");
    expect(fs.statSync(path.join(workspace, "src", "deep")).mode & 0o777).toBe(0o750);
    expect(fs.statSync(path.join(workspace, "run.sh")).mode & 0o777).toBe(0o755);
    expect(fs.readFileSync(path.join(inside, "ca.crt"), "utf8")).toBe("CA");
    // The run's socket listens now, and the launcher got the run once the answer was on its way.
    expect(fs.statSync(socket).isSocket()).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(claims).toEqual([run]);
    await expect(relay.claim({ sockets: [], trees: [], watchFull: [], run })).rejects.toThrow(/offers no claim/);
  });

  it("a tree that cannot be unpacked fails the claim, and the launcher never gets the run", async () => {
    const { relay, dir, claims } = await warmRelay();
    const source = path.join(dir, "source");
    fs.mkdirSync(source);
    fs.writeFileSync(path.join(source, "a.txt"), "a");
    const { statuses } = await relay.claim({
      sockets: [],
      trees: [{ root: path.join(dir, "does-not-exist"), archive: packTree(await walkHostTree(source)) }],
      watchFull: [],
      run: { argv: [] },
    });
    expect(statuses[0]!.code).toBe(2);
    expect(statuses[0]!.stderr).toMatch(/ENOENT/);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(claims).toEqual([]);
  });
});

describe("a workspace that changed between the walk and the pack", () => {
  /** A walked tree whose folder `sub` is then swapped for a symlink to a folder outside it. */
  async function swappedAfterWalk(dir: string) {
    const source = path.join(dir, "source");
    fs.mkdirSync(path.join(source, "sub"), { recursive: true });
    fs.writeFileSync(path.join(source, "sub", "key.pem"), "the tree's own");
    const outside = path.join(dir, "outside");
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, "key.pem"), "HOST-SECRET");
    const tree = await walkHostTree(source);
    fs.renameSync(path.join(source, "sub"), path.join(dir, "sub-moved"));
    fs.symlinkSync(outside, path.join(source, "sub"));
    return { tree, changed: path.join(source, "sub") };
  }

  it("a claim fails with the workspace-changed error (not tar's), and the launcher never gets the run", async () => {
    const { relay, dir, claims } = await warmRelay();
    const { tree, changed } = await swappedAfterWalk(dir);
    const workspace = path.join(dir, "workspace");
    fs.mkdirSync(workspace);
    const claim = relay.claim({
      sockets: [],
      trees: [{ root: workspace, archive: packTree(tree) }],
      watchFull: [],
      run: {},
    });
    await expect(claim).rejects.toMatchObject({
      name: "SandboxRunError",
      code: "usage",
      shortMessage: `${changed} changed while the workspace was being copied in.`,
      hint: expect.stringMatching(/run again when nothing else writes there/),
    });
    expect(fs.existsSync(path.join(workspace, "sub", "key.pem"))).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(claims).toEqual([]);
  });

  it("a copy-in through an exec of tar fails with the same error", async () => {
    const dir = tempDir("sandbox-run-copy-in-changed-");
    const { tree, changed } = await swappedAfterWalk(dir);
    const received: Buffer[] = [];
    const stdin = new PassThrough();
    stdin.on("data", (chunk: Buffer) => received.push(chunk));
    // tar in the container: a truncated archive is an error (exit 2).
    const exit = new Promise<number>((resolve) => stdin.on("close", () => resolve(2)));
    const exec = { stdin, stdout: new PassThrough(), stderr: new PassThrough(), exit };
    const container = { exec: async () => exec } as unknown as EngineContainer;
    const target = { containerPath: "/workspace", user: "1000:1000", what: "the workspace", sizeMb: 64 };
    await expect(copyIn(container, packTree(tree), target)).rejects.toMatchObject({
      name: "SandboxRunError",
      code: "usage",
      shortMessage: `${changed} changed while the workspace was being copied in.`,
    });
    expect(Buffer.concat(received).includes("HOST-SECRET")).toBe(false);
  });
});

describe("the controller's end of a relay before any claim", () => {
  /** Plays a relay (as code in a sandbox could) against the controller's end: which streams does it get? */
  async function hostileRelay(warm: boolean) {
    const dir = tempDir("sandbox-run-hostile-relay-");
    const { hostEnd, relayEnd } = await closedAfter(dir);
    const starting = controllerEnd(hostEnd, warm, dir);
    const session = http2.connect("http://hostile", { createConnection: () => relayEnd });
    // Ends with its socket (closedAfter's cleanup): destroying a client session from here spins on Node 20.
    session.on("error", () => {});
    const relay = await starting;
    cleanups.push(() => relay.close());
    relay.open();
    const outcome = (streamPath: string) =>
      new Promise<string>((resolve) => {
        const stream = session.request({ ":method": "POST", ":path": streamPath }, { endStream: false });
        stream.on("response", (headers) => resolve(`status ${headers[":status"]}`));
        stream.on("close", () => resolve(`closed ${stream.rstCode}`));
        stream.on("error", () => {});
        setTimeout(() => resolve("held"), 300);
      });
    return { outcome };
  }

  it("serves no socket: the gateway and the proxy are refused until a claim binds them", async () => {
    const { outcome } = await hostileRelay(true);
    const refused = `closed ${http2.constants.NGHTTP2_REFUSED_STREAM}`;
    expect(await outcome("/connect/gateway")).toBe(refused);
    expect(await outcome("/connect/proxy")).toBe(refused);
    expect(await outcome("/extract/1")).toBe(refused);
    // The one stream a warm relay may hold open is its claim, unanswered until a call claims it.
    expect(await outcome("/claim")).toBe("held");
    expect(await outcome("/claim")).toBe(refused);
  });

  it("a relay that is not a warm sandbox's gets no claim stream", async () => {
    const { outcome } = await hostileRelay(false);
    expect(await outcome("/claim")).toBe(`closed ${http2.constants.NGHTTP2_REFUSED_STREAM}`);
  });
});
