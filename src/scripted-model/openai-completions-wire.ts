// openai-completions as OpenAI sends it: `chat.completion.chunk` events, tool calls by index,
// a usage chunk, then `data: [DONE]`; or one `chat.completion` when not streaming.
import type http from "node:http";
import { argumentsText, inTwo, type ToolCallStep } from "./script.js";
import { forever, type ReplyContext, sendJson, startEventStream, type WireFormat } from "./wire-format.js";

const USAGE = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };

export const openAiCompletionsWire: WireFormat = {
  api: "openai-completions",
  basePath: "/v1",
  route: (method, subpath) =>
    method === "POST" && subpath === "/chat/completions"
      ? "generate"
      : method === "GET" && subpath === "/models"
        ? "list-models"
        : undefined,
  modelOf: (_subpath, body) => (typeof body.model === "string" ? body.model : undefined),
  streams: (_subpath, body) => body.stream !== false,
  errorBody: (_status, message) => ({ error: { message } }),
  modelList: (ids) => ({ object: "list", data: ids.map((id) => ({ id, object: "model" })) }),
  writeReply,
};

function toolCallsOf(step: ToolCallStep, seq: number) {
  return step.toolCalls.map((call, i) => ({
    id: call.id ?? `call_${seq}_${i}`,
    type: "function",
    function: { name: call.name, arguments: argumentsText(call.arguments) },
  }));
}

function writeReply(res: http.ServerResponse, { model, step, stream, seq }: ReplyContext): void {
  const id = `chatcmpl-${seq}`;
  const created = Math.floor(Date.now() / 1000);
  if (!stream) {
    const message =
      "text" in step
        ? { role: "assistant", content: step.text }
        : "toolCalls" in step
          ? { role: "assistant", content: step.preamble ?? null, tool_calls: toolCallsOf(step, seq) }
          : { role: "assistant", content: "" };
    sendJson(res, 200, {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message, finish_reason: "toolCalls" in step ? "tool_calls" : "stop" }],
      usage: USAGE,
    });
    return;
  }
  const send = startEventStream(res);
  const chunk = (delta: object, finish: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  send(chunk({ role: "assistant", content: "" }, null));
  if ("endless" in step) {
    forever(res, () => send(chunk({ content: "and on " }, null)));
    return;
  }
  if ("text" in step) {
    for (const piece of inTwo(step.text)) send(chunk({ content: piece }, null));
    send(chunk({}, "stop"));
  } else {
    if (step.preamble) for (const piece of inTwo(step.preamble)) send(chunk({ content: piece }, null));
    toolCallsOf(step, seq).forEach((call, index) => {
      const [head, tail] = inTwo(call.function.arguments);
      send(chunk({ tool_calls: [{ index, ...call, function: { ...call.function, arguments: head } }] }, null));
      if (tail !== undefined) send(chunk({ tool_calls: [{ index, function: { arguments: tail } }] }, null));
    });
    send(chunk({}, "tool_calls"));
  }
  send({ id, object: "chat.completion.chunk", created, model, choices: [], usage: USAGE });
  res.end("data: [DONE]\n\n");
}
