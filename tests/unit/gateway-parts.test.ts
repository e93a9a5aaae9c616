// The gateway's pure parts, one by one: admission, header rules, inspection, the exchange tap.
import fs from "node:fs";
import { describe, expect, it } from "vitest";
import type { ApiCodec, ModelReply } from "../../src/gateway/apis/api-codec.js";
import { isCredentialHeader } from "../../src/gateway/credential-headers.js";
import { ExchangeTap } from "../../src/gateway/exchange-tap.js";
import { compileRoutes } from "../../src/gateway/gateway-routes.js";
import {
  downstreamResponseHeaders,
  relayableRequestHeaders,
  upstreamRequestHeaders,
} from "../../src/gateway/relay-headers.js";
import { admitRequest } from "../../src/gateway/request-admission.js";
import { inspectRequest } from "../../src/gateway/request-inspection.js";

const routes = compileRoutes([
  {
    id: "oa",
    upstreamBaseUrl: "https://api.example/v1",
    api: "openai-completions",
    model: "m",
    headers: { Authorization: "Bearer real" },
  },
  { id: "g", upstreamBaseUrl: "https://g.example/v1beta", api: "google-generative-ai", model: "gem", headers: {} },
]);

describe("admitRequest", () => {
  it("names the route, the path below its base and whether it generates", () => {
    const admitted = admitRequest(routes, "POST", "/oa/chat/completions");
    expect(admitted).toMatchObject({ ok: true, rest: "/chat/completions", query: "", generation: true });
    expect(admitted.ok && admitted.target.href).toBe("https://api.example/v1/chat/completions");
    expect(admitRequest(routes, "GET", "/oa/models")).toMatchObject({ ok: true, generation: false });
    const google = admitRequest(routes, "POST", "/g/models/gem:streamGenerateContent?alt=sse");
    expect(google).toMatchObject({ ok: true, query: "?alt=sse", generation: true });
    expect(google.ok && google.target.href).toBe("https://g.example/v1beta/models/gem:streamGenerateContent?alt=sse");
  });

  it("lets through only the query string Pi sends with each request (review, session 45: `?model=` travelled with the key)", () => {
    const refused = (method: string, url: string) => {
      const a = admitRequest(routes, method, url);
      return a.ok ? "admitted" : `${a.status} ${a.code}: ${a.detail}`;
    };
    // A proxy in front of the provider may take these over the checked body (LiteLLM reads `?model=`).
    expect(refused("POST", "/oa/chat/completions?model=other")).toBe(
      "403 not-model-api: not a query string Pi sends with POST /chat/completions for openai-completions (allowed: none)",
    );
    expect(refused("POST", "/oa/chat/completions?")).toMatch(/^403 not-model-api/);
    expect(refused("GET", "/oa/models?api_base=http://attacker.example")).toMatch(/^403 not-model-api/);
    expect(refused("POST", "/g/models/gem:streamGenerateContent?alt=sse&model=other")).toMatch(
      /^403 not-model-api: .*\(allowed: none or \?alt=sse\)$/,
    );
    expect(refused("POST", "/g/models/gem:streamGenerateContent?model=other&alt=sse")).toMatch(/^403 not-model-api/);
    expect(refused("POST", "/g/models/gem:streamGenerateContent")).toBe("admitted");
    // Token counting: Pi never asks for it.
    expect(refused("POST", "/g/models/gem:countTokens")).toMatch(/^403 not-model-api/);
    const anthropic = compileRoutes([
      { id: "a", upstreamBaseUrl: "https://a.example", api: "anthropic-messages", model: "c", headers: {} },
    ]);
    expect(admitRequest(anthropic, "POST", "/a/v1/messages?beta=true")).toMatchObject({
      ok: true,
      query: "?beta=true",
    });
    expect(admitRequest(anthropic, "POST", "/a/v1/messages?beta=true&model=x")).toMatchObject({ ok: false });
    expect(admitRequest(anthropic, "POST", "/a/v1/messages/count_tokens?beta=true")).toMatchObject({
      ok: false,
      code: "not-model-api",
    });
  });

  it("refuses with a stable code", () => {
    const code = (method: string, url: string) => {
      const a = admitRequest(routes, method, url);
      return a.ok ? "admitted" : a.code;
    };
    expect(code("POST", "/nope/chat/completions")).toBe("unknown-route");
    expect(code("POST", "/oa/files")).toBe("not-model-api");
    expect(code("GET", "/oa/chat/completions")).toBe("not-model-api");
    expect(code("POST", "/oa/chat/completions/../../x")).toBe("not-model-api");
    expect(code("GET", "http://evil.example/oa/models")).toBe("absolute-target");
    expect(code("GET", "//evil.example/oa/models")).toBe("absolute-target");
    expect(code("POST", "/__sandbox-run/chat/completions")).toBe("unknown-route");
  });
});

describe("header rules", () => {
  it("never relays credentials, account selection, hop-by-hop or Connection-named headers", () => {
    const relayable = relayableRequestHeaders({
      authorization: "Bearer placeholder",
      "x-api-key": "placeholder",
      cookie: "a=b",
      "proxy-authorization": "x",
      "openai-organization": "org",
      connection: "keep-alive, x-hop",
      "x-hop": "1",
      "content-length": "12",
      "accept-encoding": "gzip",
      "anthropic-version": "2023-06-01",
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(relayable).toEqual({
      "anthropic-version": "2023-06-01",
      "content-type": "application/x-www-form-urlencoded",
    });
    // The body is JSON the gateway wrote, and says so whatever the sandbox said (a form was read as one: session 45).
    expect(upstreamRequestHeaders(relayable, "api.example", [["authorization", "Bearer real"]], 12)).toEqual({
      "anthropic-version": "2023-06-01",
      host: "api.example",
      "accept-encoding": "identity",
      "content-type": "application/json",
      "content-length": 12,
      authorization: "Bearer real",
    });
    expect(upstreamRequestHeaders(relayable, "api.example", [], 0)).not.toHaveProperty("content-type");
    expect(
      downstreamResponseHeaders({
        "set-cookie": ["a=b"],
        "content-type": "text/event-stream",
        "transfer-encoding": "chunked",
      }),
    ).toEqual({
      "content-type": "text/event-stream",
    });
    expect(["Authorization", "x-goog-api-key", "cf-aig-authorization"].every(isCredentialHeader)).toBe(true);
    expect(isCredentialHeader("x-team")).toBe(false);
  });
  it("relays only the headers Pi's providers send: a proxy's routing, cache or account headers stay behind", () => {
    const steering = {
      "x-portkey-custom-host": "https://attacker.example",
      "x-portkey-provider": "openai",
      "helicone-target-url": "https://attacker.example",
      "x-forwarded-host": "attacker.example",
      forwarded: "host=attacker.example",
      "cf-aig-cache-key": "someone-elses-entry",
      "x-goog-user-project": "another-project",
      "openai-project": "proj-other",
      "chatgpt-account-id": "another-account",
    };
    expect(relayableRequestHeaders({ ...steering, "content-type": "application/json" })).toEqual({
      "content-type": "application/json",
    });
    // Every header real Pi sent in the five captured requests (tests/fixtures/pi-requests) goes
    // through but its credential and accept-encoding.
    for (const api of PI_REQUEST_FIXTURES) {
      const sent = JSON.parse(fs.readFileSync(new URL(`../fixtures/pi-requests/${api}.json`, import.meta.url), "utf8"))
        .headers as Record<string, string>;
      const expected = Object.fromEntries(
        Object.entries(sent).filter(([name]) => !isCredentialHeader(name) && name !== "accept-encoding"),
      );
      expect(Object.keys(expected).length, api).toBeGreaterThan(3);
      expect(relayableRequestHeaders(sent), api).toEqual(expected);
    }
  });
});

const PI_REQUEST_FIXTURES = [
  "anthropic-messages",
  "google-generative-ai",
  "mistral-conversations",
  "openai-completions",
  "openai-responses",
];

describe("inspectRequest", () => {
  const admitted = (url: string, method = "POST") => {
    const a = admitRequest(routes, method, url);
    if (!a.ok) throw new Error(a.detail);
    return a;
  };

  it("returns the conversation of a generation and the body re-serialised", () => {
    const result = inspectRequest(
      admitted("/oa/chat/completions"),
      "POST",
      Buffer.from('{ "model": "m",  "messages": [ {"role":"user","content":"hi"} ] }'),
      {},
    );
    expect(result).toMatchObject({
      ok: true,
      request: { model: "m", messages: [{ role: "user", parts: [{ kind: "text", text: "hi" }] }] },
    });
    expect(result.ok && result.body.toString()).toBe('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
  });

  it("pins Google's model, which is in the path", () => {
    const body = Buffer.from(JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }));
    expect(inspectRequest(admitted("/g/models/gem:streamGenerateContent"), "POST", body, {}).ok).toBe(true);
    const other = inspectRequest(admitted("/g/models/gem-pro:streamGenerateContent"), "POST", body, {});
    expect(other).toMatchObject({ ok: false, status: 403, code: "request-policy" });
  });

  it("refuses what it cannot read", () => {
    expect(inspectRequest(admitted("/oa/chat/completions"), "POST", Buffer.from("{"), {})).toMatchObject({
      ok: false,
      status: 400,
      code: "body-unreadable",
    });
    const unreadable = inspectRequest(
      admitted("/oa/chat/completions"),
      "POST",
      Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "wizard", content: "x" }] })),
      {},
    );
    expect(unreadable).toMatchObject({ ok: false, code: "body-unreadable" });
  });
});

describe("ExchangeTap", () => {
  const reply: ModelReply = { text: "ok", textBlocks: ["ok"], toolCalls: [], complete: true };
  const fakeCodec = (
    push: (chunk: Buffer) => void = () => {},
  ): ApiCodec & { contentTypes: Array<string | undefined> } => {
    const contentTypes: Array<string | undefined> = [];
    return {
      api: "fake",
      contentTypes,
      parseRequest: () => ({ ok: false, reason: "unused" }),
      refusal: () => undefined,
      replyParser: (contentType) => {
        contentTypes.push(contentType);
        return { push, end: () => reply };
      },
    };
  };

  it("feeds the codec's parser and keeps no bytes unless recording", () => {
    const seen: string[] = [];
    const codec = fakeCodec((c) => seen.push(c.toString()));
    const tap = new ExchangeTap(codec);
    tap.onHeaders(200, { "content-type": "text/event-stream" });
    tap.onChunk(Buffer.from("a"));
    tap.onChunk(Buffer.from("b"));
    expect(tap.finish()).toEqual({ reply });
    expect(seen).toEqual(["a", "b"]);
    expect(codec.contentTypes).toEqual(["text/event-stream"]);
  });

  it("survives a parser that throws, and a compressed body it cannot read, while recording the bytes", () => {
    const throwing = new ExchangeTap(
      fakeCodec(() => {
        throw new Error("boom");
      }),
      {},
    );
    throwing.onHeaders(200, { "content-type": "text/event-stream", "set-cookie": ["x"] });
    throwing.onChunk(Buffer.from("data"));
    const finished = throwing.finish();
    expect(finished.reply).toBeUndefined();
    expect(finished.replyProblem).toContain("boom");
    expect(finished.response?.chunks.map((c) => c.data.toString())).toEqual(["data"]);
    expect(finished.response?.headers).toEqual({ "content-type": "text/event-stream" });

    const gzipped = new ExchangeTap(fakeCodec());
    gzipped.onHeaders(200, { "content-encoding": "gzip" });
    expect(gzipped.finish()).toEqual({ replyProblem: "the upstream sent a gzip-encoded body" });
  });
});
