// google-generative-ai: POST <base>/models/<model>:streamGenerateContent?alt=sse (the
// @google/genai SDK), key in `x-goog-api-key`. The model is in the PATH, not the body.
//
// Request, as Pi 1.6.0 builds it (api/google-generative-ai.js buildParams + google-shared.js
// convertMessages, turned into REST by the SDK): `contents` of role user/model with parts
// `text` (`thought: true` for thinking), `inlineData`, `functionCall` { name, args, id? },
// `functionResponse` { name, response: { output } | { error }, parts?, id? }; a
// `systemInstruction` { parts: [{ text }] }; `tools: [{ functionDeclarations }]`.
//
// Reply, as Pi reads it (each SSE `data:` is one GenerateContentResponse): only candidates[0]
// counts; consecutive non-thought text parts form one text block, across chunks, until a
// thought part or a functionCall; each functionCall is one tool call whose arguments are its
// `args` object. Pi keeps the model's call id, or makes one from the clock when there is none
// (or a repeat): then the id here is "". finishReason is required: STOP -> stop (toolUse with
// tool calls), MAX_TOKENS/CONTINUATION -> length, the safety/other reasons -> error.

import {
  appendParts,
  arrayOrEmpty,
  base64ImagePart,
  bodyRefusal,
  firstRefusal,
  isRecord,
  type JsonRecord,
  modelRefusal,
  parseSafely,
  requestSettings,
  requireRecord,
  serverFeatureRefusal,
  short,
  stringOr,
  unreadable,
} from "./codec-support.js";
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
} from "./codec-types.js";
import { createReplyParser, parseEventJson, type ReplyAccumulator } from "./reply-support.js";

const API = "google-generative-ai";
const GENERATE = /^\/models\/([^/:]+):(streamGenerateContent|generateContent)$/;

export const googleGenerativeAiCodec: ApiCodec = {
  api: API,
  parseRequest: (pathname, body) => parseSafely(() => ({ ok: true, request: parseGoogleRequest(pathname, body) })),
  refusal: (pathname, body, headers, policy) => googleRefusal(pathname, body, headers, policy),
  replyParser: (contentType, limits) => googleReplyParser(contentType, limits),
};

function parseGoogleRequest(pathname: string, body: unknown): ModelRequest {
  const route = GENERATE.exec(pathname) ?? unreadable(`${pathname} is not a generateContent path`);
  const request = requireRecord(body, "the request body");
  const system: string[] = [];
  if (isRecord(request.systemInstruction)) {
    for (const part of arrayOrEmpty(request.systemInstruction.parts, "systemInstruction.parts"))
      system.push(stringOr(isRecord(part) ? part.text : undefined));
  } else if (typeof request.systemInstruction === "string") {
    system.push(request.systemInstruction);
  }
  const tools: ModelTool[] = [];
  for (const [i, tool] of arrayOrEmpty(request.tools, "tools").entries()) {
    for (const [j, raw] of arrayOrEmpty(
      requireRecord(tool, `tools[${i}]`).functionDeclarations,
      "functionDeclarations",
    ).entries()) {
      const declaration = requireRecord(raw, `tools[${i}].functionDeclarations[${j}]`);
      tools.push({
        name: stringOr(declaration.name),
        description: stringOr(declaration.description),
        parameters: declaration.parametersJsonSchema ?? declaration.parameters ?? {},
      });
    }
  }
  const messages: ConversationMessage[] = [];
  for (const [index, raw] of arrayOrEmpty(request.contents, "contents").entries()) {
    const content = requireRecord(raw, `contents[${index}]`);
    const role =
      content.role === "model"
        ? "assistant"
        : content.role === "user" || content.role === undefined
          ? "user"
          : undefined;
    if (!role) unreadable(`contents[${index}] has an unsupported role`);
    for (const [i, rawPart] of arrayOrEmpty(content.parts, `contents[${index}].parts`).entries()) {
      const part = requireRecord(rawPart, `contents[${index}].parts[${i}]`);
      if (isRecord(part.functionResponse))
        messages.push({ role: "tool", parts: functionResponseParts(part.functionResponse) });
      else appendParts(messages, role, partOf(part, `contents[${index}].parts[${i}]`));
    }
  }
  return {
    api: API,
    model: route[1]!,
    stream: route[2] === "streamGenerateContent",
    system: system.join("\n\n"),
    messages,
    tools,
    // The model and streaming are in the path.
    settings: requestSettings(request, ["contents", "systemInstruction", "tools"]),
  };
}

function partOf(part: JsonRecord, where: string): ConversationPart[] {
  if (part.thought === true) return [];
  if (typeof part.text === "string") return [{ kind: "text", text: part.text }];
  if (isRecord(part.inlineData)) return [base64ImagePart(part.inlineData.data)];
  if (isRecord(part.functionCall)) {
    const call = part.functionCall;
    return [{ kind: "tool-call", id: stringOr(call.id), name: stringOr(call.name), arguments: call.args ?? {} }];
  }
  return unreadable(`${where} has an unsupported kind`);
}

function functionResponseParts(response: JsonRecord): ConversationPart[] {
  const payload = isRecord(response.response) ? response.response : {};
  const isError = Object.hasOwn(payload, "error");
  const value = isError ? payload.error : payload.output;
  const result: ConversationPart = {
    kind: "tool-result",
    callId: stringOr(response.id),
    name: stringOr(response.name),
    text: typeof value === "string" ? value : (JSON.stringify(value) ?? ""),
  };
  if (isError) result.isError = true;
  const images = arrayOrEmpty(response.parts, "functionResponse.parts").flatMap((part) =>
    isRecord(part) && isRecord(part.inlineData) ? [base64ImagePart(part.inlineData.data)] : [],
  );
  return [result, ...images];
}

// ---- refusal ----------------------------------------------------------------------------

/** Part fields Pi's converter writes. fileData, executableCode, codeExecutionResult... are not. */
const PI_PART_FIELDS = new Set([
  "text",
  "thought",
  "thoughtSignature",
  "inlineData",
  "functionCall",
  "functionResponse",
]);

function googleRefusal(
  pathname: string,
  body: unknown,
  _headers: RequestHeaders,
  policy: RequestPolicy,
): string | undefined {
  const route = GENERATE.exec(pathname);
  const bodyProblem = bodyRefusal(body);
  if (bodyProblem) return bodyProblem;
  const request = body as JsonRecord;
  return firstRefusal(
    () => snakeCaseRefusal(request),
    () => modelRefusal(route?.[1], policy, "the URL path"),
    () =>
      request.cachedContent !== undefined
        ? serverFeatureRefusal(policy, "cachedContent", "stored cached content")
        : undefined,
    () => {
      for (const tool of Array.isArray(request.tools) ? request.tools : []) {
        if (!isRecord(tool)) return "a tool is not a JSON object";
        // Only function declarations run in the sandbox; googleSearch, codeExecution, urlContext,
        // fileSearch, computerUse, googleMaps, retrieval... run at Google.
        for (const key of Object.keys(tool)) {
          const reason =
            key === "functionDeclarations" ? undefined : serverFeatureRefusal(policy, key, "a server tool");
          if (reason) return reason;
        }
      }
      return undefined;
    },
    () => {
      const contents = Array.isArray(request.contents) ? request.contents : [];
      const system = isRecord(request.systemInstruction) ? [request.systemInstruction] : [];
      for (const content of [...contents, ...system]) {
        const parts = isRecord(content) && Array.isArray(content.parts) ? content.parts : [];
        for (const part of parts) {
          const nested =
            isRecord(part) && isRecord(part.functionResponse) ? arrayOrEmptySafe(part.functionResponse.parts) : [];
          for (const candidate of [part, ...nested]) {
            if (!isRecord(candidate)) return "a content part is not a JSON object";
            for (const key of Object.keys(candidate)) {
              const reason = PI_PART_FIELDS.has(key)
                ? undefined
                : serverFeatureRefusal(policy, key, "a content part Pi never sends");
              if (reason) return reason;
            }
          }
        }
      }
      return undefined;
    },
  );
}

/**
 * Values whose keys are the caller's data, not field names of Google's API: a call's arguments, a
 * tool's result, JSON Schemas. Their keys may have any spelling.
 */
const FREE_FORM_FIELDS = new Set([
  "args",
  "response",
  "parameters",
  "parametersJsonSchema",
  "responseSchema",
  "responseJsonSchema",
]);

/**
 * Google reads a request's JSON by protobuf's rules, which take each field under its snake_case
 * name too (`generation_config`, `candidate_count`, `cached_content`, `file_data`): every check
 * here looks for the camelCase names Pi writes, so a snake_case twin would pass them unseen. Pi
 * never writes one; any field name with an underscore outside the free-form values is refused.
 */
function snakeCaseRefusal(request: JsonRecord): string | undefined {
  const pending: Array<{ value: unknown; at: string }> = [{ value: request, at: "" }];
  while (pending.length > 0) {
    const { value, at } = pending.pop()!;
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) pending.push({ value: item, at: `${at}[${i}]` });
      continue;
    }
    if (!isRecord(value)) continue;
    for (const [key, child] of Object.entries(value)) {
      const where = at ? `${at}.${key}` : key;
      if (key.includes("_"))
        return `the request names the field "${short(where)}" in snake_case, which Google reads as its camelCase twin; Pi writes camelCase only, the name the gateway checks`;
      if (!FREE_FORM_FIELDS.has(key)) pending.push({ value: child, at: where });
    }
  }
  return undefined;
}

function arrayOrEmptySafe(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

// ---- reply ------------------------------------------------------------------------------

const LENGTH_REASONS = new Set(["MAX_TOKENS", "CONTINUATION"]);
const ERROR_REASONS = new Set([
  "BLOCKLIST",
  "PROHIBITED_CONTENT",
  "SPII",
  "SAFETY",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION",
  "IMAGE_OTHER",
  "RECITATION",
  "FINISH_REASON_UNSPECIFIED",
  "OTHER",
  "LANGUAGE",
  "MALFORMED_FUNCTION_CALL",
  "UNEXPECTED_TOOL_CALL",
  "TOO_MANY_TOOL_CALLS",
  "NO_IMAGE",
]);

function mapGoogleFinish(reason: string): PiStopReason {
  if (reason === "STOP") return "stop";
  if (LENGTH_REASONS.has(reason)) return "length";
  if (ERROR_REASONS.has(reason)) return "error";
  throw new Error(`Unhandled stop reason: ${reason}`);
}

function googleReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    const state: ChunkState = { block: undefined, ids: new Set() };
    return {
      onEvent(event) {
        onChunk(reply, state, parseEventJson(event.data, "chunk"));
      },
      onJson(value) {
        // Without alt=sse the stream is a JSON array of the same chunks.
        for (const chunk of Array.isArray(value) ? value : [value]) onChunk(reply, state, chunk);
      },
      finish() {
        if (reply.stopReason === undefined) reply.fail("Google stream ended without a finish reason");
        else reply.complete = true;
        return reply.finish();
      },
    };
  });
}

interface ChunkState {
  /** The open block: text (its handle) or thinking; ended by the other kind or a call. */
  block: { kind: "text"; handle: number } | { kind: "thinking" } | undefined;
  ids: Set<string>;
}

function onChunk(reply: ReplyAccumulator, state: ChunkState, chunk: unknown): void {
  if (!isRecord(chunk)) throw new Error("a Google stream chunk is not a JSON object");
  // The SDK fails on an error object with an HTTP-like code (throwIfStreamErrorChunk).
  if (
    isRecord(chunk.error) &&
    typeof chunk.error.code === "number" &&
    chunk.error.code >= 400 &&
    chunk.error.code < 600
  ) {
    throw new Error(`got status: ${String(chunk.error.status)}. ${JSON.stringify(chunk)}`);
  }
  const candidate = Array.isArray(chunk.candidates) ? chunk.candidates[0] : undefined;
  if (!isRecord(candidate)) return;
  const content = isRecord(candidate.content) ? candidate.content : {};
  for (const part of Array.isArray(content.parts) ? content.parts : []) {
    if (!isRecord(part)) continue;
    if (part.text !== undefined) {
      const thinking = part.thought === true;
      if (thinking) {
        if (state.block?.kind !== "thinking") state.block = { kind: "thinking" };
      } else {
        if (state.block?.kind !== "text") state.block = { kind: "text", handle: reply.openText() };
        reply.appendText(state.block.handle, String(part.text));
      }
    }
    if (isRecord(part.functionCall)) {
      state.block = undefined;
      const call = part.functionCall;
      const provided = typeof call.id === "string" ? call.id : "";
      const id = provided && !state.ids.has(provided) ? provided : "";
      if (id) state.ids.add(id);
      reply.openToolCall(id, stringOr(call.name), JSON.stringify(call.args ?? {}));
    }
  }
  if (typeof candidate.finishReason === "string" && candidate.finishReason) {
    let pi = mapGoogleFinish(candidate.finishReason);
    if (pi === "stop" && reply.toolCallCount > 0) pi = "toolUse";
    reply.stopReason = candidate.finishReason;
    reply.piStopReason = pi;
    if (pi === "error") reply.fail(`Provider stopped with: ${candidate.finishReason}`, false);
  }
}
