// The scripted model server over real HTTP (in-process, no Docker): each API at its own base URL,
// the same script steps in every wire format, recorded replies that the gateway's codecs read
// back as the step. Real Pi reading these replies is covered by
// tests/integration/gateway-apis-real-pi.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codecFor } from "../../src/gateway/apis/api-codec.js";
import {
  type RecordedRequest,
  SCRIPTED_APIS,
  type ScriptContext,
  type ScriptedApi,
  type ScriptedModelServer,
  startScriptedModelServer,
} from "../../src/scripted-model/scripted-model-server.js";
import { captured, subpath } from "../support/api-codec-fixtures.js";

let server: ScriptedModelServer;
beforeAll(async () => {
  server = await startScriptedModelServer();
});
afterAll(async () => {
  await server.close();
});

/** Pi's real third request of a run (two assistant turns so far), sent to `model`. */
async function send(api: ScriptedApi, model: string, options: { stream?: boolean } = {}) {
  const fixture = captured(api);
  const body = structuredClone(fixture.body);
  let path = subpath(api, fixture.path);
  if (api === "google-generative-ai") {
    path = `/models/${model}:${options.stream === false ? "generateContent" : "streamGenerateContent"}`;
  } else {
    body.model = model;
    if (options.stream === false) body.stream = false;
  }
  const response = await fetch(`${server.baseUrlFor(api)}${path}${api === "google-generative-ai" ? "?alt=sse" : ""}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  const recorded = server.requests.filter((r) => r.model === model).at(-1)!;
  return { response, text, recorded };
}

function replyOf(api: ScriptedApi, recorded: RecordedRequest) {
  const parser = codecFor(api)!.replyParser(String(recorded.response.headers["content-type"]));
  for (const chunk of recorded.response.chunks) parser.push(chunk);
  return parser.end();
}

describe("scripted model server", () => {
  it("keeps baseUrl for openai-completions and gives every API its own base URL", () => {
    expect(server.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(server.baseUrlFor("openai-completions")).toBe(server.baseUrl);
    const urls = SCRIPTED_APIS.map((api) => server.baseUrlFor(api));
    expect(new Set(urls).size).toBe(SCRIPTED_APIS.length);
  });

  describe.each(SCRIPTED_APIS.map((api) => [api]))("%s", (api) => {
    it("answers step n of the script for a conversation with n assistant replies, and records the reply bytes", async () => {
      const model = `steps-${api}`;
      server.setScript(model, [{ text: "zero" }, { text: "one" }, { text: "two: ünï €" }]);
      const { response, recorded } = await send(api, model);
      expect(response.status).toBe(200);
      expect(recorded.api).toBe(api);
      expect(recorded.response).toMatchObject({ status: 200, ended: true, bodyTruncated: false });
      expect(replyOf(api, recorded)).toMatchObject({
        text: "two: ünï €",
        toolCalls: [],
        piStopReason: "stop",
        complete: true,
      });
    });

    it("sends tool calls whose arguments the codec reads back exactly", async () => {
      const model = `tools-${api}`;
      const args = { command: "printf 'a\\nb'", n: 3, nested: { list: [1, "x"] } };
      server.setScript(model, () => ({
        toolCalls: [
          { name: "bash", arguments: args },
          { name: "final", arguments: { ok: true } },
        ],
      }));
      const { recorded } = await send(api, model);
      const reply = replyOf(api, recorded);
      expect(reply).toMatchObject({ piStopReason: "toolUse", complete: true });
      expect(reply.toolCalls.map((call) => [call.name, JSON.parse(call.argumentsJson)])).toEqual([
        ["bash", args],
        ["final", { ok: true }],
      ]);
    });

    it("replies without streaming when asked to", async () => {
      const model = `json-${api}`;
      server.setScript(model, () => ({ text: "not streamed" }));
      const { response, recorded } = await send(api, model, { stream: false });
      expect(response.headers.get("content-type")).toBe("application/json");
      expect(replyOf(api, recorded)).toMatchObject({ text: "not streamed", complete: true });
    });

    it("fails with the provider's own error body for an httpStatus step and an unknown model", async () => {
      const model = `down-${api}`;
      server.setScript(model, () => ({ httpStatus: 503, body: "scripted outage" }));
      const { response, text } = await send(api, model);
      expect(response.status).toBe(503);
      expect(text).toContain("scripted outage");
      const unknown = await send(api, `nobody-${api}`);
      expect(unknown.response.status).toBe(404);
      expect(unknown.text).toContain(`unknown scripted model nobody-${api}`);
    });

    it("hands function scripts the raw body, the turn and the neutral conversation", async () => {
      const model = `fn-${api}`;
      const seen: Array<{ turn: number; context: ScriptContext }> = [];
      server.setScript(model, (_body, turn, context) => {
        seen.push({ turn, context });
        return { text: "ok" };
      });
      await send(api, model);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.turn).toBe(2);
      expect(seen[0]!.context.api).toBe(api);
      const results = seen[0]!.context.conversation.messages.flatMap((m) =>
        m.parts.filter((p) => p.kind === "tool-result"),
      );
      expect(results).toHaveLength(2);
    });

    it("streams an endless step until the client goes away", async () => {
      const model = `endless-${api}`;
      server.setScript(model, () => ({ endless: true }));
      const controller = new AbortController();
      const fixture = captured(api);
      const body = { ...structuredClone(fixture.body), ...(api === "google-generative-ai" ? {} : { model }) };
      const path =
        api === "google-generative-ai" ? `/models/${model}:streamGenerateContent` : subpath(api, fixture.path);
      const response = await fetch(`${server.baseUrlFor(api)}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      let received = "";
      while (received.split("and on").length < 4) received += new TextDecoder().decode((await reader.read()).value);
      controller.abort();
      await reader.cancel().catch(() => {});
      expect(received).toContain("and on ");
    });
  });

  it("still serves openai-completions under any path ending in /chat/completions, and lists models", async () => {
    server.setScript("legacy", [{ text: "legacy path" }]);
    const origin = new URL(server.baseUrl).origin;
    const response = await fetch(`${origin}/some/prefix/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "legacy", stream: false, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(
      ((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content,
    ).toBe("legacy path");
    const models = (await (await fetch(`${server.baseUrl}/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toContain("legacy");
  });
});
