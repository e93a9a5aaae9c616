import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import { listenOnUnixSocket } from "../../src/http/unix-socket-server.js";

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

describe("listenOnUnixSocket", () => {
  it("refuses a path longer than a unix socket holds (Node would listen on it cut short), naming TMPDIR", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sock-"));
    const deep = path.join(dir, "d".repeat(Math.max(1, 110 - dir.length)));
    fs.mkdirSync(deep);
    const socketPath = path.join(deep, "gateway.sock");
    expect(Buffer.byteLength(socketPath)).toBeGreaterThan(107);
    const server = net.createServer();
    servers.push(server);
    const error = await listenOnUnixSocket(server, socketPath, "model gateway").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxRunError);
    expect((error as SandboxRunError).code).toBe("usage");
    expect((error as SandboxRunError).message).toMatch(/unix socket paths hold at most 107/);
    expect((error as SandboxRunError).hint).toMatch(/TMPDIR/);
    expect(server.listening).toBe(false);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("listens on a path that fits and opens it to the sandbox's uid", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sock-"));
    const socketPath = path.join(dir, "gateway.sock");
    const server = net.createServer();
    servers.push(server);
    await listenOnUnixSocket(server, socketPath, "model gateway");
    expect(fs.lstatSync(socketPath).isSocket()).toBe(true);
    expect(fs.statSync(socketPath).mode & 0o777).toBe(0o666);
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
