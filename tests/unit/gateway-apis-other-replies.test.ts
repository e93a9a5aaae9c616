// Reply parsing for anthropic-messages, google-generative-ai and mistral-conversations, on
// streams shaped like those providers' (and like the ones Pi 1.6.0 parses), cut into pieces.
import { describe, expect, it } from "vitest";
import { deriveMistralToolCallId } from "../../src/gateway/apis/mistral-conversations.js";
import { replyFrom, sse, stableReply } from "../support/api-codec-fixtures.js";

const a = (type: string, fields: object = {}): [string, unknown] => [type, { type, ...fields }];

describe("anthropic-messages replies", () => {
  const API = "anthropic-messages";
  const start = a("message_start", {
    message: { id: "msg_1", model: "m", content: [], usage: { input_tokens: 1, output_tokens: 1 } },
  });
  const stop = (reason: string, details?: object) => [
    a("message_delta", { delta: { stop_reason: reason, stop_details: details }, usage: { output_tokens: 5 } }),
    a("message_stop"),
  ];

  it("reads text and tool_use blocks; arguments are the input_json_delta pieces", () => {
    const body = sse([
      start,
      a("ping"),
      a("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "" } }),
      a("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: "hmm" } }),
      a("content_block_stop", { index: 0 }),
      a("content_block_start", { index: 1, content_block: { type: "text", text: "I'll " } }),
      a("content_block_delta", { index: 1, delta: { type: "text_delta", text: "look." } }),
      a("content_block_stop", { index: 1 }),
      // Pi ignores `input` of content_block_start when the call streams.
      a("content_block_start", {
        index: 2,
        content_block: { type: "tool_use", id: "toolu_1", name: "bash", input: { ignored: true } },
      }),
      a("content_block_delta", { index: 2, delta: { type: "input_json_delta", partial_json: "" } }),
      a("content_block_delta", { index: 2, delta: { type: "input_json_delta", partial_json: '{"command":' } }),
      a("content_block_delta", { index: 2, delta: { type: "input_json_delta", partial_json: '"ls"}' } }),
      a("content_block_stop", { index: 2 }),
      a("content_block_start", { index: 3, content_block: { type: "text", text: "" } }),
      a("content_block_stop", { index: 3 }),
      ...stop("tool_use"),
    ]);
    expect(stableReply(API, body)).toEqual({
      text: "I'll look.\n",
      textBlocks: ["I'll look.", ""],
      toolCalls: [{ id: "toolu_1", name: "bash", argumentsJson: '{"command":"ls"}' }],
      // No signature: Pi sends it back as a text block before "I'll look." (conversation-ledger.ts).
      thinkingAsText: [{ text: "hmm", at: 0 }],
      stopReason: "tool_use",
      piStopReason: "toolUse",
      complete: true,
    });
  });

  it("skips events Pi skips (unknown names), reads data with Pi's JSON repair", () => {
    const repaired =
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\tb"}}\n\n';
    const body = `${sse([start, ["mystery", { type: "content_block_start", index: 0, content_block: { type: "text", text: "no" } }]])}${sse(
      [a("content_block_start", { index: 0, content_block: { type: "text", text: "" } })],
    )}${repaired}${sse(stop("end_turn"))}`;
    expect(stableReply(API, body)).toMatchObject({ text: "a\tb", piStopReason: "stop", complete: true });
  });

  it("fails on `event: error`, on a stream without message_stop, and without a stop reason", () => {
    expect(
      stableReply(API, sse([start, a("error", { error: { type: "overloaded_error", message: "Overloaded" } })])),
    ).toMatchObject({
      complete: false,
      error: expect.stringContaining("Overloaded"),
    });
    expect(stableReply(API, sse([start, stop("end_turn")[0]]))).toMatchObject({
      complete: false,
      error: expect.stringContaining("message_stop"),
    });
    expect(stableReply(API, sse([start, a("message_stop")]))).toMatchObject({
      complete: false,
      error: expect.stringContaining("stop reason"),
    });
  });

  it("maps stop reasons like Pi, including refusals and ones Pi does not know", () => {
    expect(stableReply(API, sse([start, ...stop("max_tokens")])).piStopReason).toBe("length");
    expect(stableReply(API, sse([start, ...stop("refusal", { explanation: "no." })]))).toMatchObject({
      piStopReason: "error",
      error: "no.",
    });
    expect(stableReply(API, sse([start, ...stop("brand_new")]))).toMatchObject({
      complete: false,
      error: "Unhandled stop reason: brand_new",
    });
  });

  it("reads a non-streamed message", () => {
    const json = {
      type: "message",
      content: [
        { type: "text", text: "ok" },
        { type: "tool_use", id: "t", name: "bash", input: { a: 1 } },
      ],
      stop_reason: "tool_use",
    };
    expect(stableReply(API, JSON.stringify(json), "application/json")).toMatchObject({
      text: "ok",
      toolCalls: [{ id: "t", name: "bash", argumentsJson: '{"a":1}' }],
      complete: true,
    });
  });
});

describe("google-generative-ai replies", () => {
  const API = "google-generative-ai";
  const g = (parts: unknown[], finishReason?: string) => ({
    candidates: [{ content: { role: "model", parts }, ...(finishReason ? { finishReason } : {}) }],
  });

  it("joins text parts across chunks into one block until a thought or a call; calls without an id get Pi's made-up one", () => {
    const body = sse(
      [
        g([{ text: "Hello " }]),
        g([{ text: "world" }, { text: "thinking...", thought: true }, { text: "after thought" }]),
        g([{ functionCall: { name: "bash", args: { command: "ls" } } }, { text: "tail" }]),
        g(
          [
            { functionCall: { name: "final", args: {}, id: "call-7" } },
            { functionCall: { name: "final", args: {}, id: "call-7" } },
          ],
          "STOP",
        ),
      ],
      "\r\n",
    );
    expect(stableReply(API, body)).toEqual({
      text: "Hello world\nafter thought\ntail",
      textBlocks: ["Hello world", "after thought", "tail"],
      toolCalls: [
        { id: "", name: "bash", argumentsJson: '{"command":"ls"}' },
        { id: "call-7", name: "final", argumentsJson: "{}" },
        { id: "", name: "final", argumentsJson: "{}" },
      ],
      stopReason: "STOP",
      piStopReason: "toolUse",
      complete: true,
    });
  });

  it("maps finish reasons like Pi and needs one", () => {
    expect(stableReply(API, sse([g([{ text: "x" }], "MAX_TOKENS")])).piStopReason).toBe("length");
    expect(stableReply(API, sse([g([{ text: "x" }], "SAFETY")]))).toMatchObject({
      piStopReason: "error",
      error: "Provider stopped with: SAFETY",
    });
    expect(stableReply(API, sse([g([{ text: "x" }])]))).toMatchObject({
      complete: false,
      error: expect.stringContaining("finish reason"),
    });
    expect(stableReply(API, sse([g([], "NEW_REASON")])).error).toBe("Unhandled stop reason: NEW_REASON");
  });

  it("fails, without throwing, on call arguments nested too deeply to write out (Pi fails there too)", () => {
    const deep = `${"[".repeat(200_000)}${"]".repeat(200_000)}`;
    const body = `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"bash","args":${deep}}}]},"finishReason":"STOP"}]}\n\n`;
    expect(replyFrom(API, body)).toMatchObject({ complete: false, error: expect.stringContaining("call stack") });
  });

  it("fails on an error chunk the SDK fails on", () => {
    const body = sse([g([{ text: "x" }]), { error: { code: 429, message: "quota", status: "RESOURCE_EXHAUSTED" } }]);
    expect(stableReply(API, body)).toMatchObject({
      complete: false,
      error: expect.stringContaining("RESOURCE_EXHAUSTED"),
    });
  });

  it("reads a JSON array of chunks (no alt=sse) and a single JSON response", () => {
    const array = JSON.stringify([g([{ text: "a" }]), g([{ text: "b" }], "STOP")]);
    expect(stableReply(API, array, "application/json")).toMatchObject({ text: "ab", complete: true });
    expect(stableReply(API, JSON.stringify(g([{ text: "one" }], "STOP")), "application/json").text).toBe("one");
  });
});

describe("mistral-conversations replies", () => {
  const API = "mistral-conversations";
  const m = (delta: unknown, finish: string | null = null) => ({
    id: "c",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });

  it("keeps text runs, skips empty text, splits at thinking and tool calls, removes lone surrogates", () => {
    const body = sse([
      m({ role: "assistant", content: "" }),
      m({ content: "Hi " }),
      m({ content: [{ type: "text", text: "there\uD800" }] }),
      m({ content: [{ type: "thinking", thinking: [{ type: "text", text: "hmm" }] }] }),
      m({ content: "after" }),
      m({
        content: "",
        tool_calls: [{ id: "abcdefghi", index: 0, function: { name: "bash", arguments: '{"command":"ls"}' } }],
      }),
      m({ content: "tail" }, "tool_calls"),
      "  [DONE]",
    ]);
    expect(stableReply(API, body)).toEqual({
      text: "Hi there\nafter\ntail",
      textBlocks: ["Hi there", "after", "tail"],
      toolCalls: [{ id: "abcdefghi", name: "bash", argumentsJson: '{"command":"ls"}' }],
      stopReason: "tool_calls",
      piStopReason: "toolUse",
      complete: true,
    });
  });

  it("derives ids the way Pi does for calls without one, and stringifies object arguments", () => {
    const body = sse([
      m({ tool_calls: [{ id: "null", index: 0, function: { name: "a", arguments: { x: 1 } } }] }),
      m({ tool_calls: [{ index: 10, function: { name: "b", arguments: "{}" } }] }),
      m({}, "tool_calls"),
    ]);
    const reply = stableReply(API, body);
    expect(reply.toolCalls).toEqual([
      { id: "toolcall0", name: "a", argumentsJson: '{"x":1}' },
      { id: deriveMistralToolCallId("toolcall:10"), name: "b", argumentsJson: "{}" },
    ]);
    expect(reply.toolCalls[1]!.id).toMatch(/^[a-z0-9]{9}$/);
  });

  it("fails where Pi fails: an event without choices, a choice without delta", () => {
    expect(stableReply(API, sse([{ object: "error", message: "bad" }]))).toMatchObject({
      error: "Invalid Mistral streaming event",
      complete: false,
    });
    expect(stableReply(API, sse([{ choices: [{ index: 0, finish_reason: "stop" }] }])).complete).toBe(false);
  });

  it("maps finish reasons like Pi", () => {
    expect(stableReply(API, sse([m({ content: "x" }, "model_length")])).piStopReason).toBe("length");
    expect(stableReply(API, sse([m({ content: "x" }, "error")]))).toMatchObject({
      piStopReason: "error",
      error: expect.stringContaining("server error"),
    });
    expect(replyFrom(API, sse([m({ content: "x" })])).complete).toBe(false);
  });
});
