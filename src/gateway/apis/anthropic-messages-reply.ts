// anthropic-messages replies, as Pi 1.6.0 reads them (api/anthropic-messages.js,
// iterateAnthropicEvents and the stream loop): only SSE events named message_start,
// message_delta, message_stop, content_block_start/_delta/_stop count (ping is skipped);
// `event: error` fails; data is parsed with Pi's JSON repair. Each text or tool_use content
// block is one block; a tool call's arguments are its input_json_delta pieces (Pi ignores
// content_block_start's `input` when streaming). A thinking block is kept with whether its
// signature is blank: Pi sends unsigned thinking back as a text block in its place (redacted
// thinking never). A stop reason is required, and once message_start was seen, message_stop too.
import { parseJsonWithRepair } from "../../pi/tool-arguments.js";
import { isRecord, type JsonRecord, stringOr } from "./codec-support.js";
import type { PiStopReason, ReplyLimits, ReplyParser } from "./codec-types.js";
import { createReplyParser, type ReplyAccumulator } from "./reply-support.js";

const MESSAGE_EVENTS = new Set([
  "message_start",
  "message_delta",
  "message_stop",
  "content_block_start",
  "content_block_delta",
  "content_block_stop",
]);

function mapAnthropicStop(reason: string, details?: unknown): { pi: PiStopReason; error?: string } {
  switch (reason) {
    case "end_turn":
    case "pause_turn":
    case "stop_sequence":
      return { pi: "stop" };
    case "max_tokens":
      return { pi: "length" };
    case "tool_use":
      return { pi: "toolUse" };
    case "refusal":
      return {
        pi: "error",
        error: (isRecord(details) && stringOr(details.explanation)) || "The model refused to complete the request",
      };
    case "sensitive":
      return { pi: "error", error: "Provider stopped with: sensitive" };
    default:
      throw new Error(`Unhandled stop reason: ${reason}`);
  }
}

export function anthropicReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    const open = new Map<unknown, { kind: "text" | "tool" | "thinking" | "other"; handle: number }>();
    let sawStart = false;
    let sawStop = false;
    let blocks = 0;
    const onEvent = (event: JsonRecord) => {
      if (event.type === "message_start") sawStart = true;
      else if (event.type === "message_stop") sawStop = true;
      else if (event.type === "content_block_start") {
        const block = isRecord(event.content_block) ? event.content_block : {};
        if (block.type === "fallback") {
          if (blocks > 0) throw new Error("Anthropic performed an unsupported mid-output model fallback");
        } else if (block.type === "text") {
          open.set(event.index, { kind: "text", handle: reply.openText(stringOr(block.text)) });
          blocks++;
        } else if (block.type === "tool_use") {
          open.set(event.index, { kind: "tool", handle: reply.openToolCall(stringOr(block.id), stringOr(block.name)) });
          blocks++;
        } else if (block.type === "thinking") {
          const handle = reply.openThinking();
          reply.appendThinking(handle, stringOr(block.thinking));
          reply.appendSignature(handle, stringOr(block.signature));
          open.set(event.index, { kind: "thinking", handle });
          blocks++;
        } else if (block.type === "redacted_thinking") {
          open.set(event.index, { kind: "other", handle: -1 });
          blocks++;
        }
      } else if (event.type === "content_block_delta") {
        const target = open.get(event.index);
        const delta = isRecord(event.delta) ? event.delta : {};
        if (target?.kind === "text" && delta.type === "text_delta")
          reply.appendText(target.handle, stringOr(delta.text));
        if (target?.kind === "tool" && delta.type === "input_json_delta")
          reply.appendArgs(target.handle, stringOr(delta.partial_json));
        if (target?.kind === "thinking" && delta.type === "thinking_delta")
          reply.appendThinking(target.handle, stringOr(delta.thinking));
        if (target?.kind === "thinking" && delta.type === "signature_delta")
          reply.appendSignature(target.handle, stringOr(delta.signature));
      } else if (event.type === "content_block_stop") {
        open.delete(event.index);
      } else if (event.type === "message_delta") {
        const delta = isRecord(event.delta) ? event.delta : {};
        if (typeof delta.stop_reason === "string" && delta.stop_reason)
          onStop(reply, delta.stop_reason, delta.stop_details);
      }
    };
    return {
      onEvent(sse) {
        if (sse.event === "error") throw new Error(sse.data);
        if (!MESSAGE_EVENTS.has(sse.event ?? "")) return;
        let data: unknown;
        try {
          data = parseJsonWithRepair(sse.data);
        } catch {
          throw new Error(`Could not parse Anthropic SSE event ${sse.event}`);
        }
        if (isRecord(data)) onEvent(data);
      },
      onJson(value) {
        if (!isRecord(value) || value.type === "error") throw new Error(`Anthropic error: ${JSON.stringify(value)}`);
        for (const block of Array.isArray(value.content) ? value.content : []) {
          if (!isRecord(block)) continue;
          if (block.type === "text") reply.openText(stringOr(block.text));
          else if (block.type === "thinking") {
            const handle = reply.openThinking();
            reply.appendThinking(handle, stringOr(block.thinking));
            reply.appendSignature(handle, stringOr(block.signature));
          } else if (block.type === "tool_use")
            reply.openToolCall(stringOr(block.id), stringOr(block.name), JSON.stringify(block.input ?? {}));
        }
        sawStart = sawStop = true;
        if (typeof value.stop_reason === "string") onStop(reply, value.stop_reason, value.stop_details);
      },
      finish() {
        if (reply.stopReason === undefined) reply.fail("Anthropic stream ended without a stop reason");
        else if (sawStart && !sawStop) reply.fail("Anthropic stream ended before message_stop");
        else reply.complete = true;
        return reply.finish();
      },
    };
  });
}

function onStop(reply: ReplyAccumulator, reason: string, details: unknown): void {
  const mapped = mapAnthropicStop(reason, details);
  reply.stopReason = reason;
  reply.piStopReason = mapped.pi;
  if (mapped.error) reply.fail(mapped.error, false);
}
