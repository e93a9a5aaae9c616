// Request parsing on requests Pi 1.6.0 really sent (tests/fixtures/pi-requests/*.json: the
// third request of a bash, bash (exit 3), final-tool run, captured from Pi against the scripted
// model server), and on hand-made variants of them.
import { describe, expect, it } from "vitest";
import { codecFor, type ModelRequest } from "../../src/gateway/apis/api-codec.js";
import { SCRIPTED_APIS } from "../../src/scripted-model/script.js";
import { captured, subpath } from "../support/api-codec-fixtures.js";

function parsed(api: string, body: unknown = captured(api).body): ModelRequest {
  const result = codecFor(api)!.parseRequest(subpath(api, captured(api).path), body);
  if (!result.ok) throw new Error(result.reason);
  return result.request;
}

describe.each(SCRIPTED_APIS.map((api) => [api]))("%s requests Pi sent", (api) => {
  it("read into the same neutral conversation, whatever the wire format", () => {
    const request = parsed(api);
    expect(request.api).toBe(api);
    expect(request.model).toBe(`m-${api}`);
    expect(request.stream).toBe(true);
    expect(request.system).toContain("You are a coding assistant running inside pi");
    expect(request.system).toContain("Call the final tool when done.");
    expect(request.tools.map((tool) => tool.name)).toEqual(["bash", "sandbox_run_final_result"]);
    expect(request.tools[1]!.parameters).toMatchObject({ type: "object", required: ["verdict"] });
    // Ids are left out: they differ per API (and Google's are made up per run).
    const shape = request.messages.map((message) => ({
      role: message.role,
      parts: message.parts.map((part) => {
        if (part.kind === "tool-call") return { call: part.name, arguments: part.arguments };
        if (part.kind === "tool-result") return { result: part.text, ...(part.isError ? { isError: true } : {}) };
        return part;
      }),
    }));
    // Mistral trims tool output and marks errors in the text; Anthropic and Google flag them.
    const hello = api === "mistral-conversations" ? "hello" : "hello\n";
    const oops = `${api === "mistral-conversations" ? "[tool error] " : ""}oops\n\n\nCommand exited with code 3`;
    const flagged = api === "anthropic-messages" || api === "google-generative-ai";
    expect(shape).toEqual([
      { role: "user", parts: [{ kind: "text", text: "Check the workspace, then report." }] },
      { role: "assistant", parts: [{ call: "bash", arguments: { command: "echo hello" } }] },
      { role: "tool", parts: [{ result: hello }] },
      { role: "assistant", parts: [{ call: "bash", arguments: { command: "echo oops; exit 3" } }] },
      { role: "tool", parts: [{ result: oops, ...(flagged ? { isError: true } : {}) }] },
    ]);
  });

  it("links each tool result to its call where the wire format has ids", () => {
    const request = parsed(api);
    const calls = request.messages.flatMap((m) => m.parts.flatMap((p) => (p.kind === "tool-call" ? [p.id] : [])));
    const results = request.messages.flatMap((m) =>
      m.parts.flatMap((p) => (p.kind === "tool-result" ? [p.callId] : [])),
    );
    expect(results).toEqual(api === "google-generative-ai" ? ["", ""] : calls);
  });

  it("is not refused when it names the run's model", () => {
    const { path, headers, body } = captured(api);
    expect(codecFor(api)!.refusal(subpath(api, path), body, headers, { model: `m-${api}` })).toBeUndefined();
  });

  it("is refused when it names another model", () => {
    const { path, headers, body } = captured(api);
    const reason = codecFor(api)!.refusal(subpath(api, path), body, headers, { model: "the-runs-model" });
    expect(reason).toMatch(/asks for model "m-.*" \(.*\); this run uses "the-runs-model"$/);
  });

  it("says why a body is unreadable instead of throwing", () => {
    const codec = codecFor(api)!;
    const path = subpath(api, captured(api).path);
    expect(codec.parseRequest(path, "not an object")).toEqual({ ok: false, reason: expect.any(String) });
    expect(codec.parseRequest(path, null).ok).toBe(false);
    expect(codec.refusal(path, [1, 2], {}, { model: `m-${api}` })).toBe("the request body is not a JSON object");
  });
});

describe("request details", () => {
  it("hashes images by their decoded bytes, so the same picture matches across APIs", () => {
    const png = Buffer.from("fake png bytes").toString("base64");
    const completions = parsed("openai-completions", {
      model: "m",
      messages: [
        { role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }] },
      ],
    });
    const anthropic = parsed("anthropic-messages", {
      model: "m",
      messages: [
        { role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: png } }] },
      ],
    });
    expect(completions.messages[0]!.parts).toEqual(anthropic.messages[0]!.parts);
    expect(completions.messages[0]!.parts[0]).toMatchObject({
      kind: "image",
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it("keeps a tool call's arguments raw when they are not JSON", () => {
    const request = parsed("openai-completions", {
      model: "m",
      messages: [
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c", type: "function", function: { name: "bash", arguments: "{broken" } }],
        },
      ],
    });
    expect(request.messages[0]!.parts[0]).toEqual({ kind: "tool-call", id: "c", name: "bash", arguments: "{broken" });
  });

  it("reads Google's model from the path and tells streaming from not", () => {
    const body = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
    const result = codecFor("google-generative-ai")!.parseRequest("/models/gemini-x:generateContent", body);
    expect(result).toMatchObject({ ok: true, request: { model: "gemini-x", stream: false } });
  });

  it("refuses to read content kinds Pi never sends", () => {
    const result = codecFor("openai-completions")!.parseRequest("/chat/completions", {
      model: "m",
      messages: [{ role: "user", content: [{ type: "file", file: { file_id: "f" } }] }],
    });
    expect(result).toEqual({ ok: false, reason: "messages[0].content[0] has an unsupported type" });
  });

  it("says a request is nested too deeply instead of overflowing the stack", () => {
    const deep = JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`);
    const body = {
      contents: [{ role: "user", parts: [{ functionResponse: { name: "bash", response: { output: deep } } }] }],
    };
    expect(codecFor("google-generative-ai")!.parseRequest("/models/m:streamGenerateContent", body)).toEqual({
      ok: false,
      reason: "the request is nested too deeply to read",
    });
  });
});
