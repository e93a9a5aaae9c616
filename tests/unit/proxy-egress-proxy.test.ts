// The egress proxy over a real unix socket, with real upstream servers on 127.0.0.1 only.
// Names are resolved by an injected resolver, so refusal of private ranges is tested without
// any real DNS or outside traffic; the tests that need to reach the local servers use a guard
// that lets 127.0.0.1 through and keeps every other refusal of the default guard.
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAddressGuard } from "../../src/proxy/address-guard.js";
import { createDomainFilter } from "../../src/proxy/domain-filter.js";
import {
  type EgressDecision,
  type EgressProxy,
  parseAuthority,
  type Resolver,
  startEgressProxy,
} from "../../src/proxy/egress-proxy.js";

const defaultGuard = createAddressGuard();
/** The default guard, except that the test servers' 127.0.0.1 is reachable. */
const testGuard = (address: string) => (address === "127.0.0.1" ? undefined : defaultGuard(address));

/** Test DNS: fixed answers, and a count of lookups per name. */
function fakeDns(answers: Record<string, string[]>) {
  const lookups: string[] = [];
  const resolve: Resolver = async (host) => {
    lookups.push(host);
    const list = answers[host];
    if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return list.map((address) => ({ address, family: net.isIP(address) }));
  };
  return { resolve, lookups };
}

let echo: net.Server;
let echoPort: number;
let echoConnections = 0;
let web: http.Server;
let webPort: number;
const webRequests: Array<{ method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }> = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-proxy-test-"));
let proxy: EgressProxy | undefined;

beforeAll(async () => {
  echo = net.createServer((socket) => {
    echoConnections++;
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  echoPort = (echo.address() as AddressInfo).port;
  web = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      webRequests.push({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(200, { "content-type": "text/plain", "x-upstream": "yes" });
      res.end(`hello from upstream ${req.url}`);
    });
  });
  await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
  webPort = (web.address() as AddressInfo).port;
});

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

afterAll(async () => {
  echo.close();
  web.closeAllConnections();
  web.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function start(options: {
  allowed: string[];
  answers: Record<string, string[]>;
  guard?: (a: string) => string | undefined;
  ports?: number[];
}) {
  const decisions: EgressDecision[] = [];
  const dns = fakeDns(options.answers);
  const socketPath = path.join(dir, `proxy-${Math.random().toString(16).slice(2)}.sock`);
  proxy = await startEgressProxy({
    socketPath,
    filter: createDomainFilter(options.allowed, { ports: options.ports ?? [echoPort, webPort] }),
    onDecision: (d) => decisions.push(d),
    resolve: dns.resolve,
    guard: options.guard ?? testGuard,
  });
  return { socketPath, decisions, lookups: dns.lookups };
}

/** Sends CONNECT; resolves with the status line and, on 200, the tunnel socket. */
function connect(
  socketPath: string,
  authority: string,
): Promise<{ status: number; body: string; socket?: net.Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: "CONNECT", path: authority, headers: { host: authority } });
    req.on("connect", (res, socket, head) => {
      const status = res.statusCode ?? 0;
      if (status === 200) {
        // Bytes the upstream sent at once may arrive with the proxy's answer.
        if (head.length > 0) socket.unshift(head);
        return resolve({ status, body: "", socket });
      }
      // Node hands every CONNECT answer over as a raw socket; the refusal's body follows the head.
      const chunks: Buffer[] = [head];
      socket.on("data", (c: Buffer) => chunks.push(c));
      socket.on("end", () => resolve({ status, body: Buffer.concat(chunks).toString() }));
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end();
  });
}

function proxiedGet(
  socketPath: string,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method: "POST", path: url, headers: { host: new URL(url).host, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.on("error", reject);
    req.end("request-body");
  });
}

function roundTrip(socket: net.Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    socket.once("data", (data: Buffer) => resolve(data.toString()));
    socket.write(text);
  });
}

describe("CONNECT tunnels", () => {
  it("tunnels bytes to an allowed host, connecting to the address it resolved and checked", async () => {
    const { socketPath, decisions, lookups } = await start({
      allowed: ["allowed.test"],
      answers: { "allowed.test": ["127.0.0.1"] },
    });
    const reply = await connect(socketPath, `allowed.test:${echoPort}`);
    expect(reply.status).toBe(200);
    // "allowed.test" exists only in the fake resolver: the proxy reached the echo server through
    // the address it checked, not by resolving the name a second time.
    expect(await roundTrip(reply.socket!, "ping through the tunnel")).toBe("ping through the tunnel");
    reply.socket!.destroy();
    expect(lookups).toEqual(["allowed.test"]);
    expect(decisions).toEqual([
      {
        action: "allowed",
        host: "allowed.test",
        port: echoPort,
        method: "CONNECT",
        reason: "matches allowedDomains entry allowed.test",
        address: "127.0.0.1",
      },
    ]);
  });

  it("denies a host that is not allowed, without resolving it or opening a connection", async () => {
    const before = echoConnections;
    const { socketPath, decisions, lookups } = await start({
      allowed: ["allowed.test"],
      answers: { "other.test": ["127.0.0.1"] },
    });
    const reply = await connect(socketPath, `other.test:${echoPort}`);
    expect(reply.status).toBe(403);
    expect(reply.body).toContain("other.test is not in the policy's allowedDomains");
    expect(lookups).toEqual([]);
    expect(echoConnections).toBe(before);
    expect(decisions).toEqual([
      {
        action: "denied",
        host: "other.test",
        port: echoPort,
        method: "CONNECT",
        reason: "other.test is not in the policy's allowedDomains",
      },
    ]);
  });

  it.each([
    ["127.0.0.1", "loopback"],
    ["10.0.0.7", "private network"],
    ["169.254.169.254", "link-local (metadata services)"],
    ["::ffff:127.0.0.1", "loopback (IPv4-mapped)"],
    ["fd00::1", "private network (unique-local)"],
  ])("refuses an allowed name that resolves to %s (%s)", async (address, range) => {
    const before = echoConnections;
    const { socketPath, decisions } = await start({
      allowed: ["rebind.test"],
      answers: { "rebind.test": [address] },
      guard: defaultGuard,
    });
    const reply = await connect(socketPath, `rebind.test:${echoPort}`);
    expect(reply.status).toBe(403);
    expect(reply.body).toContain(`rebind.test resolves to ${address}, which is ${range}`);
    expect(echoConnections).toBe(before);
    expect(decisions[0]).toMatchObject({
      action: "denied",
      host: "rebind.test",
      address,
      reason: `rebind.test resolves to ${address}, which is ${range}`,
    });
  });

  it("refuses a name when any of its addresses is refused, even if another is public", async () => {
    const { socketPath, decisions } = await start({
      allowed: ["mixed.test"],
      answers: { "mixed.test": ["127.0.0.1", "10.0.0.1"] },
    });
    const reply = await connect(socketPath, `mixed.test:${echoPort}`);
    expect(reply.status).toBe(403);
    expect(decisions.map((d) => d.action)).toEqual(["denied"]);
  });

  it("refuses IP literals in the target unless listed, and checks listed ones against the ranges", async () => {
    const { socketPath, decisions } = await start({ allowed: ["allowed.test"], answers: {}, guard: defaultGuard });
    expect((await connect(socketPath, `127.0.0.1:${echoPort}`)).status).toBe(403);
    expect((await connect(socketPath, `[::1]:${echoPort}`)).status).toBe(403);
    expect(decisions.map((d) => d.reason)).toEqual([
      "127.0.0.1 is not in the policy's allowedDomains",
      "::1 is not in the policy's allowedDomains",
    ]);
  });

  it("denies ports the filter does not allow", async () => {
    const { socketPath, decisions } = await start({
      allowed: ["allowed.test"],
      answers: { "allowed.test": ["127.0.0.1"] },
      ports: [443],
    });
    const reply = await connect(socketPath, `allowed.test:${echoPort}`);
    expect(reply.status).toBe(403);
    expect(decisions[0]?.reason).toBe(`port ${echoPort} is not allowed (only 443)`);
  });

  it("answers 502 and reports a failure when an allowed name does not resolve", async () => {
    const { socketPath, decisions } = await start({ allowed: ["gone.test"], answers: {} });
    const reply = await connect(socketPath, `gone.test:${echoPort}`);
    expect(reply.status).toBe(502);
    expect(decisions).toEqual([
      {
        action: "failed",
        host: "gone.test",
        port: echoPort,
        method: "CONNECT",
        reason: "gone.test did not resolve (ENOTFOUND)",
      },
    ]);
  });

  it("rejects malformed CONNECT targets", async () => {
    const { socketPath } = await start({ allowed: ["allowed.test"], answers: {} });
    expect((await connect(socketPath, "allowed.test")).status).toBe(400);
    expect((await connect(socketPath, "user@allowed.test:443")).status).toBe(400);
  });

  it("closes a refused CONNECT's socket after its answer, also when the client keeps its end open and goes on sending", async () => {
    const { socketPath } = await start({ allowed: ["allowed.test"], answers: {} });
    // allowHalfOpen: the client does not end its side when the proxy ends its own.
    const client = net.connect({ path: socketPath, allowHalfOpen: true });
    const chunks: Buffer[] = [];
    client.on("data", (c: Buffer) => chunks.push(c));
    client.on("error", () => {});
    const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
    client.write(`CONNECT other.test:${echoPort} HTTP/1.1\r\nHost: other.test:${echoPort}\r\n\r\n`);
    // After the answer the client goes on writing: that fails (and closes it) only once the proxy
    // has closed its socket; before, the proxy only ended its half and left the rest unread.
    client.once("end", () => {
      const more = setInterval(() => client.write(Buffer.alloc(64 * 1024, "x")), 20);
      void closed.then(() => clearInterval(more));
    });
    await closed;
    expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
  });
});

describe("CONNECT targets in other spellings", () => {
  it("canonicalises IPv6 literals before any check: [0:0:0:0:0:0:0:1] and [::1] get one verdict", async () => {
    const decisions: EgressDecision[] = [];
    const seen: string[] = [];
    const socketPath = path.join(dir, `proxy-${Math.random().toString(16).slice(2)}.sock`);
    proxy = await startEgressProxy({
      socketPath,
      // A filter that knows one address in one spelling: the proxy must hand it that spelling.
      filter: (host, port) => {
        seen.push(host);
        return host === "::1" && port === echoPort
          ? { allowed: true, reason: "the test allows ::1" }
          : { allowed: false, reason: `${host} is not ::1` };
      },
      onDecision: (d) => decisions.push(d),
      guard: (address) => (address === "::1" ? undefined : defaultGuard(address)),
    });
    const v6Echo = net.createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => v6Echo.listen(echoPort, "::1", resolve));
    try {
      for (const spelling of ["[0:0:0:0:0:0:0:1]", "[::1]", "[0000::0001]", "[::0:1]"]) {
        const reply = await connect(socketPath, `${spelling}:${echoPort}`);
        expect(reply.status, spelling).toBe(200);
        expect(await roundTrip(reply.socket!, "v6")).toBe("v6");
        reply.socket!.destroy();
      }
    } finally {
      v6Echo.close();
    }
    expect(seen).toEqual(["::1", "::1", "::1", "::1"]);
    expect(decisions.map((d) => [d.action, d.host])).toEqual([
      ["allowed", "::1"],
      ["allowed", "::1"],
      ["allowed", "::1"],
      ["allowed", "::1"],
    ]);
  });

  it("refuses IP literals in disguise and names with empty labels before resolving them", async () => {
    const { socketPath, decisions, lookups } = await start({
      allowed: ["*.allowed.test"],
      answers: { "a..allowed.test": ["127.0.0.1"], "0x7f.0.0.1": ["127.0.0.1"] },
    });
    expect((await connect(socketPath, `a..allowed.test:${echoPort}`)).status).toBe(400);
    expect((await connect(socketPath, `0x7f.0.0.1:${echoPort}`)).status).toBe(400);
    expect((await connect(socketPath, `2130706433:${echoPort}`)).status).toBe(400);
    expect(lookups).toEqual([]);
    expect(decisions.map((d) => d.action)).toEqual(["denied", "denied", "denied"]);
  });
});

describe("CONNECT half-close", () => {
  /** An upstream that lets each side end on its own and reports what it received. */
  async function halfCloseServer(onConnection: (socket: net.Socket, received: Promise<string>) => void) {
    const server = net.createServer({ allowHalfOpen: true }, (socket) => {
      const chunks: Buffer[] = [];
      socket.on("data", (c: Buffer) => chunks.push(c));
      const received = new Promise<string>((resolve) =>
        socket.on("end", () => resolve(Buffer.concat(chunks).toString())),
      );
      onConnection(socket, received);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { server, port: (server.address() as AddressInfo).port };
  }

  function readToEnd(socket: net.Socket): Promise<string> {
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    return new Promise((resolve) => socket.once("end", () => resolve(Buffer.concat(chunks).toString())));
  }

  it("keeps client -> upstream open after the upstream half-closes, until the client ends", async () => {
    let upstreamReceived: Promise<string> | undefined;
    const { server, port } = await halfCloseServer((socket, received) => {
      upstreamReceived = received;
      socket.end("greeting, then FIN"); // the upstream is done talking, still listening
    });
    try {
      const { socketPath } = await start({
        allowed: ["half.test"],
        answers: { "half.test": ["127.0.0.1"] },
        ports: [port],
      });
      const reply = await connect(socketPath, `half.test:${port}`);
      expect(reply.status).toBe(200);
      const tunnel = reply.socket!;
      tunnel.allowHalfOpen = true;
      expect(await readToEnd(tunnel)).toBe("greeting, then FIN");
      // The client still has something to say after the upstream's FIN arrived.
      tunnel.end("the client's last bytes");
      expect(await upstreamReceived).toBe("the client's last bytes");
    } finally {
      server.close();
    }
  });

  it("keeps upstream -> client open after the client half-closes, until the upstream ends", async () => {
    const { server, port } = await halfCloseServer((socket, received) => {
      void received.then((request) => socket.end(`answer to ${request}`));
    });
    try {
      const { socketPath } = await start({
        allowed: ["half.test"],
        answers: { "half.test": ["127.0.0.1"] },
        ports: [port],
      });
      const reply = await connect(socketPath, `half.test:${port}`);
      const tunnel = reply.socket!;
      tunnel.allowHalfOpen = true;
      const answer = readToEnd(tunnel);
      tunnel.end("question");
      expect(await answer).toBe("answer to question");
    } finally {
      server.close();
    }
  });
});

describe("plain HTTP requests", () => {
  it("a GET's body is framed again upstream (chunked, or its Content-Length when Connection names it): never read as a second request", async () => {
    const { socketPath } = await start({ allowed: ["web.test"], answers: { "web.test": ["127.0.0.1"] } });
    const from = webRequests.length;
    const smuggled = "GET /smuggled HTTP/1.1\r\nHost: not-allowed.example\r\n\r\n";
    const heads = [
      `GET http://web.test:${webPort}/chunked HTTP/1.1\r\nHost: web.test:${webPort}\r\nTransfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`,
      `GET http://web.test:${webPort}/named HTTP/1.1\r\nHost: web.test:${webPort}\r\nConnection: content-length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
      `GET http://web.test:${webPort}/plain HTTP/1.1\r\nHost: web.test:${webPort}\r\nConnection: close\r\n\r\n`,
    ];
    const socket = net.connect(socketPath);
    const received: Buffer[] = [];
    socket.on("data", (c: Buffer) => received.push(c));
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write(heads.join(""));
    await closed;
    expect(
      Buffer.concat(received)
        .toString()
        .match(/^HTTP\/1\.1 200 /gm),
    ).toHaveLength(3);
    const upstream = webRequests.slice(from);
    expect(upstream.map((r) => [r.url, r.body])).toEqual([
      ["/chunked", smuggled],
      ["/named", smuggled],
      ["/plain", ""],
    ]);
    // Framed as chunked, and a body-less GET goes without framing headers, as it came.
    expect(upstream[0]?.headers["transfer-encoding"]).toBe("chunked");
    expect(upstream[2]?.headers["transfer-encoding"]).toBeUndefined();
    expect(upstream[2]?.headers["content-length"]).toBeUndefined();
  });

  it("forwards an absolute-form request to an allowed host, without proxy headers", async () => {
    const { socketPath, decisions } = await start({ allowed: ["web.test"], answers: { "web.test": ["127.0.0.1"] } });
    const seen = webRequests.length;
    const reply = await proxiedGet(socketPath, `http://web.test:${webPort}/path?q=1`, {
      "proxy-authorization": "Basic c2VjcmV0",
      "proxy-connection": "keep-alive",
      "x-kept": "1",
    });
    expect(reply.status).toBe(200);
    expect(reply.body).toBe("hello from upstream /path?q=1");
    expect(reply.headers["x-upstream"]).toBe("yes");
    const upstream = webRequests[seen]!;
    expect(upstream.method).toBe("POST");
    expect(upstream.body).toBe("request-body");
    expect(upstream.headers.host).toBe(`web.test:${webPort}`);
    expect(upstream.headers["x-kept"]).toBe("1");
    expect(upstream.headers["proxy-authorization"]).toBeUndefined();
    expect(upstream.headers["proxy-connection"]).toBeUndefined();
    expect(decisions).toEqual([
      {
        action: "allowed",
        host: "web.test",
        port: webPort,
        method: "POST",
        reason: "matches allowedDomains entry web.test",
        address: "127.0.0.1",
      },
    ]);
  });

  it("an upstream answer writeHead would refuse (status 000 or 099; a control byte in the reason phrase) becomes a 502 or loses its reason phrase, and the proxy lives on", async () => {
    let statusLine = "";
    const raw = net.createServer((socket) =>
      socket.once("data", () => socket.end(`${statusLine}\r\ncontent-length: 2\r\n\r\nok`)),
    );
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const rawPort = (raw.address() as AddressInfo).port;
    try {
      const { socketPath, decisions } = await start({
        allowed: ["evil.test"],
        answers: { "evil.test": ["127.0.0.1"] },
        ports: [rawPort],
      });
      for (const line of ["HTTP/1.1 000 X", "HTTP/1.1 099 X"]) {
        statusLine = line;
        const reply = await proxiedGet(socketPath, `http://evil.test:${rawPort}/`);
        expect(reply.status, line).toBe(502);
        expect(reply.body).toContain("which the proxy does not relay");
      }
      expect(decisions.filter((d) => d.action === "failed")).toHaveLength(2);
      // The upstream's reason phrase is never relayed, so control bytes in it do no harm.
      for (const line of ["HTTP/1.1 200 A\x01B", "HTTP/1.1 201 A\x7fB"]) {
        statusLine = line;
        const reply = await proxiedGet(socketPath, `http://evil.test:${rawPort}/`);
        expect(reply.status, line).toBe(line.includes("201") ? 201 : 200);
        expect(reply.body).toBe("ok");
      }
    } finally {
      raw.close();
    }
  });

  it("denies a host that is not allowed with 403 and never reaches the upstream", async () => {
    const { socketPath, decisions } = await start({ allowed: ["web.test"], answers: { "evil.test": ["127.0.0.1"] } });
    const seen = webRequests.length;
    const reply = await proxiedGet(socketPath, `http://evil.test:${webPort}/`);
    expect(reply.status).toBe(403);
    expect(reply.body).toContain("evil.test is not in the policy's allowedDomains");
    expect(webRequests.length).toBe(seen);
    expect(decisions[0]).toMatchObject({ action: "denied", host: "evil.test", method: "POST" });
  });

  it("refuses origin-form requests and https:// URLs (those must use CONNECT)", async () => {
    const { socketPath, decisions } = await start({ allowed: ["web.test"], answers: { "web.test": ["127.0.0.1"] } });
    const statusOf = (target: string) =>
      new Promise<number>((resolve, reject) =>
        http.get({ socketPath, path: target }, (res) => resolve(res.statusCode ?? 0)).on("error", reject),
      );
    expect(await statusOf("/")).toBe(400);
    expect(await statusOf(`https://web.test:${webPort}/`)).toBe(400);
    expect(await statusOf(`http://user:pw@web.test:${webPort}/`)).toBe(400);
    expect(decisions).toEqual([]);
  });
});

/** An HTTP upstream that holds each answer for a moment and counts the requests it holds at once. */
async function holdingUpstream(holdMs: number | undefined) {
  const state = { connections: 0, inFlight: 0, maxInFlight: 0, paths: [] as string[] };
  const server = http.createServer((req, res) => {
    state.paths.push(req.url ?? "");
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    res.once("close", () => state.inFlight--);
    req.resume();
    // Without holdMs the answer never comes.
    if (holdMs !== undefined) setTimeout(() => res.end(`answer to ${req.url}`), holdMs);
  });
  server.on("connection", () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = () => {
    server.closeAllConnections();
    server.close();
  };
  return { state, port: (server.address() as AddressInfo).port, close };
}

/** Writes `count` pipelined proxy requests on one connection; collects what comes back. */
function pipelined(socketPath: string, urls: string[]) {
  const client = net.connect(socketPath);
  const received: Buffer[] = [];
  client.on("data", (c: Buffer) => received.push(c));
  client.on("error", () => {});
  const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
  client.write(urls.map((url) => `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n\r\n`).join(""));
  return { client, closed, text: () => Buffer.concat(received).toString() };
}

describe("bounds", () => {
  it("forwards a connection's pipelined plain-HTTP requests one at a time, answering each in order", async () => {
    const upstream = await holdingUpstream(20);
    try {
      const { socketPath } = await start({
        allowed: ["web.test"],
        answers: { "web.test": ["127.0.0.1"] },
        ports: [upstream.port],
      });
      const urls = Array.from({ length: 10 }, (_, i) => `http://web.test:${upstream.port}/${i}`);
      const flow = pipelined(socketPath, urls);
      await new Promise<void>((resolve) =>
        flow.client.on("data", () => flow.text().split("answer to").length > urls.length && resolve()),
      );
      flow.client.destroy();
      expect([...flow.text().matchAll(/answer to (\/\d+)/g)].map((m) => m[1])).toEqual(
        urls.map((u) => new URL(u).pathname),
      );
      // One request, and one upstream connection, at a time.
      expect(upstream.state.maxInFlight).toBe(1);
      expect(upstream.state.connections).toBe(urls.length);
    } finally {
      upstream.close();
    }
  });

  it("a request pipelined behind a refused one (whose answer ends the connection) never goes upstream, so no upstream socket outlives the connection", async () => {
    const upstream = await holdingUpstream(undefined);
    try {
      const { socketPath } = await start({
        allowed: ["web.test"],
        answers: { "web.test": ["127.0.0.1"] },
        ports: [upstream.port],
      });
      const flow = pipelined(socketPath, ["http://denied.test/", `http://web.test:${upstream.port}/held`]);
      await flow.closed;
      expect(flow.text()).toMatch(/^HTTP\/1\.1 403/);
      // Before, the second request started while the closing socket was not yet destroyed: its
      // upstream connection stayed open, answering into a response with no socket, until the run ended.
      for (const until = Date.now() + 500; upstream.state.connections === 0 && Date.now() < until; )
        await new Promise((r) => setTimeout(r, 20));
      expect(upstream.state.connections).toBe(0);
    } finally {
      upstream.close();
    }
  });

  it("closes a connection that pipelines more than 16 requests ahead of its answers; the upstream got at most one of them", async () => {
    const upstream = await holdingUpstream(undefined);
    try {
      const { socketPath } = await start({
        allowed: ["web.test"],
        answers: { "web.test": ["127.0.0.1"] },
        ports: [upstream.port],
      });
      const flow = pipelined(
        socketPath,
        Array.from({ length: 2_000 }, () => `http://web.test:${upstream.port}/`),
      );
      // Before, each request opened an upstream connection of its own: stop at the second.
      await Promise.race([
        flow.closed,
        new Promise<void>((resolve) => {
          const poll = setInterval(() => upstream.state.connections > 1 && resolve(), 10);
          void flow.closed.then(() => clearInterval(poll));
        }),
      ]);
      expect(upstream.state.connections).toBeLessThanOrEqual(1);
      await flow.closed;
    } finally {
      upstream.close();
    }
  });

  it("holds at most 128 connections from the sandbox: a flood of 300 leaves 128 open, and the proxy serves again once they go", async () => {
    const { socketPath } = await start({ allowed: ["allowed.test"], answers: { "allowed.test": ["127.0.0.1"] } });
    const flood = await Promise.all(
      Array.from(
        { length: 300 },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(socketPath, () => resolve(socket));
            socket.on("error", () => {});
            socket.once("error", reject);
          }),
      ),
    );
    // The 172 past the bound are answered and closed as they arrive; on a loaded machine that takes
    // a while, so wait for it (10 s at most), then a little longer for any more that would go.
    const stillOpen = () => flood.filter((socket) => !socket.destroyed && !socket.readableEnded).length;
    for (const until = Date.now() + 10_000; stillOpen() > 128 && Date.now() < until; )
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 200));
    expect(stillOpen()).toBe(128);
    for (const socket of flood) socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const reply = await connect(socketPath, `allowed.test:${echoPort}`);
    expect(reply.status).toBe(200);
    reply.socket!.destroy();
  });
});

describe("lifecycle", () => {
  it("close() ends open tunnels and removes the socket file", async () => {
    const { socketPath } = await start({ allowed: ["allowed.test"], answers: { "allowed.test": ["127.0.0.1"] } });
    const reply = await connect(socketPath, `allowed.test:${echoPort}`);
    const closed = new Promise<void>((resolve) => reply.socket!.once("close", () => resolve()));
    expect(fs.existsSync(socketPath)).toBe(true);
    await proxy!.close();
    proxy = undefined;
    await closed;
    expect(fs.existsSync(socketPath)).toBe(false);
  });
});

describe("parseAuthority", () => {
  it("parses host:port and [v6]:port and rejects the rest", () => {
    expect(parseAuthority("registry.npmjs.org:443")).toEqual({ host: "registry.npmjs.org", port: 443 });
    expect(parseAuthority("[2001:db8::1]:443")).toEqual({ host: "2001:db8::1", port: 443 });
    expect(parseAuthority("registry.npmjs.org")).toBeUndefined();
    expect(parseAuthority("a:0")).toBeUndefined();
    expect(parseAuthority("a:70000")).toBeUndefined();
    expect(parseAuthority("a/b:443")).toBeUndefined();
  });
});
