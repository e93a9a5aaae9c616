// openai-responses as OpenAI sends it: named events (response.created, output_item.added,
// content_part/output_text deltas, function_call_arguments deltas, output_item.done, ...) with
// sequence numbers, ending with response.completed; or one `response` object when not streaming.
import type http from "node:http";
import { argumentsText, inTwo } from "./script.js";
import { forever, type ReplyContext, sendJson, startEventStream, type WireFormat } from "./wire-format.js";

export const openAiResponsesWire: WireFormat = {
  api: "openai-responses",
  basePath: "/openai-responses/v1",
  route: (method, subpath) =>
    method === "POST" && subpath === "/responses"
      ? "generate"
      : method === "GET" && subpath === "/models"
        ? "list-models"
        : undefined,
  modelOf: (_subpath, body) => (typeof body.model === "string" ? body.model : undefined),
  streams: (_subpath, body) => body.stream === true,
  errorBody: (status, message) => ({
    error: { message, type: status >= 500 ? "server_error" : "invalid_request_error", code: null },
  }),
  modelList: (ids) => ({ object: "list", data: ids.map((id) => ({ id, object: "model" })) }),
  writeReply,
};

type Item = Record<string, unknown>;

function outputItems({ step, seq }: ReplyContext): Item[] {
  if ("text" in step) {
    return [
      {
        id: `msg_${seq}`,
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: step.text, annotations: [] }],
      },
    ];
  }
  if (!("toolCalls" in step)) return [];
  return step.toolCalls.map((call, i) => ({
    id: `fc_${seq}_${i}`,
    type: "function_call",
    status: "completed",
    arguments: argumentsText(call.arguments),
    call_id: `call_${seq}_${i}`,
    name: call.name,
  }));
}

function responseObject(context: ReplyContext, status: string, output: Item[]) {
  return {
    id: `resp_${context.seq}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    error: null,
    incomplete_details: null,
    model: context.model,
    output,
    usage:
      status === "completed"
        ? {
            input_tokens: 100,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: 20,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: 120,
          }
        : null,
  };
}

function writeReply(res: http.ServerResponse, context: ReplyContext): void {
  const items = outputItems(context);
  if (!context.stream) {
    sendJson(res, 200, responseObject(context, "completed", items));
    return;
  }
  const sendEvent = startEventStream(res);
  let sequence = 0;
  const send = (type: string, fields: object) => sendEvent({ type, sequence_number: sequence++, ...fields }, type);
  send("response.created", { response: responseObject(context, "in_progress", []) });
  send("response.in_progress", { response: responseObject(context, "in_progress", []) });
  if ("endless" in context.step) {
    const item = { id: `msg_${context.seq}`, type: "message", status: "in_progress", role: "assistant", content: [] };
    send("response.output_item.added", { output_index: 0, item });
    forever(res, () =>
      send("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: "and on " }),
    );
    return;
  }
  items.forEach((item, output_index) => {
    if (item.type === "message") writeMessage(send, item, output_index);
    else writeFunctionCall(send, item, output_index);
  });
  send("response.completed", { response: responseObject(context, "completed", items) });
  res.end();
}

type Send = (type: string, fields: object) => void;

function writeMessage(send: Send, item: Item, output_index: number): void {
  const text = (item.content as Array<{ text: string }>)[0]!.text;
  const item_id = item.id;
  send("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } });
  const part = { type: "output_text", text: "", annotations: [] };
  send("response.content_part.added", { item_id, output_index, content_index: 0, part });
  for (const delta of inTwo(text))
    send("response.output_text.delta", { item_id, output_index, content_index: 0, delta });
  send("response.output_text.done", { item_id, output_index, content_index: 0, text });
  send("response.content_part.done", { item_id, output_index, content_index: 0, part: { ...part, text } });
  send("response.output_item.done", { output_index, item });
}

function writeFunctionCall(send: Send, item: Item, output_index: number): void {
  const args = item.arguments as string;
  send("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } });
  for (const delta of inTwo(args))
    send("response.function_call_arguments.delta", { item_id: item.id, output_index, delta });
  send("response.function_call_arguments.done", { item_id: item.id, output_index, arguments: args });
  send("response.output_item.done", { output_index, item });
}
