// anthropic-messages: POST <base>/v1/messages?beta=true (the SDK's beta.messages.create), model
// in the body, `stream: true`; beta flags travel in the `anthropic-beta` header.
//
// Request, as Pi 1.6.0 builds it (api/anthropic-messages.js buildParams/convertMessages):
// `system` is an array of text blocks (OAuth mode adds Claude Code's line first); messages are
// user/assistant, plus `system` ones for mid-conversation updates; tool results are
// `tool_result` blocks in a user message; images are base64 sources; tools are
// `{ name, description, input_schema, eager_input_streaming?, strict?, cache_control? }`.
//
// Replies: anthropic-messages-reply.ts.

import { anthropicReplyParser } from "./anthropic-messages-reply.js";
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
  requestSettings,
  requireRecord,
  serverFeatureRefusal,
  serverToolRefusal,
  sha256Hex,
  stringOr,
  unreadable,
} from "./codec-support.js";
import type {
  ApiCodec,
  ConversationMessage,
  ConversationPart,
  ModelRequest,
  ModelTool,
  RequestHeaders,
  RequestPolicy,
} from "./codec-types.js";

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
    settings: requestSettings(request, ["model", "system", "messages", "tools", "stream"]),
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
  // Pi's tools carry no `type`; typed ones are Anthropic's own (web search/fetch, code execution,
  // computer use, bash/text editor, memory, MCP toolsets, tool search).
  return serverToolRefusal(tools, policy, (type) => type === "custom" || type === undefined);
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
