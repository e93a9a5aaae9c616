// mistral-conversations as Mistral's chat completions endpoint sends it: chat.completion.chunk
// events whose tool calls come whole (9-character ids, arguments as text), usage in the last
// chunk with the finish reason, then `data: [DONE]`; or one chat.completion when not streaming.
import type http from "node:http";
import { argumentsText, inTwo, type ToolCallStep } from "./script.js";
import { forever, type ReplyContext, sendJson, startEventStream, type WireFormat } from "./wire-format.js";

const USAGE = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };

export const mistralConversationsWire: WireFormat = {
  api: "mistral-conversations",
  basePath: "/mistral",
  route: (method, subpath) => (method === "POST" && subpath === "/v1/chat/completions" ? "generate" : undefined),
  modelOf: (_subpath, body) => (typeof body.model === "string" ? body.model : undefined),
  streams: (_subpath, body) => body.stream === true,
  errorBody: (_status, message) => ({
    object: "error",
    message,
    type: "invalid_request_error",
    param: null,
    code: null,
  }),
  writeReply,
};

/** Mistral's call ids are 9 letters and digits. */
function callId(seq: number, index: number): string {
  return `c${String(seq).padStart(5, "0")}x${String(index).padStart(2, "0")}`.slice(-9).padStart(9, "m");
}

function toolCallsOf(step: ToolCallStep, seq: number) {
  return step.toolCalls.map((call, index) => ({
    id: callId(seq, index),
    type: "function",
    function: { name: call.name, arguments: argumentsText(call.arguments) },
    index,
  }));
}

function writeReply(res: http.ServerResponse, { model, step, stream, seq }: ReplyContext): void {
  const id = `cmpl-${seq}`;
  const created = Math.floor(Date.now() / 1000);
  if (!stream) {
    const message =
      "text" in step
        ? { role: "assistant", content: step.text, tool_calls: null }
        : { role: "assistant", content: "", tool_calls: "toolCalls" in step ? toolCallsOf(step, seq) : null };
    const finish_reason = "toolCalls" in step ? "tool_calls" : "stop";
    sendJson(res, 200, {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message, finish_reason }],
      usage: USAGE,
    });
    return;
  }
  const send = startEventStream(res);
  const chunk = (delta: object, finish: string | null, usage?: object) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  });
  send(chunk({ role: "assistant", content: "" }, null));
  if ("endless" in step) {
    forever(res, () => send(chunk({ content: "and on " }, null)));
    return;
  }
  if ("text" in step) {
    for (const piece of inTwo(step.text)) send(chunk({ content: piece }, null));
    send(chunk({ content: "" }, "stop", USAGE));
  } else {
    send(chunk({ tool_calls: "toolCalls" in step ? toolCallsOf(step, seq) : [] }, null));
    send(chunk({ content: "" }, "tool_calls", USAGE));
  }
  res.end("data: [DONE]\n\n");
}
