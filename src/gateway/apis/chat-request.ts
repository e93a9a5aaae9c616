// The request side shared by openai-completions and mistral-conversations: both send
// OpenAI-style chat messages (Pi 1.6.0 `convertMessages` in api/openai-completions.js and
// `toChatMessages` + `toMistralWirePayload` in api/mistral-conversations.js):
//   system/developer  { role, content: string }                 (Kimi: also `tools`)
//   user              { role, content: string | [text | image_url] }
//   assistant         { role, content: string | null | [text | thinking], tool_calls: [...] }
//   tool              { role, tool_call_id, content: string | [text | image_url], name? }
// OpenAI writes `image_url: { url }`, Mistral `image_url: "data:..."`.

import {
  ArgumentsParser,
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
  requestSettings,
  requireRecord,
  serverFeatureRefusal,
  serverToolRefusal,
  stringOr,
  unreadable,
} from "./codec-support.js";
import type {
  ConversationMessage,
  ConversationPart,
  ModelRequest,
  ModelTool,
  RequestHeaders,
  RequestPolicy,
} from "./codec-types.js";

export function parseChatRequest(api: string, body: unknown): ModelRequest {
  const request = requireRecord(body, "the request body");
  if (typeof request.model !== "string") unreadable("the request names no model");
  const system: string[] = [];
  const messages: ConversationMessage[] = [];
  const args = new ArgumentsParser();
  const tools: ModelTool[] = arrayOrEmpty(request.tools, "tools").map((tool, i) => chatTool(tool, `tools[${i}]`));
  arrayOrEmpty(request.messages, "messages").forEach((raw, index) => {
    const message = requireRecord(raw, `messages[${index}]`);
    const where = `messages[${index}]`;
    switch (message.role) {
      case "system":
      case "developer": {
        const text = textOnly(message.content, where);
        if (text) system.push(text);
        // Kimi-style tool additions ride on a system message (Pi: supportsMidConvoToolAdditions).
        for (const [i, tool] of arrayOrEmpty(message.tools, `${where}.tools`).entries())
          tools.push(chatTool(tool, `${where}.tools[${i}]`));
        return;
      }
      case "user":
        messages.push({ role: "user", parts: contentParts(message.content, where) });
        return;
      case "assistant":
        messages.push({ role: "assistant", parts: assistantParts(message, where, args) });
        return;
      case "tool": {
        const parts = contentParts(message.content, where);
        const text = parts.flatMap((part) => (part.kind === "text" ? [part.text] : [])).join("");
        const result: ConversationPart = { kind: "tool-result", callId: stringOr(message.tool_call_id), text };
        if (typeof message.name === "string") result.name = message.name;
        messages.push({ role: "tool", parts: [result, ...parts.filter((part) => part.kind === "image")] });
        return;
      }
      default:
        unreadable(`${where} has an unsupported role`);
    }
  });
  return {
    api,
    model: request.model as string,
    stream: request.stream === true,
    system: system.join("\n\n"),
    messages,
    tools,
    settings: requestSettings(request, ["model", "messages", "tools", "stream"]),
  };
}

function chatTool(raw: unknown, where: string): ModelTool {
  const tool = requireRecord(raw, where);
  if (tool.type === "custom" && isRecord(tool.custom)) {
    return {
      name: stringOr(tool.custom.name),
      description: stringOr(tool.custom.description),
      parameters: tool.custom.format,
    };
  }
  const fn = requireRecord(tool.function, `${where}.function`);
  return { name: stringOr(fn.name), description: stringOr(fn.description), parameters: fn.parameters ?? {} };
}

function textOnly(content: unknown, where: string): string {
  return contentParts(content, where)
    .flatMap((part) => (part.kind === "text" ? [part.text] : []))
    .join("");
}

function contentParts(content: unknown, where: string): ConversationPart[] {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return [{ kind: "text", text: content }];
  const parts: ConversationPart[] = [];
  for (const [i, raw] of arrayOrEmpty(content, `${where}.content`).entries()) {
    const part = requireRecord(raw, `${where}.content[${i}]`);
    if (part.type === "text") parts.push({ kind: "text", text: stringOr(part.text) });
    else if (part.type === "image_url") parts.push(imagePart(imageUrlOf(part)));
    else if (part.type !== "thinking") unreadable(`${where}.content[${i}] has an unsupported type`);
  }
  return parts;
}

function imageUrlOf(part: JsonRecord): string {
  const image = part.image_url;
  return typeof image === "string" ? image : isRecord(image) ? stringOr(image.url) : "";
}

function assistantParts(message: JsonRecord, where: string, args: ArgumentsParser): ConversationPart[] {
  const parts: ConversationPart[] = contentParts(message.content, where).filter((part) => part.kind === "text");
  for (const [i, raw] of arrayOrEmpty(message.tool_calls, `${where}.tool_calls`).entries()) {
    const call = requireRecord(raw, `${where}.tool_calls[${i}]`);
    if (call.type === "custom" && isRecord(call.custom)) {
      parts.push({
        kind: "tool-call",
        id: stringOr(call.id),
        name: stringOr(call.custom.name),
        arguments: call.custom.input,
      });
      continue;
    }
    const fn = requireRecord(call.function, `${where}.tool_calls[${i}].function`);
    parts.push({
      kind: "tool-call",
      id: stringOr(call.id),
      name: stringOr(fn.name),
      arguments: args.value(fn.arguments),
    });
  }
  return parts;
}

// ---- refusal ----------------------------------------------------------------------------

/** Top-level fields that make the provider act on its own: search, plugins, other models. */
const SERVER_FIELDS: Record<string, string> = {
  web_search_options: "web search",
  plugins: "a provider plugin (web search, file parsing)",
};

export function chatRefusal(body: unknown, headers: RequestHeaders, policy: RequestPolicy): string | undefined {
  const bodyProblem = bodyRefusal(body);
  if (bodyProblem) return bodyProblem;
  const request = body as JsonRecord;
  return firstRefusal(
    () => modelRefusal(request.model, policy),
    () => fallbackModelsRefusal(request.models, policy),
    () => {
      for (const [field, what] of Object.entries(SERVER_FIELDS)) {
        if (request[field] !== undefined) {
          const reason = serverFeatureRefusal(policy, field, what);
          if (reason) return reason;
        }
      }
      return undefined;
    },
    () => chatToolsRefusal(request.tools, policy),
    () => chatContentRefusal(request.messages, policy),
    // Pi sends no OpenAI-Beta header; one would switch on preview (server-side) features.
    () => betaRefusal(headerList(headers, "openai-beta"), [], policy, "the openai-beta flag"),
  );
}

function fallbackModelsRefusal(models: unknown, policy: RequestPolicy): string | undefined {
  if (models === undefined) return undefined;
  if (!Array.isArray(models)) return "the request's models field is not a list";
  for (const model of models) {
    const reason = modelRefusal(model, policy, "models");
    if (reason) return reason;
  }
  return undefined;
}

function chatToolsRefusal(tools: unknown, policy: RequestPolicy): string | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) return "the request's tools field is not a list";
  // function tools run in the sandbox (Pi executes them); custom ones are grammar-constrained function tools.
  return serverToolRefusal(tools, policy, (type) => type === "function" || type === "custom");
}

function chatContentRefusal(messages: unknown, policy: RequestPolicy): string | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (const message of messages) {
    if (!isRecord(message) || !Array.isArray(message.content)) continue;
    for (const part of message.content) {
      if (!isRecord(part)) return "a message content part is not a JSON object";
      if (part.type === "text" || part.type === "thinking") continue;
      if (part.type === "image_url") {
        if (isDataUrl(imageUrlOf(part))) continue;
        const reason = serverFeatureRefusal(policy, "image_url", "an image the provider would fetch from a URL");
        if (reason) return reason;
        continue;
      }
      // file, document_url, input_audio, ...: Pi never sends them; files and URLs reach the provider's stores.
      const reason = serverFeatureRefusal(policy, String(part.type), "a content part Pi never sends");
      if (reason) return reason;
    }
  }
  return undefined;
}
