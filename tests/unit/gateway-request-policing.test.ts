// The gateway is not a confused deputy: a request for another model, one with provider-side
// tools or an unknown beta flag, one too large, or one whose JSON means something else to the
// provider is refused (or normalised) before it reaches the upstream. Real HTTP on a unix
// socket, a capturing upstream; no Docker.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type GatewayRequestRecord,
  type GatewayRoute,
  type ModelGateway,
  type ModelGatewayOptions,
  startModelGateway,
} from "../../src/gateway/model-gateway.js";
import { type CaptureServer, chatBody, request, startCapture, waitFor } from "../support/gateway-client.js";

const REAL_KEY = "sk-REAL-policing-key-0123456789";
const RUN_MODEL = "run-model";

describe("model gateway: request policing", () => {
  let dir: string;
  let upstream: CaptureServer;
  let gateway: ModelGateway | undefined;
  let records: GatewayRequestRecord[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sr-gw-police-"));
    upstream = await startCapture();
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(api: string, extra: Partial<ModelGatewayOptions> = {}): Promise<ModelGateway> {
    const mine: GatewayRequestRecord[] = [];
    records = mine;
    const route: GatewayRoute = {
      id: "p",
      upstreamBaseUrl: upstream.baseUrl,
      api,
      model: RUN_MODEL,
      headers: { authorization: `Bearer ${REAL_KEY}` },
    };
    gateway = await startModelGateway({
      socketPath: path.join(dir, `${api}.sock`),
      routes: [route],
      onRequest: (r) => mine.push(r),
      ...extra,
    });
    return gateway;
  }

  const post = (gw: ModelGateway, pathname: string, body: string | Buffer, headers: Record<string, string> = {}) =>
    request(gw.socketPath, {
      method: "POST",
      path: pathname,
      headers: { "content-type": "application/json", ...headers },
      body,
    });

  const anthropic = (extra: Record<string, unknown> = {}, model = RUN_MODEL) =>
    JSON.stringify({ model, max_tokens: 16, stream: true, messages: [{ role: "user", content: "hi" }], ...extra });

  /** Sends each case, expects 403 with the reason, and that none reached the upstream. */
  async function expectRefused(
    gw: ModelGateway,
    cases: Array<{ name: string; path: string; body: string; headers?: Record<string, string>; reason: RegExp }>,
  ) {
    const before = upstream.requests.length;
    for (const c of cases) {
      const reply = await post(gw, c.path, c.body, c.headers);
      expect(reply.status, c.name).toBe(403);
      expect(JSON.parse(reply.body).error.message, c.name).toMatch(c.reason);
    }
    expect(upstream.requests.length).toBe(before);
    await waitFor(() => records.length >= cases.length);
    expect(records.map((r) => r.reason)).toEqual(cases.map(() => "request-policy"));
    for (const [i, c] of cases.entries()) expect(records[i]!.refused, c.name).toMatch(c.reason);
  }

  it("pins the model: another model, a fallback list naming one, or none at all is refused", async () => {
    const gw = await start("openai-completions");
    await expectRefused(gw, [
      {
        name: "other model",
        path: "/p/chat/completions",
        body: chatBody("gpt-expensive"),
        reason: /model "gpt-expensive"/,
      },
      {
        name: "fallback models",
        path: "/p/chat/completions",
        body: JSON.stringify({ ...JSON.parse(chatBody(RUN_MODEL)), models: ["gpt-expensive"] }),
        reason: /gpt-expensive/,
      },
      {
        name: "no model",
        path: "/p/chat/completions",
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
        reason: /names no model/,
      },
    ]);
    // The run's own model goes through, with the real key.
    expect((await post(gw, "/p/chat/completions", chatBody(RUN_MODEL))).status).toBe(200);
    expect(upstream.requests.at(-1)?.headers.authorization).toBe(`Bearer ${REAL_KEY}`);
  });

  it("refuses provider-side tools (MCP connectors, web fetch, code execution) and unknown beta flags", async () => {
    const gw = await start("anthropic-messages");
    const path = "/p/v1/messages";
    await expectRefused(gw, [
      {
        name: "mcp_servers",
        path,
        body: anthropic({ mcp_servers: [{ type: "url", url: "https://attacker.example/mcp", name: "x" }] }),
        reason: /MCP connector/,
      },
      {
        name: "web fetch tool",
        path,
        body: anthropic({ tools: [{ type: "web_fetch_20250910", name: "web_fetch" }] }),
        reason: /server tool .*web_fetch_20250910/,
      },
      {
        name: "code execution tool",
        path,
        body: anthropic({ tools: [{ type: "code_execution_20250825", name: "code_execution" }] }),
        reason: /code_execution_20250825/,
      },
      {
        name: "unknown beta header",
        path,
        body: anthropic(),
        headers: { "anthropic-beta": "fine-grained-tool-streaming-2025-05-14,mcp-client-2025-04-04" },
        reason: /anthropic-beta .*mcp-client-2025-04-04.* allow-list/,
      },
      { name: "other model", path, body: anthropic({}, "claude-opus-expensive"), reason: /claude-opus-expensive/ },
    ]);
    // Pi's own beta flags pass.
    const ok = await post(gw, path, anthropic(), { "anthropic-beta": "fine-grained-tool-streaming-2025-05-14" });
    expect(ok.status).toBe(200);
  });

  it("lets through what the policy names: a server tool and a beta flag", async () => {
    const gw = await start("anthropic-messages", {
      providerFeatures: { allowServerTools: ["web_search_20250305"], allowBetas: ["context-1m-2025-08-07"] },
    });
    const before = upstream.requests.length;
    const reply = await post(
      gw,
      "/p/v1/messages",
      anthropic({ tools: [{ type: "web_search_20250305", name: "web_search" }] }),
      { "anthropic-beta": "context-1m-2025-08-07" },
    );
    expect(reply.status).toBe(200);
    expect(upstream.requests.length).toBe(before + 1);
    expect(upstream.requests.at(-1)?.headers["anthropic-beta"]).toBe("context-1m-2025-08-07");
  });

  it("forwards exactly what it checked: duplicate keys cannot smuggle another model past the check", async () => {
    const gw = await start("openai-completions");
    const before = upstream.requests.length;
    // JSON.parse keeps the last "model"; a provider's parser might keep the first.
    const smuggled = `{"model":"gpt-expensive","stream":false,"model":"${RUN_MODEL}","messages":[{"role":"user","content":"hi"}]}`;
    expect((await post(gw, "/p/chat/completions", smuggled)).status).toBe(200);
    const seen = upstream.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.body).not.toContain("gpt-expensive");
    expect(JSON.parse(seen[0]!.body)).toEqual({
      model: RUN_MODEL,
      stream: false,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(Number(seen[0]!.headers["content-length"])).toBe(Buffer.byteLength(seen[0]!.body));
  });

  it("refuses bodies that are not JSON, and GET requests with a body", async () => {
    const gw = await start("openai-completions");
    const before = upstream.requests.length;
    const notJson = await post(gw, "/p/chat/completions", "model=run-model");
    expect(notJson.status).toBe(400);
    const getWithBody = await request(gw.socketPath, {
      method: "GET",
      path: "/p/models",
      headers: { "content-length": "2" },
      body: "{}",
    });
    expect(getWithBody.status).toBe(400);
    expect(upstream.requests.length).toBe(before);
    await waitFor(() => records.length === 2);
    expect(
      records.map((r) => r.reason),
      JSON.stringify(records),
    ).toEqual(["body-unreadable", "body-unreadable"]);
  });

  it("caps request bodies: over the cap is answered 413 and refused, declared or streamed, and the gateway carries on", async () => {
    const gw = await start("openai-completions", { maxRequestBytes: 64 * 1024 });
    const before = upstream.requests.length;
    const big = JSON.stringify({ model: RUN_MODEL, messages: [{ role: "user", content: "x".repeat(200 * 1024) }] });
    const declared = await post(gw, "/p/chat/completions", big);
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body).error.message).toContain("larger than 65536 bytes");
    // Without a content-length: the gateway counts as the body arrives.
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: gw.socketPath,
          method: "POST",
          path: "/p/chat/completions",
          headers: { "transfer-encoding": "chunked" },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      for (let i = 0; i < 10; i++) req.write("y".repeat(16 * 1024));
      req.end();
    });
    expect(streamed).toBe(413);
    expect(upstream.requests.length).toBe(before);
    await waitFor(() => records.length === 2);
    expect(records.map((r) => [r.status, r.reason])).toEqual([
      [413, "body-too-large"],
      [413, "body-too-large"],
    ]);
    expect((await post(gw, "/p/chat/completions", chatBody(RUN_MODEL))).status).toBe(200);
  });

  it("keeps the sandbox's credential and account headers from the upstream and asks for an uncompressed reply", async () => {
    const gw = await start("openai-completions");
    await post(gw, "/p/chat/completions", chatBody(RUN_MODEL), {
      authorization: "Bearer sandbox-run-placeholder",
      "openai-organization": "org-of-someone-else",
      "openai-project": "proj-other",
      "accept-encoding": "gzip, br",
      "x-stainless-lang": "js",
    });
    const headers = upstream.requests.at(-1)!.headers;
    expect(headers.authorization).toBe(`Bearer ${REAL_KEY}`);
    expect(headers["openai-organization"]).toBeUndefined();
    expect(headers["openai-project"]).toBeUndefined();
    expect(headers["accept-encoding"]).toBe("identity");
    expect(headers["x-stainless-lang"]).toBe("js");
  });
});
