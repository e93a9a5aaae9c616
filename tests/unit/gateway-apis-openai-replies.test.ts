// Reply parsing for openai-completions and openai-responses, on streams shaped like OpenAI's
// (and like the ones Pi 1.6.0 parses), cut into awkward pieces.
import { describe, expect, it } from "vitest";
import { replyFrom, sse, stableReply } from "../support/api-codec-fixtures.js";

const chunk = (delta: object, finish: string | null = null) => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  model: "m",
  choices: [{ index: 0, delta, finish_reason: finish }],
});

describe("openai-completions replies", () => {
  const API = "openai-completions";

  it("reads a text reply", () => {
    const body = sse([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hello, " }),
      chunk({ content: "wörld 😀" }),
      chunk({}, "stop"),
      { id: "chatcmpl-1", choices: [], usage: { prompt_tokens: 1 } },
      "[DONE]",
    ]);
    expect(stableReply(API, body)).toEqual({
      text: "Hello, wörld 😀",
      textBlocks: ["Hello, wörld 😀"],
      toolCalls: [],
      stopReason: "stop",
      piStopReason: "stop",
      complete: true,
    });
  });

  it("assembles tool calls by index; the first id and name stick; argument pieces are joined", () => {
    const body = sse([
      chunk({
        tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "bash", arguments: '{"comm' } }],
      }),
      chunk({
        tool_calls: [{ index: 1, id: "call_b", function: { name: "sandbox_run_final_result", arguments: "" } }],
      }),
      chunk({ tool_calls: [{ index: 0, id: "call_other", function: { name: "read", arguments: 'and":"ls"}' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"verdict":"ok"}' } }] }),
      chunk({}, "tool_calls"),
      "[DONE]",
    ]);
    const reply = stableReply(API, body);
    expect(reply.toolCalls).toEqual([
      { id: "call_a", name: "bash", argumentsJson: '{"command":"ls"}' },
      { id: "call_b", name: "sandbox_run_final_result", argumentsJson: '{"verdict":"ok"}' },
    ]);
    expect(reply.piStopReason).toBe("toolUse");
  });

  it("puts all text in one block however it interleaves with tool calls, as Pi does", () => {
    const body = sse([
      chunk({ content: "Let me look." }),
      chunk({ tool_calls: [{ index: 0, id: "c1", function: { name: "bash", arguments: "{}" } }] }),
      chunk({ content: " Then report." }),
      chunk({}, "tool_calls"),
      "[DONE]",
    ]);
    expect(stableReply(API, body).textBlocks).toEqual(["Let me look. Then report."]);
  });

  it("finds a call without an index by its id", () => {
    const body = sse([
      chunk({ tool_calls: [{ id: "c9", function: { name: "bash", arguments: '{"a":' } }] }),
      chunk({ tool_calls: [{ id: "c9", function: { arguments: "1}" } }] }),
      chunk({}, "tool_calls"),
    ]);
    expect(stableReply(API, body).toolCalls).toEqual([{ id: "c9", name: "bash", argumentsJson: '{"a":1}' }]);
  });

  it("is incomplete without a finish reason, and says nothing is wrong with [DONE] missing", () => {
    expect(stableReply(API, sse([chunk({ content: "cut" })])).complete).toBe(false);
    expect(stableReply(API, sse([chunk({ content: "ok" }), chunk({}, "stop")])).complete).toBe(true);
  });

  it("reports an error chunk inside a 2xx stream and stops reading", () => {
    const body = sse([
      chunk({ content: "partial" }),
      { error: { message: "upstream overloaded", type: "server_error" } },
      chunk({ content: " more" }),
      chunk({}, "stop"),
    ]);
    const reply = stableReply(API, body);
    expect(reply).toMatchObject({ error: "upstream overloaded", complete: false, text: "partial" });
  });

  it("reports an `event: error`", () => {
    const reply = stableReply(API, sse([["error", { error: { message: "boom" } }]]));
    expect(reply).toMatchObject({ error: "boom", complete: false });
  });

  it("maps content_filter to Pi's error stop, with Pi's message", () => {
    const reply = stableReply(API, sse([chunk({ content: "x" }), chunk({}, "content_filter"), "[DONE]"]));
    expect(reply).toMatchObject({
      stopReason: "content_filter",
      piStopReason: "error",
      error: "Provider finish_reason: content_filter",
    });
  });

  it("fails on malformed event JSON like the SDK does", () => {
    expect(stableReply(API, "data: {not json\n\n").error).toMatch(/malformed/);
  });

  it("ignores everything after [DONE]", () => {
    const body = sse([chunk({ content: "a" }), chunk({}, "stop"), "[DONE]", chunk({ content: "forged" })]);
    expect(stableReply(API, body).text).toBe("a");
  });

  it("reads a non-streamed chat.completion", () => {
    const completion = {
      choices: [
        {
          message: {
            content: "hi",
            tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } }],
          },
          finish_reason: "tool_calls",
        },
      ],
    };
    const reply = stableReply(API, JSON.stringify(completion), "application/json");
    expect(reply).toMatchObject({
      text: "hi",
      toolCalls: [{ id: "c1", name: "bash", argumentsJson: '{"command":"ls"}' }],
      complete: true,
    });
  });

  it("tells SSE from JSON by the first byte when the content type says neither", () => {
    expect(replyFrom(API, sse([chunk({ content: "s" }), chunk({}, "stop")]), { contentType: undefined }).text).toBe(
      "s",
    );
    expect(
      replyFrom(API, ' {"choices":[{"message":{"content":"j"},"finish_reason":"stop"}]}', { contentType: undefined })
        .text,
    ).toBe("j");
  });

  it("stops at its content cap", () => {
    const body = sse([chunk({ content: "x".repeat(50) }), chunk({ content: "y".repeat(60) }), chunk({}, "stop")]);
    const reply = replyFrom(API, body, { limits: { maxContentChars: 100 } });
    expect(reply.complete).toBe(false);
    expect(reply.truncated).toBe(true);
    expect(reply.truncation).toMatch(/exceeded 100 characters/);
    expect(reply.text).toBe("x".repeat(50));
  });

  it("stops at its event cap and its JSON cap", () => {
    expect(
      replyFrom(API, sse([chunk({ content: "z".repeat(500) })]), { limits: { maxEventBytes: 200 } }).truncation,
    ).toMatch(/exceeded 200 bytes/);
    const json = JSON.stringify({ choices: [{ message: { content: "z".repeat(500) }, finish_reason: "stop" }] });
    expect(replyFrom(API, json, { contentType: "application/json", limits: { maxJsonBytes: 100 } })).toMatchObject({
      complete: false,
      truncated: true,
      truncation: expect.stringMatching(/JSON reply exceeded 100 bytes/),
    });
  });
});

const event = (type: string, fields: object): [string, unknown] => [type, { type, ...fields }];
const message = (id: string, text: string) => ({
  id,
  type: "message",
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text, annotations: [] }],
});
const call = (n: number, args: string) => ({
  id: `fc_${n}`,
  type: "function_call",
  status: "completed",
  call_id: `call_${n}`,
  name: "bash",
  arguments: args,
});

describe("openai-responses replies", () => {
  const API = "openai-responses";

  it("makes one text block per message item and takes the text of output_item.done", () => {
    const body = sse([
      event("response.created", { response: { id: "r1", status: "in_progress" } }),
      event("response.output_item.added", { output_index: 0, item: { ...message("m1", ""), content: [] } }),
      event("response.output_text.delta", { output_index: 0, delta: "draft" }),
      event("response.output_item.done", { output_index: 0, item: message("m1", "First.") }),
      event("response.output_item.added", { output_index: 1, item: { ...message("m2", ""), content: [] } }),
      event("response.refusal.delta", { output_index: 1, delta: "Second " }),
      event("response.output_text.delta", { output_index: 1, delta: "stream." }),
      event("response.completed", { response: { id: "r1", status: "completed" } }),
    ]);
    expect(stableReply(API, body)).toEqual({
      text: "First.\nSecond stream.",
      textBlocks: ["First.", "Second stream."],
      toolCalls: [],
      stopReason: "completed",
      piStopReason: "stop",
      complete: true,
    });
  });

  it("names calls call_id|item_id and keeps the last full arguments text", () => {
    const body = sse([
      event("response.output_item.added", { output_index: 0, item: { ...call(1, ""), status: "in_progress" } }),
      event("response.function_call_arguments.delta", { output_index: 0, delta: '{"command":' }),
      event("response.function_call_arguments.delta", { output_index: 0, delta: '"ls"}' }),
      event("response.function_call_arguments.done", { output_index: 0, arguments: '{"command":"ls -a"}' }),
      event("response.output_item.done", { output_index: 0, item: call(1, '{"command":"ls -la"}') }),
      event("response.completed", { response: { status: "completed" } }),
    ]);
    const reply = stableReply(API, body);
    expect(reply.toolCalls).toEqual([{ id: "call_1|fc_1", name: "bash", argumentsJson: '{"command":"ls -la"}' }]);
    expect(reply.piStopReason).toBe("toolUse");
  });

  it("maps incomplete replies like Pi", () => {
    const done = (details: object) =>
      sse([event("response.incomplete", { response: { status: "incomplete", incomplete_details: details } })]);
    expect(stableReply(API, done({ reason: "max_output_tokens" }))).toMatchObject({
      stopReason: "incomplete.max_output_tokens",
      piStopReason: "length",
      complete: true,
    });
    expect(stableReply(API, done({ reason: "content_filter" }))).toMatchObject({
      piStopReason: "error",
      error: "Response incomplete: content_filter",
    });
  });

  it("fails on response.failed, an error event, and a stream without a terminal event", () => {
    const failed = sse([
      event("response.failed", { response: { status: "failed", error: { code: "server_error", message: "oops" } } }),
    ]);
    expect(stableReply(API, failed)).toMatchObject({ error: "server_error: oops", complete: false });
    expect(stableReply(API, sse([event("error", { code: "rate_limit", message: "slow down" })])).error).toBeDefined();
    const open = sse([event("response.output_item.added", { output_index: 0, item: message("m", "") })]);
    expect(stableReply(API, open)).toMatchObject({ complete: false, error: expect.stringContaining("terminal") });
  });

  it("refuses a completed tool-use reply whose call never finished", () => {
    const body = sse([
      event("response.output_item.added", { output_index: 0, item: { ...call(1, ""), status: "in_progress" } }),
      event("response.function_call_arguments.delta", { output_index: 0, delta: '{"comm' }),
      event("response.completed", { response: { status: "completed" } }),
    ]);
    expect(stableReply(API, body)).toMatchObject({
      complete: false,
      error: expect.stringContaining("unfinished tool call"),
    });
  });

  it("reads a non-streamed response object", () => {
    const response = { id: "r", status: "completed", output: [message("m", "Done."), call(2, '{"command":"x"}')] };
    expect(stableReply(API, JSON.stringify(response), "application/json")).toMatchObject({
      text: "Done.",
      toolCalls: [{ id: "call_2|fc_2", name: "bash", argumentsJson: '{"command":"x"}' }],
      piStopReason: "toolUse",
      complete: true,
    });
  });
});
