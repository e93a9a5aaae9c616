// mistral-conversations: POST <base>/v1/chat/completions (Pi's own fetch, not an SDK), model in
// the body, `stream: true`, OpenAI-style chat messages (see chat-request.ts).
//
// Reply, as Pi 1.6.0 reads it (api/mistral-conversations.js, readMistralEvents/consumeChatStream):
// - SSE whose `data:` lines are joined and trimmed; `[DONE]` ends it; every other event must be
//   a JSON object with a `choices` array, or the reply fails.
// - Only choices[0] counts and it must carry a `delta`. Text arrives as a string or as content
//   items (`text`, `thinking`); empty text is skipped; consecutive text goes into one block, a
//   thinking item or a tool call ends it. Text has unpaired surrogates removed.
// - Tool calls are keyed by `index` (else id); an id that is missing or "null" is derived
//   from the index the way Pi does; `function.arguments` is text or an object (stringified).
// - `finish_reason` is required: stop -> stop, length/model_length -> length,
//   tool_calls -> toolUse, anything else -> error.

import { chatRefusal, parseChatRequest } from "./chat-request.js";
import { isRecord, type JsonRecord, parseSafely, stringOr } from "./codec-support.js";
import type { ApiCodec, PiStopReason, ReplyLimits, ReplyParser } from "./codec-types.js";
import { createReplyParser, type ReplyAccumulator, sanitizeSurrogates } from "./reply-support.js";

const API = "mistral-conversations";

export const mistralConversationsCodec: ApiCodec = {
  api: API,
  parseRequest: (_pathname, body) => parseSafely(() => ({ ok: true, request: parseChatRequest(API, body) })),
  refusal: (_pathname, body, headers, policy) => chatRefusal(body, headers, policy),
  replyParser: (contentType, limits) => mistralReplyParser(contentType, limits),
};

function mapMistralStop(reason: string): { pi: PiStopReason; error?: string } {
  switch (reason) {
    case "stop":
      return { pi: "stop" };
    case "length":
    case "model_length":
      return { pi: "length" };
    case "tool_calls":
      return { pi: "toolUse" };
    case "error":
      return { pi: "error", error: "Provider stopped with: error (server error)" };
    default:
      return { pi: "error", error: `Provider stopped with: ${reason}` };
  }
}

/** Pi's `shortHash` (utils/hash.js). */
function piShortHash(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 >>> 0).toString(36) + (h1 >>> 0).toString(36);
}

/** Pi's `deriveMistralToolCallId(id, 0)`: the id Pi gives a call the model sent without one. */
export function deriveMistralToolCallId(id: string): string {
  const normalized = id.replace(/[^a-zA-Z0-9]/g, "");
  if (normalized.length === 9) return normalized;
  return piShortHash(normalized || id)
    .replace(/[^a-zA-Z0-9]/g, "")
    .slice(0, 9);
}

function mistralReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    let done = false;
    const state: ChunkState = { text: undefined, calls: new Map() };
    return {
      onEvent(event) {
        if (done) return;
        const data = event.data.trim();
        if (!data) return;
        if (data === "[DONE]") {
          done = true;
          return;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          throw new Error("malformed Mistral event JSON in the event stream");
        }
        if (!isRecord(parsed) || !Array.isArray(parsed.choices)) throw new Error("Invalid Mistral streaming event");
        onChunk(reply, state, parsed);
      },
      onJson(value) {
        // A non-streamed completion has `message` where the stream has `delta`.
        if (!isRecord(value) || !Array.isArray(value.choices)) throw new Error("Invalid Mistral response");
        const choices = value.choices.map((c) => (isRecord(c) ? { ...c, delta: c.message ?? {} } : c));
        onChunk(reply, state, { ...value, choices });
      },
      finish: () => reply.finish(),
    };
  });
}

interface ChunkState {
  /** The open text block, until a thinking item or tool call ends it. */
  text: number | undefined;
  calls: Map<number | string, number>;
}

function onChunk(reply: ReplyAccumulator, state: ChunkState, chunk: JsonRecord): void {
  const choice = (chunk.choices as unknown[])[0];
  if (choice === undefined) return;
  if (!isRecord(choice)) throw new Error("Invalid Mistral streaming event");
  if (typeof choice.finish_reason === "string" && choice.finish_reason) {
    const mapped = mapMistralStop(choice.finish_reason);
    reply.stopReason = choice.finish_reason;
    reply.piStopReason = mapped.pi;
    if (mapped.error) reply.fail(mapped.error, false);
    reply.complete = true;
  }
  const delta = choice.delta;
  if (!isRecord(delta)) throw new Error("a Mistral chunk has no delta");
  if (delta.content !== null && delta.content !== undefined) {
    const items =
      typeof delta.content === "string" ? [delta.content] : Array.isArray(delta.content) ? delta.content : [];
    for (const item of items) onContentItem(reply, state, item);
  }
  for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
    state.text = undefined;
    if (!isRecord(call) || !isRecord(call.function)) throw new Error("a Mistral tool call has no function");
    const index = typeof call.index === "number" ? call.index : undefined;
    const id =
      typeof call.id === "string" && call.id && call.id !== "null"
        ? call.id
        : deriveMistralToolCallId(`toolcall:${index ?? 0}`);
    const key = index ?? id;
    let handle = state.calls.get(key);
    if (handle === undefined) {
      handle = reply.openToolCall(id, stringOr(call.function.name));
      state.calls.set(key, handle);
    }
    const args = call.function.arguments;
    reply.appendArgs(handle, typeof args === "string" ? args : JSON.stringify(args || {}));
  }
}

function onContentItem(reply: ReplyAccumulator, state: ChunkState, item: unknown): void {
  let text: string | undefined;
  if (typeof item === "string") text = item;
  else if (isRecord(item) && item.type === "text") text = stringOr(item.text);
  else if (isRecord(item) && item.type === "thinking") {
    const thinking = Array.isArray(item.thinking) ? item.thinking : [];
    const pieces = thinking.map((part) => (isRecord(part) ? stringOr(part.text) : ""));
    if (sanitizeSurrogates(pieces.join(""))) state.text = undefined;
    return;
  }
  if (text === undefined) return;
  const clean = sanitizeSurrogates(text);
  if (!clean) return;
  state.text ??= reply.openText();
  reply.appendText(state.text, clean);
}
