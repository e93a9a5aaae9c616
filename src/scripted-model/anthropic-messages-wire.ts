// anthropic-messages as Anthropic sends it: message_start, ping, content_block_start/_delta/
// _stop per block (text_delta, input_json_delta), message_delta with the stop reason and usage,
// message_stop; or one `message` object when not streaming.
import type http from "node:http";
import { argumentsText, inTwo } from "./script.js";
import { forever, type ReplyContext, sendJson, startEventStream, type WireFormat } from "./wire-format.js";

export const anthropicMessagesWire: WireFormat = {
  api: "anthropic-messages",
  basePath: "/anthropic",
  route: (method, subpath) => (method === "POST" && subpath === "/v1/messages" ? "generate" : undefined),
  modelOf: (_subpath, body) => (typeof body.model === "string" ? body.model : undefined),
  streams: (_subpath, body) => body.stream === true,
  errorBody: (status, message) => ({
    type: "error",
    error: {
      type: status === 429 ? "rate_limit_error" : status >= 500 ? "api_error" : "invalid_request_error",
      message,
    },
  }),
  writeReply,
};

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

function blocksOf({ step, seq }: ReplyContext): Block[] {
  if ("text" in step) return [{ type: "text", text: step.text }];
  if (!("toolCalls" in step)) return [];
  return step.toolCalls.map((call, i) => ({
    type: "tool_use",
    id: `toolu_${seq}_${i}`,
    name: call.name,
    // A string stands for raw arguments text (possibly not JSON); it only survives streaming.
    input: typeof call.arguments === "string" ? {} : call.arguments,
  }));
}

function message(context: ReplyContext, content: Block[], stopReason: string | null) {
  return {
    id: `msg_${context.seq}`,
    type: "message",
    role: "assistant",
    model: context.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { input_tokens: 100, output_tokens: stopReason ? 20 : 1 },
  };
}

function writeReply(res: http.ServerResponse, context: ReplyContext): void {
  const blocks = blocksOf(context);
  const stopReason = "toolCalls" in context.step ? "tool_use" : "end_turn";
  if (!context.stream) {
    sendJson(res, 200, message(context, blocks, stopReason));
    return;
  }
  const sendEvent = startEventStream(res);
  const send = (type: string, fields: object = {}) => sendEvent({ type, ...fields }, type);
  send("message_start", { message: message(context, [], null) });
  send("ping");
  if ("endless" in context.step) {
    send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    forever(res, () => send("content_block_delta", { index: 0, delta: { type: "text_delta", text: "and on " } }));
    return;
  }
  blocks.forEach((block, index) => {
    if (block.type === "text") {
      send("content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const text of inTwo(block.text)) send("content_block_delta", { index, delta: { type: "text_delta", text } });
    } else {
      send("content_block_start", { index, content_block: { ...block, input: {} } });
      const step = context.step as { toolCalls: Array<{ arguments: unknown }> };
      const json = argumentsText(step.toolCalls[index]!.arguments);
      for (const partial_json of ["", ...inTwo(json)])
        send("content_block_delta", { index, delta: { type: "input_json_delta", partial_json } });
    }
    send("content_block_stop", { index });
  });
  send("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 20 } });
  send("message_stop");
  res.end();
}
