// What one generation may cost and what one run's gateway holds at once (issue 17 part 6): one
// response per request, of at most the policy's output cap (lowered, never refused, so Pi's own
// requests keep working); JSON shapes that would cost the host far more than their bytes are
// refused before they are parsed; connections, requests in flight, held liveness requests and
// buffered body bytes are bounded per run. Real HTTP on a unix socket; no Docker.
import fs, { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { codecFor } from "../../src/gateway/apis/api-codec.js";
import { capGeneration } from "../../src/gateway/apis/generation-limits.js";
import { GatewayCapacity } from "../../src/gateway/gateway-capacity.js";
import {
  type GatewayRequestRecord,
  type ModelGateway,
  type ModelGatewayOptions,
  startModelGateway,
} from "../../src/gateway/model-gateway.js";
import { DEFAULT_MAX_OUTPUT_TOKENS } from "../../src/policy/policy-schema.js";
import { DEFAULT_JSON_SHAPE_LIMITS, jsonShapeProblem } from "../../src/util/json-shape.js";
import { type CaptureServer, chatBody, request, startCapture, waitFor } from "../support/gateway-client.js";

const FIXTURES = new URL("../fixtures/pi-requests/", import.meta.url);
const API_OF_FIXTURE = [
  "anthropic-messages",
  "google-generative-ai",
  "mistral-conversations",
  "openai-completions",
  "openai-responses",
];
const fixture = (api: string) =>
  JSON.parse(fs.readFileSync(new URL(`${api}.json`, FIXTURES), "utf8")) as {
    path: string;
    body: Record<string, unknown>;
  };
const clone = <T>(value: T): T => structuredClone(value);

describe("capGeneration", () => {
  it("leaves Pi's own requests (captured from pi 1.6.0, every api) as they are under the default cap", () => {
    for (const api of API_OF_FIXTURE) {
      const body = clone(fixture(api).body);
      const cap = capGeneration(api, body, DEFAULT_MAX_OUTPUT_TOKENS);
      expect(cap, api).toEqual({ ok: true, asked: 16384, sent: 16384 });
      expect(body, api).toEqual(fixture(api).body);
    }
  });

  it("lowers Pi's output limit to a smaller cap and changes nothing else", () => {
    const field: Record<string, string[]> = {
      "anthropic-messages": ["max_tokens"],
      "google-generative-ai": ["generationConfig", "maxOutputTokens"],
      "mistral-conversations": ["max_tokens"],
      "openai-completions": ["max_completion_tokens"],
      "openai-responses": ["max_output_tokens"],
    };
    for (const api of API_OF_FIXTURE) {
      const body = clone(fixture(api).body);
      expect(capGeneration(api, body, 4096), api).toEqual({ ok: true, asked: 16384, sent: 4096 });
      const expected = clone(fixture(api).body);
      const keys = field[api]!;
      let node = expected;
      for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>;
      node[keys.at(-1)!] = 4096;
      expect(body, api).toEqual(expected);
    }
  });

  it("writes the cap into a request that names no output limit", () => {
    const chat = { model: "m", messages: [] };
    expect(capGeneration("openai-completions", chat, 1000)).toEqual({ ok: true, sent: 1000 });
    expect(chat).toEqual({ model: "m", messages: [], max_completion_tokens: 1000 });
    const google: Record<string, unknown> = { contents: [] };
    expect(capGeneration("google-generative-ai", google, 1000)).toEqual({ ok: true, sent: 1000 });
    expect(google).toEqual({ contents: [], generationConfig: { maxOutputTokens: 1000 } });
    const responses: Record<string, unknown> = { model: "m", input: [] };
    capGeneration("openai-responses", responses, 1000);
    expect(responses.max_output_tokens).toBe(1000);
  });

  it("lowers every output limit over the cap and keeps a smaller one; keeps Anthropic's thinking budget below max_tokens", () => {
    const both = { model: "m", max_tokens: 1_000_000, max_completion_tokens: 100 };
    expect(capGeneration("openai-completions", both, 32_000)).toEqual({ ok: true, asked: 1_000_000, sent: 32_000 });
    expect(both).toMatchObject({ max_tokens: 32_000, max_completion_tokens: 100 });
    const thinking = { model: "m", max_tokens: 64_000, thinking: { type: "enabled", budget_tokens: 40_000 } };
    capGeneration("anthropic-messages", thinking, 32_000);
    expect(thinking).toEqual({ model: "m", max_tokens: 32_000, thinking: { type: "enabled", budget_tokens: 30_976 } });
    const fits = { model: "m", max_tokens: 64_000, thinking: { type: "enabled", budget_tokens: 16_384 } };
    capGeneration("anthropic-messages", fits, 32_000);
    expect(fits.thinking.budget_tokens).toBe(16_384);
  });

  it("refuses more than one response per request (n, candidateCount) and output limits that are not positive whole numbers", () => {
    const refused = (api: string, body: Record<string, unknown>) => {
      const cap = capGeneration(api, body, 32_000);
      return cap.ok ? "forwarded" : cap.reason;
    };
    expect(refused("openai-completions", { model: "m", n: 128 })).toMatch(/asks for 128 responses \(n\)/);
    expect(refused("mistral-conversations", { model: "m", n: 2 })).toMatch(/asks for 2 responses/);
    expect(refused("google-generative-ai", { generationConfig: { candidateCount: 8 } })).toMatch(
      /8 responses \(generationConfig\.candidateCount\)/,
    );
    expect(refused("openai-completions", { model: "m", n: "128" })).toMatch(/"128" responses/);
    expect(refused("openai-completions", { model: "m", n: 1 })).toBe("forwarded");
    expect(refused("openai-completions", { model: "m", max_tokens: "1000000" })).toMatch(/not a positive whole number/);
    expect(refused("anthropic-messages", { model: "m", max_tokens: 1e300 })).toMatch(/not a positive whole number/);
    expect(refused("anthropic-messages", { model: "m", max_tokens: 0 })).toMatch(/not a positive whole number/);
    expect(refused("google-generative-ai", { generationConfig: "big" })).toMatch(
      /generationConfig is not a JSON object/,
    );
  });
});

describe("jsonShapeProblem", () => {
  it("refuses structures that cost the host far more than their bytes, before they are parsed", () => {
    const flood = (item: string, count: number) => Buffer.from(`[${Array(count).fill(item).join(",")}]`);
    expect(jsonShapeProblem(flood("{}", 2_000_000))).toMatch(/more than 1000000 values/);
    expect(jsonShapeProblem(flood("[]", 2_000_000))).toMatch(/more than 1000000 values/);
    expect(jsonShapeProblem(flood("0", 2_000_000))).toMatch(/more than 1000000 values/);
    expect(jsonShapeProblem(Buffer.from(`${"[".repeat(300)}${"]".repeat(300)}`))).toMatch(/deeper than 256/);
  });

  it("counts nothing inside strings (escaped quotes included), and passes Pi's requests", () => {
    const text = `{"a":"${'[{,\\"'.repeat(1_000_000)}","b":[1,2]}`;
    expect(jsonShapeProblem(Buffer.from(text))).toBeUndefined();
    expect(jsonShapeProblem(Buffer.from(text), { maxValues: 4, maxDepth: 8 })).toBeUndefined();
    expect(jsonShapeProblem(Buffer.from(text), { maxValues: 3, maxDepth: 8 })).toMatch(/more than 3 values/);
    for (const api of API_OF_FIXTURE)
      expect(jsonShapeProblem(Buffer.from(JSON.stringify(fixture(api).body))), api).toBeUndefined();
    expect(DEFAULT_JSON_SHAPE_LIMITS.maxValues).toBeGreaterThan(100_000);
  });
});

describe("tool-call arguments inside a request", () => {
  const request = (argumentTexts: string[]) => ({
    model: "m",
    messages: [
      { role: "user", content: "hi" },
      ...argumentTexts.map((text, i) => ({
        role: "assistant",
        content: "",
        tool_calls: [{ id: `c${i}`, type: "function", function: { name: "bash", arguments: text } }],
      })),
    ],
  });
  const flood = (count: number) => `[${Array(count).fill("{}").join(",")}]`;

  it("are counted against one budget of values per request before they are parsed (review: 30 MB of [{},...] as arguments took ~1 GB and 8-10 s)", () => {
    for (const api of ["openai-completions", "mistral-conversations"]) {
      const codec = codecFor(api)!;
      const path = api === "openai-completions" ? "chat/completions" : "chat/completions";
      const one = codec.parseRequest(path, request([flood(1_100_000)]));
      expect(one, api).toMatchObject({
        ok: false,
        reason: expect.stringContaining("the tool-call arguments: its JSON holds more than"),
      });
      // Two calls under the budget each, over it together.
      const two = codec.parseRequest(path, request([flood(600_000), flood(600_000)]));
      expect(two, api).toMatchObject({ ok: false });
      expect(codec.parseRequest(path, request(['{"command":"ls"}', flood(1000)])), api).toMatchObject({ ok: true });
    }
    const responses = codecFor("openai-responses")!.parseRequest("responses", {
      model: "m",
      input: [{ type: "function_call", call_id: "c", name: "bash", arguments: flood(1_100_000) }],
    });
    expect(responses).toMatchObject({ ok: false, reason: expect.stringContaining("the tool-call arguments") });
  });
});

describe("GatewayCapacity", () => {
  it("hands out request and liveness slots and body bytes up to its limits, and takes them back once", () => {
    const capacity = new GatewayCapacity({ maxConnections: 4, maxRequests: 2, maxLiveness: 1, maxBufferedBytes: 100 });
    const a = capacity.request()!;
    const b = capacity.request()!;
    expect(capacity.request()).toBeUndefined();
    expect(a.reserve(60)).toBe(true);
    expect(b.reserve(50)).toBe(false);
    expect(b.reserve(40)).toBe(true);
    expect(capacity.usage).toEqual({ requests: 2, liveness: 0, bytes: 100 });
    a.release();
    a.release();
    expect(a.reserve(1)).toBe(false);
    expect(capacity.usage).toEqual({ requests: 1, liveness: 0, bytes: 40 });
    const held = capacity.liveness()!;
    expect(capacity.liveness()).toBeUndefined();
    held.release();
    expect(capacity.liveness()).toBeDefined();
  });
});

describe("model gateway: one run's bounds", () => {
  let dir: string;
  let upstream: CaptureServer;
  let gateway: ModelGateway | undefined;
  let records: GatewayRequestRecord[] = [];
  const opened: net.Socket[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sr-gw-limits-"));
    upstream = await startCapture();
  });
  afterEach(async () => {
    for (const socket of opened.splice(0)) socket.destroy();
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
    gateway = await startModelGateway({
      socketPath: path.join(dir, `gw-${Math.random().toString(36).slice(2)}.sock`),
      routes: [{ id: "p", upstreamBaseUrl: upstream.baseUrl, api, model: "m", headers: { authorization: "Bearer k" } }],
      onRequest: (r) => mine.push(r),
      ...extra,
    });
    return gateway;
  }

  const post = (gw: ModelGateway, pathname: string, body: unknown) =>
    request(gw.socketPath, {
      method: "POST",
      path: pathname,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  /** A raw connection that sends `head` (and `body`) and keeps the connection open. */
  function hold(gw: ModelGateway, head: string, body = ""): Promise<{ socket: net.Socket; answer: Promise<string> }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(gw.socketPath);
      opened.push(socket);
      let received = "";
      const answer = new Promise<string>((done) => {
        socket.on("data", (chunk: Buffer) => {
          received += chunk.toString("utf8");
          if (received.includes("\r\n\r\n")) done(received);
        });
        socket.on("close", () => done(received));
      });
      socket.once("error", reject);
      socket.once("connect", () => {
        // The gateway may close a refused connection while this side still writes.
        socket.on("error", () => {});
        socket.write(head);
        if (body) socket.write(body);
        resolve({ socket, answer });
      });
    });
  }

  it("refuses n: 128 and candidateCount: 8 before any upstream sees them; lowers max_tokens to the policy's cap", async () => {
    const gw = await start("openai-completions", { maxOutputTokens: 32_000 });
    const before = upstream.requests.length;
    const many = await post(gw, "/p/chat/completions", { ...JSON.parse(chatBody("m")), n: 128 });
    expect(many.status).toBe(403);
    expect(JSON.parse(many.body).error.message).toMatch(/128 responses \(n\)/);
    expect(upstream.requests.length).toBe(before);
    const huge = await post(gw, "/p/chat/completions", { ...JSON.parse(chatBody("m")), max_tokens: 1_000_000 });
    expect(huge.status).toBe(200);
    expect(JSON.parse(upstream.requests.at(-1)!.body).max_tokens).toBe(32_000);
    await waitFor(() => records.length === 2);
    expect(records[0]).toMatchObject({ status: 403, reason: "request-policy" });
    expect(records[1]).toMatchObject({ status: 200, outputTokens: { asked: 1_000_000, sent: 32_000 } });
    // A request naming none gets the cap written in; one under the cap is forwarded as sent (no record field).
    await post(gw, "/p/chat/completions", JSON.parse(chatBody("m")));
    expect(JSON.parse(upstream.requests.at(-1)!.body).max_completion_tokens).toBe(32_000);
    await post(gw, "/p/chat/completions", { ...JSON.parse(chatBody("m")), max_completion_tokens: 4096 });
    expect(JSON.parse(upstream.requests.at(-1)!.body).max_completion_tokens).toBe(4096);
    await waitFor(() => records.length === 4);
    expect(records[3]!.outputTokens).toBeUndefined();

    await gw.close();
    const google = await start("google-generative-ai", { maxOutputTokens: 32_000 });
    const path = "/p/models/m:streamGenerateContent";
    const candidates = await post(google, path, { contents: [], generationConfig: { candidateCount: 8 } });
    expect(candidates.status).toBe(403);
    expect(upstream.requests.length).toBe(before + 3);
  });

  it("refuses a body whose JSON is a flood of tiny values (413) without parsing it", async () => {
    const gw = await start("openai-completions");
    const flood = `{"model":"m","messages":[${Array(1_200_000).fill("{}").join(",")}]}`;
    const head = `POST /p/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-length: ${flood.length}\r\n\r\n`;
    const { answer } = await hold(gw, head, flood);
    expect(await answer).toMatch(/^HTTP\/1.1 413/);
    await waitFor(() => records.length === 1);
    expect(records[0]).toMatchObject({ status: 413, reason: "body-too-large" });
    expect(records[0]!.refused).toMatch(/more than 1000000 values/);
  });

  it("ends the run once refused bodies pass maxRefusedBytes (review: 29 MB bodies refused after ~0.4 s of parsing each, without end), and a stopped run's bodies are not read", async () => {
    const MiB = 1024 * 1024;
    const exceeded: Array<{ bytes: number; requests: number }> = [];
    const gw = await start("openai-completions", {
      maxRequestBytes: 1 * MiB,
      maxRefusedBytes: 2 * MiB,
      onRefusalsExceeded: (facts) => exceeded.push(facts),
    });
    // Another model than the run's: read whole, parsed, refused (403 request-policy). Bodyless
    // refusals (an unknown route) cost nothing to speak of and count no bytes.
    const padded = { ...JSON.parse(chatBody("other")), user: "x".repeat(900 * 1024) };
    for (let i = 0; i < 20; i++) expect((await post(gw, "/nope/chat/completions", {})).status).toBe(403);
    // Nor does a body over the cap (413, never parsed): Pi may send one honestly, and reports it.
    const huge = { ...JSON.parse(chatBody("m")), user: "x".repeat(1.5 * MiB) };
    for (let i = 0; i < 3; i++) expect((await post(gw, "/p/chat/completions", huge)).status).toBe(413);
    expect(exceeded).toEqual([]);
    expect((await post(gw, "/p/chat/completions", padded)).status).toBe(403);
    expect((await post(gw, "/p/chat/completions", padded)).status).toBe(403);
    expect(exceeded).toEqual([]);
    expect((await post(gw, "/p/chat/completions", padded)).status).toBe(403);
    await waitFor(() => exceeded.length === 1);
    expect(exceeded[0]!.requests).toBe(3);
    expect(exceeded[0]!.bytes).toBeGreaterThan(2 * MiB);
    expect((await post(gw, "/p/chat/completions", padded)).status).toBe(403);
    expect(exceeded).toHaveLength(1);

    // Once the run has stopped, a generation is refused before its body is read: not JSON is
    // not even noticed.
    gw.stopForwarding("limit refusals");
    const head = `POST /p/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 9\r\n\r\n`;
    const { answer } = await hold(gw, head, "not json!");
    expect(await answer).toMatch(/^HTTP\/1.1 429/);
    await waitFor(() => records.at(-1)?.reason === "run-stopped");
  });

  it("ends the run once generation bodies the upstream turned down pass maxUnansweredBytes: refunded turns no longer parse without end (review, session 45)", async () => {
    const MiB = 1024 * 1024;
    // A provider that answers "prompt is too long" to every request.
    const turningDown = await startCapture((_req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "prompt is too long" } }));
    });
    try {
      const exceeded: Array<{ bytes: number; requests: number }> = [];
      const budgetExceeded: number[] = [];
      const gw = await start("openai-completions", {
        routes: [{ id: "p", upstreamBaseUrl: turningDown.baseUrl, api: "openai-completions", model: "m", headers: {} }],
        maxRequestBytes: 2 * MiB,
        maxGenerations: 2,
        onBudgetExceeded: (attempted) => budgetExceeded.push(attempted),
        maxUnansweredBytes: 3 * MiB,
        onUnansweredExceeded: (facts) => exceeded.push(facts),
      });
      const padded = { ...JSON.parse(chatBody("m")), user: "x".repeat(900 * 1024) };
      for (let i = 0; i < 3; i++) expect((await post(gw, "/p/chat/completions", padded)).status).toBe(400);
      expect(exceeded).toEqual([]);
      expect((await post(gw, "/p/chat/completions", padded)).status).toBe(400);
      await waitFor(() => exceeded.length === 1);
      expect(exceeded[0]!.requests).toBe(4);
      expect(exceeded[0]!.bytes).toBeGreaterThan(3 * MiB);
      // Each was refunded: the turn budget of 2 never saw them.
      expect(budgetExceeded).toEqual([]);
      expect(turningDown.requests).toHaveLength(4);
      // What reached the upstream says it is JSON, whatever the sandbox said.
      const form = await request(gw.socketPath, {
        method: "POST",
        path: "/p/chat/completions",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: chatBody("m"),
      });
      expect(form.status).toBe(400);
      expect(turningDown.requests.at(-1)!.headers["content-type"]).toBe("application/json");
    } finally {
      await turningDown.close();
    }
  });

  it("the unanswered budget grows by four times each answered generation's body: a long run whose provider fails now and then goes on (fix review, session 45)", async () => {
    const MiB = 1024 * 1024;
    // Answers 200 when asked with `x-title: ok`, 503 otherwise.
    const flaky = await startCapture((req, res) => {
      const ok = req.headers["x-title"] === "ok";
      res.writeHead(ok ? 200 : 503, { "content-type": "application/json" });
      res.end(JSON.stringify(ok ? { ok: true } : { error: { message: "overloaded" } }));
    });
    try {
      const exceeded: Array<{ bytes: number; requests: number }> = [];
      const gw = await start("openai-completions", {
        routes: [{ id: "p", upstreamBaseUrl: flaky.baseUrl, api: "openai-completions", model: "m", headers: {} }],
        maxRequestBytes: 2 * MiB,
        maxUnansweredBytes: 3 * MiB,
        onUnansweredExceeded: (facts) => exceeded.push(facts),
      });
      const body = JSON.stringify({ ...JSON.parse(chatBody("m")), user: "x".repeat(900 * 1024) });
      const ask = (ok: boolean) =>
        request(gw.socketPath, {
          method: "POST",
          path: "/p/chat/completions",
          headers: { "content-type": "application/json", ...(ok ? { "x-title": "ok" } : {}) },
          body,
        });
      expect((await ask(true)).status).toBe(200);
      // 3 MiB and four times one answered body (~3.5 MiB): seven failures fit, the eighth does not.
      for (let i = 0; i < 7; i++) expect((await ask(false)).status).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(exceeded).toEqual([]);
      expect((await ask(false)).status).toBe(503);
      await waitFor(() => exceeded.length === 1);
      expect(exceeded[0]!.requests).toBe(8);

      // It grows by what was forwarded: whitespace the gateway strips buys nothing (fix review 2, session 45).
      const exceededAgain: Array<{ bytes: number; requests: number }> = [];
      await gw.close();
      const padded = await start("openai-completions", {
        routes: [{ id: "p", upstreamBaseUrl: flaky.baseUrl, api: "openai-completions", model: "m", headers: {} }],
        maxRequestBytes: 4 * MiB,
        maxUnansweredBytes: 3 * MiB,
        onUnansweredExceeded: (facts) => exceededAgain.push(facts),
      });
      const spaced = `${" ".repeat(3 * MiB)}${chatBody("m")}`;
      const answered = await request(padded.socketPath, {
        method: "POST",
        path: "/p/chat/completions",
        headers: { "content-type": "application/json", "x-title": "ok" },
        body: spaced,
      });
      expect(answered.status).toBe(200);
      const failing = () =>
        request(padded.socketPath, {
          method: "POST",
          path: "/p/chat/completions",
          headers: { "content-type": "application/json" },
          body,
        });
      for (let i = 0; i < 4; i++) expect((await failing()).status).toBe(503);
      await waitFor(() => exceededAgain.length === 1);
      expect(exceededAgain[0]!.requests).toBe(4);
    } finally {
      await flaky.close();
    }
  });

  it("holds at most maxBufferedBytes of bodies: unfinished posts past the pool are answered 503 at once", async () => {
    const MiB = 1024 * 1024;
    const gw = await start("openai-completions", {
      maxRequestBytes: 2 * MiB,
      capacity: { maxBufferedBytes: 5 * MiB },
    });
    const head = (length?: number) =>
      `POST /p/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n${
        length === undefined ? "transfer-encoding: chunked" : `content-length: ${length}`
      }\r\n\r\n`;
    // Declared lengths: two fit (4 MiB of 5), the other eight are refused before their bodies are read.
    const declared = await Promise.all(
      Array.from({ length: 10 }, () => hold(gw, head(2 * MiB - 1), `{"model":"m","x":"${"a".repeat(MiB)}`)),
    );
    const answers = await Promise.all(
      declared.map(({ answer }) => Promise.race([answer, new Promise<string>((r) => setTimeout(() => r(""), 1000))])),
    );
    expect(answers.filter((a) => a.startsWith("HTTP/1.1 503")).length).toBe(8);
    expect(answers.filter((a) => a === "").length).toBe(2);
    expect(answers.find((a) => a.startsWith("HTTP/1.1 503"))).toMatch(/fill the gateway's 5 MiB/);
    // Chunked bodies take from what is left (1 MiB) as they arrive; the one that overflows it is dropped.
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const chunked = await hold(gw, head(), chunk(`{"model":"m","x":"${"b".repeat(MiB + 10)}`));
    expect(await chunked.answer).toMatch(/^HTTP\/1.1 503/);
    await waitFor(() => records.filter((r) => r.reason === "busy").length === 9);
  });

  it("keeps at most maxRequests in flight, maxLiveness liveness requests held and maxConnections connections open", async () => {
    const gw = await start("openai-completions", {
      capacity: { maxConnections: 12, maxRequests: 3, maxLiveness: 2 },
    });
    // Three requests whose bodies never end hold the three request slots; the fourth is answered 503.
    const unfinished = "POST /p/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-length: 100\r\n\r\n{";
    for (let i = 0; i < 3; i++) await hold(gw, unfinished);
    const fourth = await hold(gw, unfinished);
    expect(await fourth.answer).toMatch(/^HTTP\/1.1 503 .*\r\n[\s\S]*3 requests of this run are in flight/);
    // Two liveness requests are held; the third is answered 429.
    const alive = "GET /__sandbox-run/alive HTTP/1.1\r\nhost: g\r\n\r\n";
    const live = [await hold(gw, alive), await hold(gw, alive)];
    for (const { answer } of live) expect(await answer).toMatch(/^HTTP\/1.1 200/);
    const third = await hold(gw, alive);
    expect(await third.answer).toMatch(/^HTTP\/1.1 429[\s\S]*2 liveness requests are held/);
    // Connections past 12 are closed as they arrive (the refused ones above may already be gone).
    const idle = await Promise.all(Array.from({ length: 30 }, () => hold(gw, "")));
    await new Promise((r) => setTimeout(r, 200));
    const open = [...live.map((l) => l.socket), ...idle.map((i) => i.socket)].filter(
      (s) => !s.destroyed && !s.readableEnded,
    );
    expect(open.length).toBeLessThanOrEqual(12);
    expect(open.length).toBeGreaterThanOrEqual(5);
    // Once the held ones go, the gateway serves again.
    for (const socket of opened.splice(0)) socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect((await post(gw, "/p/chat/completions", JSON.parse(chatBody("m")))).status).toBe(200);
  });
});
