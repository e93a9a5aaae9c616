// openai-responses: POST <base>/responses, model in the body, `stream: true`, `store: false`.
//
// Request, as Pi 1.6.0 builds it (api/openai-responses-shared.js convertResponsesMessages):
// `input` items: { role: system|developer, content: string }, { role: user, content:
// [input_text | input_image(data: URL)] }, assistant `message` items with output_text,
// `function_call` { call_id, id?, name, arguments }, `function_call_output` { call_id, output },
// `reasoning` (opaque), and, with compat flags, custom tool calls, `additional_tools`,
// client-side `tool_search_*` and `configuration_update` items. The neutral view names calls
// and results by `call_id`.
//
// Replies: openai-responses-reply.ts.

import {
  ArgumentsParser,
  appendParts,
  arrayOrEmpty,
  betaRefusal,
  bodyRefusal,
  firstRefusal,
  headerList,
  imagePart,
  isDataUrl,
  isRecord,
  type JsonRecord,
  modelRefusal,
  parseSafely,
  requestSettings,
  requireRecord,
  serverFeatureRefusal,
  serverToolRefusal,
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
import { responsesReplyParser } from "./openai-responses-reply.js";

const API = "openai-responses";

export const openAiResponsesCodec: ApiCodec = {
  api: API,
  parseRequest: (_pathname, body) => parseSafely(() => ({ ok: true, request: parseResponsesRequest(body) })),
  refusal: (_pathname, body, headers, policy) => responsesRefusal(body, headers, policy),
  replyParser: (contentType, limits) => responsesReplyParser(contentType, limits),
};

function parseResponsesRequest(body: unknown): ModelRequest {
  const request = requireRecord(body, "the request body");
  if (typeof request.model !== "string") unreadable("the request names no model");
  const system: string[] = typeof request.instructions === "string" ? [request.instructions] : [];
  const tools = arrayOrEmpty(request.tools, "tools").map((tool, i) => responsesTool(tool, `tools[${i}]`));
  const messages: ConversationMessage[] = [];
  const args = new ArgumentsParser();
  const input =
    typeof request.input === "string"
      ? [{ role: "user", content: request.input }]
      : arrayOrEmpty(request.input, "input");
  for (const [index, raw] of input.entries()) {
    const item = requireRecord(raw, `input[${index}]`);
    const where = `input[${index}]`;
    switch (item.type ?? "message") {
      case "message":
        if (item.role === "system" || item.role === "developer") system.push(textOf(contentParts(item.content, where)));
        else if (item.role === "user" || item.role === "assistant")
          appendParts(messages, item.role, contentParts(item.content, where));
        else unreadable(`${where} has an unsupported role`);
        break;
      case "function_call":
        appendParts(messages, "assistant", [
          {
            kind: "tool-call",
            id: stringOr(item.call_id),
            name: stringOr(item.name),
            arguments: args.value(item.arguments),
          },
        ]);
        break;
      case "custom_tool_call":
        appendParts(messages, "assistant", [
          { kind: "tool-call", id: stringOr(item.call_id), name: stringOr(item.name), arguments: item.input },
        ]);
        break;
      case "function_call_output":
      case "custom_tool_call_output": {
        const parts =
          typeof item.output === "string"
            ? [{ kind: "text", text: item.output } as const]
            : contentParts(item.output, where);
        const result: ConversationPart = { kind: "tool-result", callId: stringOr(item.call_id), text: textOf(parts) };
        messages.push({ role: "tool", parts: [result, ...parts.filter((part) => part.kind === "image")] });
        break;
      }
      case "additional_tools":
      case "tool_search_output":
        for (const [i, tool] of arrayOrEmpty(item.tools, `${where}.tools`).entries())
          tools.push(responsesTool(tool, `${where}.tools[${i}]`));
        break;
      case "reasoning":
      case "tool_search_call":
      case "configuration_update":
        break;
      default:
        unreadable(`${where} has an unsupported type`);
    }
  }
  return {
    api: API,
    model: request.model as string,
    stream: request.stream === true,
    system: system.join("\n\n"),
    messages,
    tools,
    settings: requestSettings(request, ["model", "instructions", "input", "tools", "stream"]),
  };
}

function responsesTool(raw: unknown, where: string): ModelTool {
  const tool = requireRecord(raw, where);
  return {
    name: stringOr(tool.name, stringOr(tool.type)),
    description: stringOr(tool.description),
    parameters: tool.type === "custom" ? tool.format : (tool.parameters ?? {}),
  };
}

function contentParts(content: unknown, where: string): ConversationPart[] {
  if (typeof content === "string") return [{ kind: "text", text: content }];
  const parts: ConversationPart[] = [];
  for (const [i, raw] of arrayOrEmpty(content, `${where}.content`).entries()) {
    const part = requireRecord(raw, `${where}.content[${i}]`);
    if (part.type === "input_text" || part.type === "output_text")
      parts.push({ kind: "text", text: stringOr(part.text) });
    else if (part.type === "refusal") parts.push({ kind: "text", text: stringOr(part.refusal) });
    else if (part.type === "input_image")
      parts.push(imagePart(stringOr(part.image_url, `file:${stringOr(part.file_id)}`)));
    else unreadable(`${where}.content[${i}] has an unsupported type`);
  }
  return parts;
}

function textOf(parts: ConversationPart[]): string {
  return parts.flatMap((part) => (part.kind === "text" ? [part.text] : [])).join("\n");
}

// ---- refusal ----------------------------------------------------------------------------

/** Fields that reach state stored at the provider (other conversations, prompts, background jobs). */
const SERVER_FIELDS: Record<string, string> = {
  previous_response_id: "a stored response",
  conversation: "a stored conversation",
  prompt: "a stored prompt template",
  background: "a background response",
};

const PI_ITEMS = new Set([
  "message",
  "function_call",
  "function_call_output",
  "custom_tool_call",
  "custom_tool_call_output",
  "reasoning",
  "additional_tools",
  "tool_search_call",
  "tool_search_output",
  "configuration_update",
]);

const PI_PARTS = new Set(["input_text", "output_text", "refusal", "input_image"]);

function responsesRefusal(body: unknown, headers: RequestHeaders, policy: RequestPolicy): string | undefined {
  const bodyProblem = bodyRefusal(body);
  if (bodyProblem) return bodyProblem;
  const request = body as JsonRecord;
  return firstRefusal(
    () => modelRefusal(request.model, policy),
    () => {
      for (const [field, what] of Object.entries(SERVER_FIELDS)) {
        const present = request[field] !== undefined && request[field] !== null && request[field] !== false;
        const reason = present ? serverFeatureRefusal(policy, field, what) : undefined;
        if (reason) return reason;
      }
      return undefined;
    },
    () => toolsRefusal(Array.isArray(request.tools) ? request.tools : [], policy),
    () => (Array.isArray(request.input) ? itemsRefusal(request.input, policy) : undefined),
    () => betaRefusal(headerList(headers, "openai-beta"), [], policy, "the openai-beta flag"),
  );
}

function toolsRefusal(tools: unknown[], policy: RequestPolicy): string | undefined {
  // function and custom (grammar) tools run in the sandbox; every other type is hosted by OpenAI.
  return serverToolRefusal(tools, policy, (type) => type === "function" || type === "custom");
}

function itemsRefusal(items: unknown[], policy: RequestPolicy): string | undefined {
  for (const item of items) {
    if (!isRecord(item)) return "an input item is not a JSON object";
    const type = String(item.type ?? "message");
    if (!PI_ITEMS.has(type)) return serverFeatureRefusal(policy, type, "an input item Pi never sends");
    if (type === "tool_search_call" && item.execution !== "client") {
      return serverFeatureRefusal(policy, "tool_search", "server-side tool search");
    }
    const tools = Array.isArray(item.tools) ? toolsRefusal(item.tools, policy) : undefined;
    if (tools) return tools;
    const content = type === "message" ? item.content : type.endsWith("_output") ? item.output : undefined;
    for (const part of Array.isArray(content) ? content : []) {
      if (!isRecord(part)) return "a content part is not a JSON object";
      const partType = String(part.type);
      if (!PI_PARTS.has(partType)) return serverFeatureRefusal(policy, partType, "a content part Pi never sends");
      if (partType === "input_image" && !isDataUrl(part.image_url)) {
        const reason = serverFeatureRefusal(policy, "input_image", "an image the provider would fetch or look up");
        if (reason) return reason;
      }
    }
  }
  return undefined;
}
