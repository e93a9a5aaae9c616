// The model gateway over real HTTP on a unix socket, with the scripted model server (and a tiny
// capturing server) as upstreams. No Docker needed.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import {
  type GatewayRequestRecord,
  type GatewayRoute,
  type ModelGateway,
  type ModelGatewayOptions,
  startModelGateway,
} from "../../src/gateway/model-gateway.js";
import { planProviderRouting, SANDBOX_PLACEHOLDER_API_KEY } from "../../src/gateway/provider-routes.js";
import { resolveRouteCredentials } from "../../src/gateway/route-credentials.js";
import { type ScriptedModelServer, startScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { chatBody, rawRequest, request, startCapture, waitFor } from "../support/gateway-client.js";

const REAL_KEY = "sk-REAL-upstream-key-0123456789";
const PLACEHOLDER = SANDBOX_PLACEHOLDER_API_KEY;

describe("model gateway", () => {
  let dir: string;
  let scripted: ScriptedModelServer;
  let capture: Awaited<ReturnType<typeof startCapture>>;
  let gateway: ModelGateway | undefined;
  // Fresh per gateway, so a late record from the previous test's gateway cannot leak in.
  let records: GatewayRequestRecord[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sr-gw-"));
    scripted = await startScriptedModelServer({
      scripts: { "text-model": [{ text: "Hello from upstream." }], "endless-model": [{ endless: true }] },
    });
    capture = await startCapture();
  });

  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  afterAll(async () => {
    await scripted.close();
    await capture.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(
    routes: GatewayRoute[],
    name = "gw.sock",
    extra: Partial<ModelGatewayOptions> = {},
  ): Promise<ModelGateway> {
    const mine: GatewayRequestRecord[] = [];
    records = mine;
    gateway = await startModelGateway({
      socketPath: path.join(dir, name),
      routes,
      onRequest: (record) => mine.push(record),
      ...extra,
    });
    return gateway;
  }

  const scriptedRoute = (model = "text-model"): GatewayRoute => ({
    id: "scripted",
    upstreamBaseUrl: scripted.baseUrl,
    api: "openai-completions",
    model,
    headers: { authorization: `Bearer ${REAL_KEY}` },
  });

  it("knows when the run waits on the model: waiting() names the upstream of an open request until its response ends", async () => {
    let answer: (() => void) | undefined;
    const silent = http.createServer((req, res) => {
      req.resume();
      answer = () => res.end(JSON.stringify({ choices: [{ message: { role: "assistant", content: "late" } }] }));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as AddressInfo;
    try {
      const gw = await start([
        {
          id: "silent",
          upstreamBaseUrl: `http://127.0.0.1:${port}/v1/some/path`,
          api: "openai-completions",
          model: "m",
          headers: {},
        },
      ]);
      expect(gw.waiting()).toBeUndefined();
      const reply = request(gw.socketPath, {
        method: "POST",
        path: "/silent/chat/completions",
        headers: { "content-type": "application/json" },
        body: chatBody("m"),
      });
      await waitFor(() => answer !== undefined);
      const wait = gw.waiting();
      // The origin only: the base URL's path is not part of it.
      expect(wait).toMatchObject({ requests: 1, upstream: `http://127.0.0.1:${port}` });
      expect(wait!.forMs).toBeGreaterThanOrEqual(0);
      answer!();
      expect((await reply).status).toBe(200);
      await waitFor(() => gw.waiting() === undefined);
    } finally {
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("forwards a model request with the real key instead of the placeholder", async () => {
    const gw = await start([scriptedRoute()]);
    expect(statSync(gw.socketPath).mode & 0o777).toBe(0o666);
    const before = scripted.requests.length;
    const reply = await request(gw.socketPath, {
      method: "POST",
      path: "/scripted/chat/completions",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${PLACEHOLDER}`,
        "x-api-key": PLACEHOLDER,
        "api-key": PLACEHOLDER,
        "x-goog-api-key": PLACEHOLDER,
        cookie: `session=${PLACEHOLDER}`,
        "proxy-authorization": `Basic ${PLACEHOLDER}`,
      },
      body: chatBody("text-model"),
    });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body).choices[0].message.content).toBe("Hello from upstream.");
    const seen = scripted.requests.slice(before);
    expect(seen).toHaveLength(1);
    const headers = seen[0]!.headers;
    expect(headers.authorization).toBe(`Bearer ${REAL_KEY}`);
    expect(headers["x-api-key"]).toBeUndefined();
    expect(headers["api-key"]).toBeUndefined();
    expect(headers["x-goog-api-key"]).toBeUndefined();
    expect(headers.cookie).toBeUndefined();
    expect(headers["proxy-authorization"]).toBeUndefined();
    expect(headers.host).toBe(new URL(scripted.baseUrl).host);
    expect(JSON.stringify(headers)).not.toContain(PLACEHOLDER);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      routeId: "scripted",
      method: "POST",
      path: "/scripted/chat/completions",
      upstreamUrl: `${scripted.baseUrl}/chat/completions`,
      status: 200,
    });
    expect(records[0]!.requestBytes).toBe(Buffer.byteLength(chatBody("text-model")));
    expect(records[0]!.responseBytes).toBeGreaterThan(0);
    expect(records[0]!.refused).toBeUndefined();
    expect(JSON.stringify(records)).not.toContain(REAL_KEY);
  });

  it("keeps the query string, drops hop-by-hop headers and set-cookie", async () => {
    const gw = await start([
      {
        id: "cap",
        upstreamBaseUrl: capture.baseUrl,
        api: "anthropic-messages",
        model: "claude-m",
        headers: { "x-api-key": REAL_KEY },
      },
    ]);
    const before = capture.requests.length;
    const reply = await request(gw.socketPath, {
      method: "POST",
      path: "/cap/v1/messages?beta=true",
      headers: {
        "content-type": "application/json",
        "x-api-key": PLACEHOLDER,
        "anthropic-version": "2023-06-01",
        connection: "keep-alive, x-secret-hop",
        "x-secret-hop": "should-not-pass",
        "proxy-connection": "keep-alive",
      },
      body: JSON.stringify({ model: "claude-m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(reply.status).toBe(200);
    expect(reply.headers["set-cookie"]).toBeUndefined();
    const seen = capture.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe("/v1/v1/messages?beta=true");
    expect(seen[0]!.headers["x-api-key"]).toBe(REAL_KEY);
    expect(seen[0]!.headers["anthropic-version"]).toBe("2023-06-01");
    expect(seen[0]!.headers["x-secret-hop"]).toBeUndefined();
    expect(seen[0]!.headers["proxy-connection"]).toBeUndefined();
    expect(records[0]?.path).toBe("/cap/v1/messages");
  });

  it("streams SSE chunk by chunk", async () => {
    const gw = await start([scriptedRoute("endless-model")]);
    // The endless script never finishes its response: a buffering proxy would deliver nothing.
    const arrivals: number[] = [];
    let text = "";
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: gw.socketPath,
          method: "POST",
          path: "/scripted/chat/completions",
          headers: { "content-type": "application/json", authorization: `Bearer ${PLACEHOLDER}` },
        },
        (res) => {
          expect(res.statusCode).toBe(200);
          expect(res.headers["content-type"]).toBe("text/event-stream");
          res.on("data", (chunk: Buffer) => {
            arrivals.push(Date.now());
            text += chunk.toString("utf8");
            if (arrivals.length >= 5) {
              req.destroy();
              resolve();
            }
          });
          res.on("error", () => {});
        },
      );
      req.on("error", (error) => {
        if (arrivals.length < 5) reject(error);
      });
      req.setTimeout(5000, () => reject(new Error("no streamed chunks within 5 s")));
      req.end(chatBody("endless-model", true));
    });
    expect(arrivals.length).toBeGreaterThanOrEqual(5);
    expect(text).toContain("data: ");
    expect(text).toContain("and on ");
    expect(text).not.toContain("[DONE]");
    // The chunks arrived over time, not in one burst at the end.
    expect(arrivals[arrivals.length - 1]! - arrivals[0]!).toBeGreaterThan(0);
  });

  it("refuses unknown routes and non-model paths with 403 and reports them", async () => {
    const gw = await start([
      {
        id: "cap",
        upstreamBaseUrl: capture.baseUrl,
        api: "openai-completions",
        model: "m",
        headers: { authorization: `Bearer ${REAL_KEY}` },
      },
    ]);
    const before = capture.requests.length;
    const cases: Array<{ method: string; path: string }> = [
      { method: "POST", path: "/nope/chat/completions" },
      { method: "GET", path: "/cap/files" },
      { method: "POST", path: "/cap/models" },
      { method: "GET", path: "/cap/chat/completions" },
      { method: "POST", path: "/cap/chat/completions/../../files" },
      { method: "POST", path: "/cap/chat%2fcompletions" },
      { method: "POST", path: "/cap//chat/completions" },
      { method: "POST", path: "/cap" },
    ];
    for (const c of cases) {
      const reply = await request(gw.socketPath, {
        ...c,
        headers: { "content-type": "application/json" },
        body: c.method === "POST" ? "{}" : undefined,
      });
      expect(reply.status, `${c.method} ${c.path}`).toBe(403);
      expect(reply.headers["content-type"]).toBe("application/json");
      const body = JSON.parse(reply.body) as { error: { message: string } };
      expect(body.error.message).toContain("refused");
    }
    expect(capture.requests.length).toBe(before);
    await waitFor(() => records.length === cases.length);
    expect(records.every((r) => r.status === 403 && typeof r.refused === "string" && r.upstreamUrl === undefined)).toBe(
      true,
    );
    expect(records[0]).toMatchObject({ method: "POST", path: "/nope/chat/completions" });
    expect(records[0]!.refused).toContain("unknown route");
    expect(records[1]).toMatchObject({ routeId: "cap", path: "/cap/files" });
    // The allowed ones still work through the same gateway.
    const ok = await request(gw.socketPath, { method: "GET", path: "/cap/models" });
    expect(ok.status).toBe(200);
    expect(capture.requests.length).toBe(before + 1);
  });

  it("refuses absolute-URI requests, CONNECT and upgrades", async () => {
    const gw = await start([
      {
        id: "cap",
        upstreamBaseUrl: capture.baseUrl,
        api: "openai-completions",
        model: "m",
        headers: { authorization: `Bearer ${REAL_KEY}` },
      },
    ]);
    const before = capture.requests.length;
    const absolute = await rawRequest(
      gw.socketPath,
      `GET ${capture.baseUrl}/models HTTP/1.1\r\nHost: ${new URL(capture.baseUrl).host}\r\nConnection: close\r\n\r\n`,
    );
    expect(absolute).toMatch(/^HTTP\/1\.1 403/);
    expect(absolute).toContain("absolute");
    const absoluteRoute = await rawRequest(
      gw.socketPath,
      "GET http://127.0.0.1:18080/cap/models HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nConnection: close\r\n\r\n",
    );
    expect(absoluteRoute).toMatch(/^HTTP\/1\.1 403/);
    const connect = await rawRequest(
      gw.socketPath,
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    );
    expect(connect).toMatch(/^HTTP\/1\.1 403/);
    const upgrade = await rawRequest(
      gw.socketPath,
      "GET /cap/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    expect(upgrade).toMatch(/^HTTP\/1\.1 403/);
    expect(capture.requests.length).toBe(before);
    await waitFor(() => records.length === 4);
    expect(records.map((r) => r.status)).toEqual([403, 403, 403, 403]);
    expect(records.every((r) => typeof r.refused === "string")).toBe(true);
  });

  it("keeps a budget of model responses: the one past it is refused with 429 before the upstream", async () => {
    // Upstream: 500 for a body asking for it (a failed call, which Pi may retry), else 200.
    let upstreamCalls = 0;
    const upstream = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        upstreamCalls++;
        res.writeHead(body.includes("please-fail") ? 500 : 200, { "content-type": "application/json" });
        res.end("{}");
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    const exceeded: number[] = [];
    try {
      const route: GatewayRoute = {
        id: "budget",
        upstreamBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`,
        api: "openai-completions",
        model: "m",
        headers: { authorization: `Bearer ${REAL_KEY}` },
      };
      const gw = await start([route], "budget.sock", { maxGenerations: 2, onBudgetExceeded: (n) => exceeded.push(n) });
      const post = (body: string) =>
        request(gw.socketPath, {
          method: "POST",
          path: "/budget/chat/completions",
          headers: { "content-type": "application/json" },
          body,
        });
      expect((await post(chatBody("m", false, "please-fail"))).status).toBe(500); // not counted
      expect((await request(gw.socketPath, { path: "/budget/models" })).status).toBe(200); // not a generation
      expect((await post(chatBody("m"))).status).toBe(200);
      expect((await post(chatBody("m"))).status).toBe(200);
      expect(upstreamCalls).toBe(4);
      const refused = await post(chatBody("m"));
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body).error.message).toMatch(/budget of 2 model responses is spent/);
      expect(upstreamCalls).toBe(4);
      expect(exceeded).toEqual([3]);
      await waitFor(() => records.some((r) => r.status === 429));
      expect(records.find((r) => r.status === 429)?.refused).toMatch(/budget of 2 model responses/);
    } finally {
      await new Promise<void>((resolve) => {
        upstream.closeAllConnections();
        upstream.close(() => resolve());
      });
    }
  });

  it("an upstream status writeHead refuses (000, 099) is answered 502, a reason phrase is never relayed, and the gateway lives on", async () => {
    let statusLine = "";
    const raw = net.createServer((socket) =>
      socket.once("data", () =>
        socket.end(`${statusLine}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`),
      ),
    );
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const { port } = raw.address() as AddressInfo;
    try {
      const gw = await start([
        {
          id: "odd",
          upstreamBaseUrl: `http://127.0.0.1:${port}/v1`,
          api: "openai-completions",
          model: "text-model",
          headers: { authorization: `Bearer ${REAL_KEY}` },
        },
      ]);
      const ask = () =>
        request(gw.socketPath, {
          method: "POST",
          path: "/odd/chat/completions",
          headers: { "content-type": "application/json" },
          body: chatBody("text-model"),
        });
      for (const line of ["HTTP/1.1 000 X", "HTTP/1.1 099 X"]) {
        statusLine = line;
        const reply = await ask();
        expect(reply.status, line).toBe(502);
        expect(reply.body).toContain("answered with status");
      }
      statusLine = `HTTP/1.1 401 Bad key ${REAL_KEY}\x01`;
      const reply = await ask();
      expect(reply.status).toBe(401);
      expect(reply.statusMessage).toBe("Unauthorized");
    } finally {
      raw.close();
    }
  });

  it("answers 502 with a JSON error when the upstream is down", async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = net.createServer();
      probe.listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const gw = await start([
      {
        id: "down",
        upstreamBaseUrl: `http://127.0.0.1:${closedPort}/v1`,
        api: "openai-completions",
        model: "text-model",
        headers: { authorization: `Bearer ${REAL_KEY}` },
      },
    ]);
    const reply = await request(gw.socketPath, {
      method: "POST",
      path: "/down/chat/completions",
      headers: { "content-type": "application/json" },
      body: chatBody("text-model"),
    });
    expect(reply.status).toBe(502);
    expect(reply.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(reply.body) as { error: { message: string } };
    expect(body.error.message).toContain("ECONNREFUSED");
    expect(body.error.message).not.toContain(REAL_KEY);
    await waitFor(() => records.length === 1);
    expect(records[0]).toMatchObject({ routeId: "down", status: 502 });
    expect(records[0]!.refused).toBeUndefined();
  });

  it("holds the liveness response open and reports it once either side closes it", async () => {
    const gw = await start([scriptedRoute()]);
    let req!: http.ClientRequest;
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      req = http.request({ socketPath: gw.socketPath, method: "GET", path: "/__sandbox-run/alive" }, resolve);
      req.on("error", () => {});
      req.setTimeout(5000, () => reject(new Error("no liveness headers")));
      req.end();
    });
    expect(res.statusCode).toBe(200);
    res.on("error", () => {});
    let ended = false;
    res.on("end", () => {
      ended = true;
    });
    res.resume();
    // A model request on another connection completes while liveness stays open.
    expect((await request(gw.socketPath, { path: "/scripted/models" })).status).toBe(200);
    expect(ended).toBe(false);
    expect(records.some((r) => r.path === "/__sandbox-run/alive")).toBe(false);
    req.destroy();
    await waitFor(() => records.some((r) => r.path === "/__sandbox-run/alive"));
    const post = await request(gw.socketPath, { method: "POST", path: "/__sandbox-run/alive", body: "" });
    expect(post.status).toBe(403);
    expect(records.find((r) => r.status === 403)?.reason).toBe("liveness-method");
  });

  it("close() ends the liveness response (the launcher's cue that the host is gone), removes the socket and is idempotent", async () => {
    const gw = await start([scriptedRoute()], "close.sock");
    const res = await new Promise<http.IncomingMessage>((resolve) => {
      const req = http.request({ socketPath: gw.socketPath, path: "/__sandbox-run/alive" }, resolve);
      req.on("error", () => {});
      req.end();
    });
    res.on("error", () => {});
    const closedByServer = new Promise<void>((resolve) => res.on("close", () => resolve()));
    res.resume();
    expect(existsSync(gw.socketPath)).toBe(true);
    await gw.close();
    await closedByServer;
    expect(existsSync(gw.socketPath)).toBe(false);
    await gw.close();
    await expect(request(gw.socketPath, { path: "/scripted/models" })).rejects.toThrow();
  });

  it("replaces a stale socket file but refuses to delete a non-socket", async () => {
    const stale = path.join(dir, "stale.sock");
    // A process that dies without closing leaves its socket file behind.
    const child = spawnSync(process.execPath, [
      "-e",
      `require("net").createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, "SIGKILL"))`,
    ]);
    expect(child.signal).toBe("SIGKILL");
    expect(statSync(stale).isSocket()).toBe(true);
    const gw = await start([scriptedRoute()], "stale.sock");
    const reply = await request(gw.socketPath, { method: "GET", path: "/scripted/models" });
    expect(reply.status).toBe(200);
    await gw.close();
    gateway = undefined;

    const regular = path.join(dir, "regular-file");
    await import("node:fs/promises").then((fs) => fs.writeFile(regular, "keep me"));
    await expect(startModelGateway({ socketPath: regular, routes: [] })).rejects.toBeInstanceOf(SandboxRunError);
    expect(existsSync(regular)).toBe(true);
  });

  it("rejects invalid routes up front", async () => {
    const base = { upstreamBaseUrl: scripted.baseUrl, api: "openai-completions", model: "m", headers: {} };
    const socketPath = path.join(dir, "invalid.sock");
    await expect(startModelGateway({ socketPath, routes: [{ ...base, id: "Bad/Id" }] })).rejects.toMatchObject({
      code: "usage",
    });
    await expect(startModelGateway({ socketPath, routes: [{ ...base, id: "__sandbox-run" }] })).rejects.toMatchObject({
      code: "usage",
    });
    await expect(
      startModelGateway({
        socketPath,
        routes: [
          { ...base, id: "a" },
          { ...base, id: "a" },
        ],
      }),
    ).rejects.toMatchObject({ code: "usage" });
    await expect(
      startModelGateway({ socketPath, routes: [{ ...base, id: "a", api: "bedrock-converse-stream" }] }),
    ).rejects.toMatchObject({ code: "usage" });
    await expect(
      startModelGateway({ socketPath, routes: [{ ...base, id: "a", upstreamBaseUrl: "file:///etc" }] }),
    ).rejects.toMatchObject({ code: "usage" });
    await expect(startModelGateway({ socketPath, routes: [{ ...base, id: "a", model: "" }] })).rejects.toMatchObject({
      code: "usage",
    });
    expect(existsSync(socketPath)).toBe(false);
  });

  it("carries a planned custom provider end to end: $ENV key on the host, placeholder inside", async () => {
    const routing = planProviderRouting({
      model: "scripted/text-model",
      env: { SCRIPTED_KEY: REAL_KEY },
      gatewayBaseUrl: "http://127.0.0.1:18080",
      modelsJson: {
        providers: {
          scripted: {
            baseUrl: scripted.baseUrl,
            api: "openai-completions",
            apiKey: "$SCRIPTED_KEY",
            models: [{ id: "text-model" }],
          },
        },
      },
    });
    const entry = routing.containerModelsJson.providers.scripted as { baseUrl: string; apiKey: string };
    expect(entry.apiKey).toBe(PLACEHOLDER);
    const gw = await start(resolveRouteCredentials(routing, { env: { SCRIPTED_KEY: REAL_KEY } }), "planned.sock");
    const before = scripted.requests.length;
    const reply = await request(gw.socketPath, {
      method: "POST",
      path: `${new URL(entry.baseUrl).pathname}/chat/completions`,
      headers: { "content-type": "application/json", authorization: `Bearer ${entry.apiKey}` },
      body: chatBody("text-model"),
    });
    expect(reply.status).toBe(200);
    const seen = scripted.requests.slice(before);
    expect(seen[0]?.headers.authorization).toBe(`Bearer ${REAL_KEY}`);
    expect(JSON.stringify(seen[0]?.headers)).not.toContain(PLACEHOLDER);
  });
  it("an upstream that echoes the key (a 401 quoting it, a header, JSON-escaped, base64, gzip) hands the sandbox none of it", async () => {
    /** A models.json header value with characters JSON (Node's, Go's) escapes. */
    const ODD_KEY = String.raw`odd"key\<&>-REAL-0123456789`;
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const go = (s: string) => JSON.stringify(s).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
    const echo = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        const auth = String(req.headers.authorization);
        const odd = String(req.headers["x-odd-key"]);
        const body = Buffer.from(
          `{"error":{"message":"Incorrect API key provided: ${auth}","key":${JSON.stringify(odd)},"go":${go(odd)},"b64":"${b64(`user:${REAL_KEY}`)}"}}`,
        );
        const headers = {
          "content-type": "application/json",
          "x-echo-auth": auth,
          "www-authenticate": `Bearer realm="${REAL_KEY}"`,
        };
        // What to answer in, told by a header Pi sends (the gateway forwards no query Pi does not send).
        const how = String(req.headers["x-title"] ?? "");
        if (how.includes("gzip")) {
          res.writeHead(401, { ...headers, "content-encoding": "gzip" });
          return res.end(zlib.gzipSync(body));
        }
        if (how.includes("layers")) {
          // Four gzip layers are undone; a fifth is one more than the gateway undoes.
          const count = Number(/layers=(\d)/.exec(how)?.[1]);
          let layered = body;
          for (let i = 0; i < count; i++) layered = zlib.gzipSync(layered);
          res.writeHead(401, { ...headers, "content-encoding": Array(count).fill("gzip").join(", ") });
          return res.end(layered);
        }
        if (how.includes("zstd")) {
          res.writeHead(401, { ...headers, "content-encoding": "zstd" });
          return res.end(body);
        }
        res.writeHead(401, { ...headers, "content-length": body.length });
        // A few bytes a write: the key falls across chunks.
        for (let i = 0; i < body.length; i += 7) res.write(body.subarray(i, i + 7));
        res.end();
      });
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const { port } = echo.address() as AddressInfo;
    const exchanges: Buffer[] = [];
    try {
      const gw = await start(
        [
          {
            id: "echo",
            upstreamBaseUrl: `http://127.0.0.1:${port}/v1`,
            api: "openai-completions",
            model: "m",
            headers: { authorization: `Bearer ${REAL_KEY}`, "x-odd-key": ODD_KEY },
          },
        ],
        "gw.sock",
        {
          recordExchanges: {},
          onExchange: (exchange) => exchanges.push(...(exchange.recording?.response?.chunks.map((c) => c.data) ?? [])),
        },
      );
      const ask = (how: string) =>
        request(gw.socketPath, {
          method: "POST",
          path: "/echo/chat/completions",
          headers: { "content-type": "application/json", authorization: `Bearer ${PLACEHOLDER}`, "x-title": how },
          body: chatBody("m"),
        });
      for (const reply of [await ask(""), await ask("gzip"), await ask("layers=4")]) {
        expect(reply.status).toBe(401);
        const seen = JSON.stringify(reply);
        expect(seen).not.toContain("REAL");
        expect(seen).not.toContain(b64(REAL_KEY).slice(4, -4));
        expect(reply.headers["x-echo-auth"]).toBe("<credential removed by sandbox-run>");
        expect(reply.headers["content-encoding"]).toBeUndefined();
        const body = JSON.parse(reply.body);
        expect(body.error.message).toBe("Incorrect API key provided: <credential removed by sandbox-run>");
        expect(body.error.key).toBe("<credential removed by sandbox-run>");
        expect(body.error.go).toBe("<credential removed by sandbox-run>");
      }
      // A coding the gateway cannot undo: nothing of the answer reaches the sandbox.
      const zstd = await ask("zstd");
      expect(zstd.status).toBe(502);
      expect(JSON.stringify(zstd)).not.toContain("REAL");
      // Nor a body in more codings than it undoes (MAX_CODING_LAYERS: review, session 44).
      const five = await ask("layers=5");
      expect(five.status).toBe(502);
      expect(five.body).toContain("answered in a coding (gzip, gzip, gzip, gzip, gzip)");
      // The host side (reply parser, recorder) reads what the sandbox got: Pi's next request
      // echoes the scrubbed reply, and the conversation ledger must find it the same.
      await waitFor(() => exchanges.length > 0);
      expect(Buffer.concat(exchanges).toString()).not.toContain(REAL_KEY);
      expect(Buffer.concat(exchanges).toString()).toContain(
        "Incorrect API key provided: <credential removed by sandbox-run>",
      );
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });
});
