// openai-completions: POST <base>/chat/completions, model in the body, `stream: true`.
//
// Reply, as Pi 1.6.0 reads it (api/openai-completions.js over the openai SDK's Stream):
// - SSE; `data: [DONE]` ends it; an `event: error`, or a chunk with an `error` member, is an
//   error; other chunks are JSON (`thread.*` events carry no choices and change nothing).
// - Only choices[0] counts. All non-empty `delta.content` strings go into ONE text block,
//   however they interleave with tool calls. The first non-empty of `reasoning_content`,
//   `reasoning`, `reasoning_text` in a delta goes into ONE thinking block (kept: Pi may send it
//   back as text, see ModelReply.thinkingAsText).
// - `delta.tool_calls[]` find their call by `index` (else by `id`); the first non-empty id and
//   name stick; `function.arguments` pieces are concatenated.
// - `finish_reason` is required (Pi: "Stream ended without finish_reason"); stop/end -> stop,
//   length -> length, tool_calls/function_call -> toolUse, anything else -> error.

import { chatRefusal, parseChatRequest } from "./chat-request.js";
import { isRecord, type JsonRecord, parseSafely, stringOr } from "./codec-support.js";
import type { ApiCodec, PiStopReason, ReplyLimits, ReplyParser } from "./codec-types.js";
import { createReplyParser, parseEventJson, type ReplyAccumulator } from "./reply-support.js";

const API = "openai-completions";
/** The delta fields Pi reads reasoning from, in its order. */
const REASONING_FIELDS = ["reasoning_content", "reasoning", "reasoning_text"] as const;

export const openAiCompletionsCodec: ApiCodec = {
  api: API,
  parseRequest: (_pathname, body) => parseSafely(() => ({ ok: true, request: parseChatRequest(API, body) })),
  refusal: (_pathname, body, headers, policy) => chatRefusal(body, headers, policy),
  replyParser: (contentType, limits) => completionsReplyParser(contentType, limits),
};

function mapCompletionsStop(reason: string): { pi: PiStopReason; error?: string } {
  switch (reason) {
    case "stop":
    case "end":
      return { pi: "stop" };
    case "length":
      return { pi: "length" };
    case "function_call":
    case "tool_calls":
      return { pi: "toolUse" };
    default:
      return { pi: "error", error: `Provider finish_reason: ${reason}` };
  }
}

function completionsReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    let done = false;
    let textBlock: number | undefined;
    let thinkingBlock: number | undefined;
    const byIndex = new Map<number, number>();
    const byId = new Map<string, number>();
    // Custom (grammar) tool input is raw text; Pi keeps it as `{ input: text }`.
    const customInputs = new Map<number, string>();

    const finishReason = (reason: unknown) => {
      if (typeof reason !== "string" || reason === "") return;
      const mapped = mapCompletionsStop(reason);
      reply.stopReason = reason;
      reply.piStopReason = mapped.pi;
      if (mapped.error) reply.fail(mapped.error, false);
      reply.complete = true;
    };

    const onToolCallDelta = (raw: unknown) => {
      if (!isRecord(raw)) return;
      const fn = isRecord(raw.function) ? raw.function : undefined;
      const custom = isRecord(raw.custom) ? raw.custom : undefined;
      const index = typeof raw.index === "number" ? raw.index : undefined;
      const id = stringOr(raw.id);
      const name = stringOr(fn?.name ?? custom?.name);
      let call = index !== undefined ? byIndex.get(index) : undefined;
      if (call === undefined && id) call = byId.get(id);
      if (call === undefined) call = reply.openToolCall(id, name);
      if (index !== undefined && !byIndex.has(index)) byIndex.set(index, call);
      if (id) byId.set(id, call);
      const state = reply.toolCall(call);
      if (state && !state.id && id) reply.setToolId(call, id);
      if (state && !state.name && name) reply.setToolName(call, name);
      if (typeof fn?.arguments === "string" && fn.arguments) reply.appendArgs(call, fn.arguments);
      else if (!fn && typeof custom?.input === "string" && custom.input) {
        const input = (customInputs.get(call) ?? "") + custom.input;
        customInputs.set(call, input);
        reply.setArgs(call, JSON.stringify({ input }));
      }
    };

    const onChunk = (chunk: unknown) => {
      if (!isRecord(chunk)) return;
      const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
      if (!isRecord(choice)) return;
      finishReason(choice.finish_reason);
      const delta = choice.delta;
      if (!isRecord(delta)) return;
      // Pi: the first non-empty reasoning field of each delta goes into one thinking block, which
      // it sends back first as text with the requiresThinkingAsText compat flag.
      const reasoning = REASONING_FIELDS.map((field) => delta[field]).find(
        (value): value is string => typeof value === "string" && value.length > 0,
      );
      if (reasoning !== undefined) {
        thinkingBlock ??= reply.openThinking(0);
        reply.appendThinking(thinkingBlock, reasoning);
      }
      if (typeof delta.content === "string" && delta.content.length > 0) {
        textBlock ??= reply.openText();
        reply.appendText(textBlock, delta.content);
      }
      if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) onToolCallDelta(call);
    };

    return {
      onEvent(event) {
        if (done) return;
        if (event.data === "[DONE]") {
          done = true;
          return;
        }
        const data = parseEventJson(event.data, "chunk");
        if (event.event?.startsWith("thread.")) return;
        if (event.event === "error") throw new Error(errorText(isRecord(data) ? (data.error ?? data) : data));
        if (isRecord(data) && data.error) throw new Error(errorText(data.error));
        onChunk(data);
      },
      onJson(value) {
        if (isRecord(value) && value.error) throw new Error(errorText(value.error));
        onCompletion(reply, value);
      },
      finish: () => reply.finish(),
    };
  });
}

/** A non-streamed chat.completion (Pi always streams; a proxy may not). */
function onCompletion(reply: ReplyAccumulator, value: unknown): void {
  const choice = isRecord(value) && Array.isArray(value.choices) ? value.choices[0] : undefined;
  if (!isRecord(choice)) return;
  const message: JsonRecord = isRecord(choice.message) ? choice.message : {};
  if (typeof message.content === "string" && message.content.length > 0) reply.openText(message.content);
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      if (!isRecord(call)) continue;
      const fn = isRecord(call.function) ? call.function : {};
      reply.openToolCall(stringOr(call.id), stringOr(fn.name), stringOr(fn.arguments));
    }
  }
  if (typeof choice.finish_reason === "string") {
    const mapped = mapCompletionsStop(choice.finish_reason);
    reply.stopReason = choice.finish_reason;
    reply.piStopReason = mapped.pi;
    if (mapped.error) reply.fail(mapped.error, false);
    reply.complete = true;
  }
}

export function errorText(error: unknown): string {
  if (typeof error === "string") return error;
  if (isRecord(error) && typeof error.message === "string") return error.message;
  return JSON.stringify(error) ?? "unknown error";
}
