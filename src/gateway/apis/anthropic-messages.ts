// anthropic-messages: POST <base>/v1/messages?beta=true (the SDK's beta.messages.create), model
// in the body, `stream: true`; beta flags travel in the `anthropic-beta` header.
//
// Request, as Pi 1.6.0 builds it (api/anthropic-messages.js buildParams/convertMessages):
// `system` is an array of text blocks (OAuth mode adds Claude Code's line first); messages are
// user/assistant, plus `system` ones for mid-conversation updates; tool results are
// `tool_result` blocks in a user message; images are base64 sources; tools are
// `{ name, description, input_schema, eager_input_streaming?, strict?, cache_control? }`.
//
// Reply, as Pi reads it (iterateAnthropicEvents): only SSE events named message_start,
// message_delta, message_stop, content_block_start/_delta/_stop count (ping is skipped);
// `event: error` fails; data is parsed with Pi's JSON repair. Each text or tool_use content
// block is one block; a tool call's arguments are its input_json_delta pieces (Pi ignores
// content_block_start's `input` when streaming). A stop reason is required, and once
// message_start was seen, message_stop too.
import type {
  ApiCodec,
  ConversationMessage,
  ConversationPart,
  ModelRequest,
  ModelTool,
  PiStopReason,
  ReplyLimits,
  ReplyParser,
  RequestHeaders,
  RequestPolicy,
} from "./api-codec.js";
import {
  appendParts,
  arrayOrEmpty,
  base64ImagePart,
  betaRefusal,
  bodyRefusal,
  firstRefusal,
  headerList,
  imagePart,
  isRecord,
  type JsonRecord,
  modelRefusal,
  parseSafely,
  requireRecord,
  serverFeatureRefusal,
  sha256Hex,
  stringOr,
  unreadable,
} from "./codec-support.js";
import { parseJsonWithRepair } from "../../pi/tool-arguments.js";
import { createReplyParser, type ReplyAccumulator } from "./reply-support.js";

const API = "anthropic-messages";

/** Every beta flag Pi 1.6.0 can send (getBetaFeatures), in API-key and OAuth modes. */
export const PI_ANTHROPIC_BETAS: readonly string[] = Object.freeze([
  "claude-code-20250219",
  "oauth-2025-04-20",
  "fine-grained-tool-streaming-2025-05-14",
  "interleaved-thinking-2025-05-14",
  "server-side-fallback-2026-07-01",
  "mid-conversation-output-config-2026-07-01",
  "thinking-binding-controls-2026-08-01",
  "inline-tools-2026-09-15",
  "message-threads-2026-08-12",
]);

export const anthropicMessagesCodec: ApiCodec = {
  api: API,
  parseRequest: (_pathname, body) => parseSafely(() => ({ ok: true, request: parseAnthropicRequest(body) })),
  refusal: (_pathname, body, headers, policy) => anthropicRefusal(body, headers, policy),
  replyParser: (contentType, limits) => anthropicReplyParser(contentType, limits),
};

function parseAnthropicRequest(body: unknown): ModelRequest {
  const request = requireRecord(body, "the request body");
  if (typeof request.model !== "string") unreadable("the request names no model");
  const system: string[] = [];
  if (typeof request.system === "string") system.push(request.system);
  for (const [i, block] of arrayOrEmpty(request.system, "system").entries()) {
    system.push(stringOr(requireRecord(block, `system[${i}]`).text));
  }
  const tools = arrayOrEmpty(request.tools, "tools").map((tool, i) => anthropicTool(tool, `tools[${i}]`));
  const messages: ConversationMessage[] = [];
  for (const [index, raw] of arrayOrEmpty(request.messages, "messages").entries()) {
    const message = requireRecord(raw, `messages[${index}]`);
    const where = `messages[${index}]`;
    const blocks =
      typeof message.content === "string"
        ? [{ type: "text", text: message.content }]
        : arrayOrEmpty(message.content, `${where}.content`);
    if (message.role === "system") {
      // Mid-conversation updates (Pi: supportsMidConvoSystemMessages); effort markers have no content.
      for (const [i, rawBlock] of blocks.entries()) {
        const block = requireRecord(rawBlock, `${where}.content[${i}]`);
        if (block.type === "text") system.push(stringOr(block.text));
        else if (block.type === "tool_addition" && isRecord(block.tool))
          tools.push(anthropicTool(block.tool.definition, where));
      }
      continue;
    }
    if (message.role !== "user" && message.role !== "assistant") unreadable(`${where} has an unsupported role`);
    for (const [i, rawBlock] of blocks.entries()) {
      const block = requireRecord(rawBlock, `${where}.content[${i}]`);
      const part = blockPart(block, `${where}.content[${i}]`);
      if (part === undefined) continue;
      if (block.type === "tool_result") messages.push({ role: "tool", parts: part });
      else appendParts(messages, message.role, part);
    }
  }
  return {
    api: API,
    model: request.model as string,
    stream: request.stream === true,
    system: system.join("\n\n"),
    messages,
    tools,
  };
}

function anthropicTool(raw: unknown, where: string): ModelTool {
  const tool = requireRecord(raw, where);
  return {
    name: stringOr(tool.name, stringOr(tool.type)),
    description: stringOr(tool.description),
    parameters: tool.input_schema ?? {},
  };
}

function blockPart(block: JsonRecord, where: string): ConversationPart[] | undefined {
  switch (block.type) {
    case "text":
      return [{ kind: "text", text: stringOr(block.text) }];
    case "image":
      return [sourcePart(block.source)];
    case "tool_use":
      return [{ kind: "tool-call", id: stringOr(block.id), name: stringOr(block.name), arguments: block.input ?? {} }];
    case "tool_result": {
      const content =
        typeof block.content === "string"
          ? [{ type: "text", text: block.content }]
          : arrayOrEmpty(block.content, where);
      const texts: string[] = [];
      const images: ConversationPart[] = [];
      for (const item of content) {
        if (!isRecord(item)) continue;
        if (item.type === "text") texts.push(stringOr(item.text));
        else if (item.type === "image") images.push(sourcePart(item.source));
      }
      const result: ConversationPart = {
        kind: "tool-result",
        callId: stringOr(block.tool_use_id),
        text: texts.join("\n"),
      };
      if (block.is_error === true) result.isError = true;
      return [result, ...images];
    }
    case "thinking":
    case "redacted_thinking":
      return undefined;
    default:
      return unreadable(`${where} has an unsupported type`);
  }
}

function sourcePart(source: unknown): ConversationPart {
  if (isRecord(source) && source.type === "base64") return base64ImagePart(source.data);
  if (isRecord(source) && typeof source.url === "string") return imagePart(source.url);
  return { kind: "image", sha256: sha256Hex(JSON.stringify(source ?? null)) };
}

// ---- refusal ----------------------------------------------------------------------------

const SERVER_FIELDS: Record<string, string> = {
  mcp_servers: "an MCP connector",
  container: "a code-execution container",
};

/** Content block types Pi's converter writes, per role. */
const PI_BLOCKS: Record<string, ReadonlySet<string>> = {
  user: new Set(["text", "image", "tool_result"]),
  assistant: new Set(["text", "thinking", "redacted_thinking", "tool_use"]),
  system: new Set(["text", "tool_addition", "tool_removal"]),
};

function anthropicRefusal(body: unknown, headers: RequestHeaders, policy: RequestPolicy): string | undefined {
  const bodyProblem = bodyRefusal(body);
  if (bodyProblem) return bodyProblem;
  const request = body as JsonRecord;
  return firstRefusal(
    () => modelRefusal(request.model, policy),
    () => {
      for (const [i, fallback] of arrayOrEmpty(request.fallbacks, "fallbacks").entries()) {
        const reason = modelRefusal(isRecord(fallback) ? fallback.model : undefined, policy, `fallbacks[${i}]`);
        if (reason) return reason;
      }
      return undefined;
    },
    () => {
      for (const [field, what] of Object.entries(SERVER_FIELDS)) {
        const reason = request[field] !== undefined ? serverFeatureRefusal(policy, field, what) : undefined;
        if (reason) return reason;
      }
      return undefined;
    },
    () => toolsRefusal(Array.isArray(request.tools) ? request.tools : [], policy),
    () => messagesRefusal(Array.isArray(request.messages) ? request.messages : [], policy),
    () => {
      const bodyBetas = Array.isArray(request.betas) ? request.betas.map(String) : [];
      return betaRefusal(
        [...headerList(headers, "anthropic-beta"), ...bodyBetas],
        PI_ANTHROPIC_BETAS,
        policy,
        "the anthropic-beta flag",
      );
    },
  );
}

function toolsRefusal(tools: unknown[], policy: RequestPolicy): string | undefined {
  for (const tool of tools) {
    // Pi's tools carry no `type`; typed ones are Anthropic's own (web search/fetch, code
    // execution, computer use, bash/text editor, memory, MCP toolsets, tool search).
    const type = isRecord(tool) ? tool.type : "not an object";
    if (type === undefined || type === "custom") continue;
    const reason = serverFeatureRefusal(policy, String(type), "a server tool");
    if (reason) return reason;
  }
  return undefined;
}

function messagesRefusal(messages: unknown[], policy: RequestPolicy): string | undefined {
  for (const message of messages) {
    if (!isRecord(message) || !Array.isArray(message.content)) continue;
    const allowed = PI_BLOCKS[String(message.role)] ?? new Set<string>();
    for (const block of message.content) {
      const reason = blockRefusal(block, allowed, policy);
      if (reason) return reason;
    }
  }
  return undefined;
}

function blockRefusal(block: unknown, allowed: ReadonlySet<string>, policy: RequestPolicy): string | undefined {
  if (!isRecord(block)) return "a message content block is not a JSON object";
  const type = String(block.type);
  if (!allowed.has(type)) return serverFeatureRefusal(policy, type, "a content block Pi never sends");
  if (isRecord(block.source) && block.source.type !== "base64") {
    return serverFeatureRefusal(
      policy,
      `${String(block.source.type)}-source`,
      "content the provider would fetch or look up",
    );
  }
  if (type === "tool_result" && Array.isArray(block.content)) {
    for (const item of block.content) {
      const reason = blockRefusal(item, new Set(["text", "image"]), policy);
      if (reason) return reason;
    }
  }
  if (type === "tool_addition" && isRecord(block.tool)) return toolsRefusal([block.tool.definition], policy);
  return undefined;
}

// ---- reply ------------------------------------------------------------------------------

const MESSAGE_EVENTS = new Set([
  "message_start",
  "message_delta",
  "message_stop",
  "content_block_start",
  "content_block_delta",
  "content_block_stop",
]);

export function mapAnthropicStop(reason: string, details?: unknown): { pi: PiStopReason; error?: string } {
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

function anthropicReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    const open = new Map<unknown, { kind: "text" | "tool" | "other"; handle: number }>();
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
        } else if (block.type === "thinking" || block.type === "redacted_thinking") {
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
          else if (block.type === "tool_use")
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
