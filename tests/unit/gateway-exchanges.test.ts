// Exchange records: for every forwarded generation, the conversation as sent and the reply as
// the model gave it, parsed on the host from the bytes the gateway relayed; with
// `recordExchanges`, the bytes themselves (bounded, timed), never a credential the gateway added.
// Real HTTP against the scripted model server; no Docker.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type GatewayExchange,
  type ModelGateway,
  type ModelGatewayOptions,
  startModelGateway,
} from "../../src/gateway/model-gateway.js";
import { type ScriptedModelServer, startScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { chatBody, request, waitFor } from "../support/gateway-client.js";

const REAL_KEY = "sk-REAL-exchange-canary-0123456789";

describe("model gateway: exchange records", () => {
  let dir: string;
  let scripted: ScriptedModelServer;
  let gateway: ModelGateway | undefined;
  let exchanges: GatewayExchange[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sr-gw-exchange-"));
    scripted = await startScriptedModelServer({
      scripts: {
        "text-model": [{ text: "Hello from upstream." }],
        "tool-model": [{ toolCalls: [{ name: "bash", arguments: { command: "ls -la" } }] }],
        "failing-model": [{ httpStatus: 500, body: "upstream broke" }],
        "endless-model": [{ endless: true }],
      },
    });
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await scripted.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(api: string, model: string, extra: Partial<ModelGatewayOptions> = {}) {
    const mine: GatewayExchange[] = [];
    exchanges = mine;
    gateway = await startModelGateway({
      socketPath: path.join(dir, `${model}.sock`),
      routes: [
        {
          id: "s",
          upstreamBaseUrl: scripted.baseUrlFor(api as "openai-completions"),
          api,
          model,
          headers: api === "anthropic-messages" ? { "x-api-key": REAL_KEY } : { authorization: `Bearer ${REAL_KEY}` },
        },
      ],
      onExchange: (exchange) => mine.push(exchange),
      ...extra,
    });
    return gateway;
  }

  const post = (gw: ModelGateway, pathname: string, body: string) =>
    request(gw.socketPath, {
      method: "POST",
      path: pathname,
      headers: { "content-type": "application/json", authorization: "Bearer sandbox-run-placeholder" },
      body,
    });

  it("reports the conversation and the model's streamed text reply, and records nothing unless asked", async () => {
    const gw = await start("openai-completions", "text-model");
    const reply = await post(gw, "/s/chat/completions", chatBody("text-model", true, "say hello"));
    expect(reply.status).toBe(200);
    await waitFor(() => exchanges.length === 1);
    const [exchange] = exchanges;
    expect(exchange).toMatchObject({
      seq: 1,
      routeId: "s",
      api: "openai-completions",
      path: "/s/chat/completions",
      status: 200,
      relay: "complete",
      request: {
        model: "text-model",
        stream: true,
        messages: [{ role: "user", parts: [{ kind: "text", text: "say hello" }] }],
      },
      reply: { text: "Hello from upstream.", toolCalls: [], complete: true, piStopReason: "stop" },
    });
    expect(exchange!.headersMs).toBeGreaterThanOrEqual(0);
    expect(exchange!.durationMs).toBeGreaterThanOrEqual(exchange!.headersMs!);
    expect(exchange!.recording).toBeUndefined();
    // Not a generation: no exchange.
    expect((await request(gw.socketPath, { path: "/s/models" })).status).toBe(200);
    expect(exchanges).toHaveLength(1);
  });

  it("records the bytes with their timing, bounded, and no credential the gateway added (canary)", async () => {
    const gw = await start("anthropic-messages", "tool-model", { recordExchanges: {} });
    const body = JSON.stringify({
      model: "tool-model",
      max_tokens: 64,
      stream: true,
      messages: [{ role: "user", content: "list files" }],
      tools: [{ name: "bash", description: "run", input_schema: { type: "object" } }],
    });
    let received = "";
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: gw.socketPath,
          method: "POST",
          path: "/s/v1/messages?beta=true",
          headers: {
            "content-type": "application/json",
            "x-api-key": "sandbox-run-placeholder",
            "anthropic-version": "2023-06-01",
          },
        },
        (res) => {
          res.on("data", (chunk: Buffer) => (received += chunk.toString("utf8")));
          res.on("end", resolve);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    await waitFor(() => exchanges.length === 1);
    const exchange = exchanges[0]!;
    expect(exchange.reply).toMatchObject({
      toolCalls: [{ name: "bash", argumentsJson: '{"command":"ls -la"}' }],
      piStopReason: "toolUse",
      complete: true,
    });
    const recording = exchange.recording!;
    expect(recording.request).toMatchObject({
      method: "POST",
      target: "/s/v1/messages?beta=true",
      bodyTruncated: false,
    });
    expect(JSON.parse(recording.request.body.toString("utf8"))).toEqual(JSON.parse(body));
    expect(recording.request.headers["anthropic-version"]).toBe("2023-06-01");
    expect(recording.request.headers).not.toHaveProperty("x-api-key");
    const response = recording.response!;
    expect(response.status).toBe(200);
    expect(response.headers["content-type"]).toContain("text/event-stream");
    expect(Buffer.concat(response.chunks.map((c) => c.data)).toString("utf8")).toBe(received);
    const times = response.chunks.map((c) => c.atMs);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // The canary: the real key is in no field, header or byte of the exchange.
    const everything = JSON.stringify(exchange, (_key, value) =>
      value?.type === "Buffer" && Array.isArray(value.data) ? Buffer.from(value.data).toString("latin1") : value,
    );
    expect(everything).not.toContain(REAL_KEY);
    expect(scripted.requests.at(-1)?.headers["x-api-key"]).toBe(REAL_KEY);
  });

  it("cuts recordings at their caps", async () => {
    const gw = await start("openai-completions", "text-model", {
      recordExchanges: { maxRequestBytes: 10, maxResponseBytes: 1 },
    });
    await post(gw, "/s/chat/completions", chatBody("text-model", true));
    await waitFor(() => exchanges.length === 1);
    const recording = exchanges[0]!.recording!;
    expect(recording.request.body.length).toBe(10);
    expect(recording.request.bodyTruncated).toBe(true);
    expect(recording.response?.chunks).toEqual([]);
    expect(recording.response?.bodyTruncated).toBe(true);
    // The reply is read whole all the same.
    expect(exchanges[0]!.reply?.text).toBe("Hello from upstream.");
  });

  it("reports an upstream failure and a client that leaves mid-stream", async () => {
    const failing = await start("openai-completions", "failing-model");
    expect((await post(failing, "/s/chat/completions", chatBody("failing-model", true))).status).toBe(500);
    await waitFor(() => exchanges.length === 1);
    expect(exchanges[0]).toMatchObject({ status: 500, relay: "complete" });
    expect(exchanges[0]!.reply?.error ?? exchanges[0]!.replyProblem).toBeTruthy();
    await failing.close();

    const endless = await start("openai-completions", "endless-model");
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: endless.socketPath,
          method: "POST",
          path: "/s/chat/completions",
          headers: { "content-type": "application/json" },
        },
        (res) => {
          res.once("data", () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on("error", () => {});
      req.setTimeout(5000, () => reject(new Error("no streamed chunk")));
      req.end(chatBody("endless-model", true));
    });
    await waitFor(() => exchanges.length === 1);
    expect(exchanges[0]).toMatchObject({ status: 200, relay: "client-gone", reply: { complete: false } });
  });
});
