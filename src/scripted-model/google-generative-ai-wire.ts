// google-generative-ai as the Gemini API sends it: with `alt=sse`, one GenerateContentResponse
// per `data:` event, separated by CRLF CRLF, the last carrying finishReason; function calls
// come whole (name + args object, no id, like Gemini 2.x). Without streaming, one response.
import type http from "node:http";
import { inTwo } from "./script.js";
import { forever, type ReplyContext, sendJson, startEventStream, type WireFormat } from "./wire-format.js";

const GENERATE = /^\/models\/([^/:]+):(streamGenerateContent|generateContent)$/;

export const googleGenerativeAiWire: WireFormat = {
  api: "google-generative-ai",
  basePath: "/google/v1beta",
  route: (method, subpath) => (method === "POST" && GENERATE.test(subpath) ? "generate" : undefined),
  modelOf: (subpath) => {
    const id = GENERATE.exec(subpath)?.[1];
    return id;
  },
  streams: (subpath) => GENERATE.exec(subpath)?.[2] === "streamGenerateContent",
  errorBody: (status, message) => ({
    error: {
      code: status,
      message,
      status: status === 429 ? "RESOURCE_EXHAUSTED" : status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT",
    },
  }),
  writeReply,
};

function chunk(context: ReplyContext, parts: unknown[], finishReason?: string) {
  return {
    candidates: [{ content: { parts, role: "model" }, ...(finishReason ? { finishReason } : {}), index: 0 }],
    usageMetadata: {
      promptTokenCount: 100,
      candidatesTokenCount: finishReason ? 20 : 5,
      totalTokenCount: finishReason ? 120 : 105,
    },
    modelVersion: context.model,
    responseId: `resp-${context.seq}`,
  };
}

function writeReply(res: http.ServerResponse, context: ReplyContext): void {
  const { step } = context;
  const calls =
    "toolCalls" in step
      ? step.toolCalls.map((call) => ({ functionCall: { name: call.name, args: argsObject(call.arguments) } }))
      : [];
  if (!context.stream) {
    sendJson(res, 200, chunk(context, "text" in step ? [{ text: step.text }] : calls, "STOP"));
    return;
  }
  const send = startEventStream(res, "\r\n\r\n");
  if ("endless" in step) {
    forever(res, () => send(chunk(context, [{ text: "and on " }])));
    return;
  }
  if ("text" in step) {
    const pieces = inTwo(step.text);
    pieces.forEach((text, i) => {
      send(chunk(context, [{ text }], i === pieces.length - 1 ? "STOP" : undefined));
    });
  } else {
    send(chunk(context, calls, "STOP"));
  }
  res.end();
}

/** Gemini sends arguments as an object; a raw string step is sent as the object it parses to. */
function argsObject(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}
