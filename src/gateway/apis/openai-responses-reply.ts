// openai-responses replies, as Pi 1.6.0 reads them (api/openai-responses-shared.js
// processResponsesStream, over the openai SDK's Stream): every event is JSON; `event: error`, a
// `data.error`, an `error` event and `response.failed` fail. Each `message` output item is one
// text block (its deltas, then the text of output_item.done); each `function_call` item is one
// tool call whose id is `call_id|item_id`, whose arguments are the last full text given
// (output_item.done, else function_call_arguments.done, else the deltas).
// response.completed/incomplete is required; status completed -> stop (toolUse when the reply
// has tool calls), incomplete -> length for max_output_tokens, else error.

import { isRecord, type JsonRecord, stringOr } from "./codec-support.js";
import type { PiStopReason, ReplyLimits, ReplyParser } from "./codec-types.js";
import { errorText } from "./openai-completions.js";
import { createReplyParser, parseEventJson } from "./reply-support.js";

function mapResponsesStatus(status: unknown, reason: string | undefined): { pi: PiStopReason; error?: string } {
  if (!status) return { pi: "stop" };
  switch (status) {
    case "completed":
    case "in_progress":
    case "queued":
      return { pi: "stop" };
    case "incomplete":
      if (reason === "max_output_tokens") return { pi: "length" };
      return {
        pi: "error",
        error: reason ? `Response incomplete: ${reason}` : "Response incomplete without a provider reason",
      };
    case "failed":
    case "cancelled":
      return { pi: "error", error: "An unknown error occurred" };
    default:
      throw new Error(`Unhandled stop reason: ${String(status)}`);
  }
}

type Slot = { kind: "text"; handle: number } | { kind: "tool" | "custom"; handle: number } | { kind: "thinking" };

// One closure on purpose: the stream's events update shared slots (text, tool calls, thinking) in
// arrival order; splitting its switch would spread that state over functions that all need it.
export function responsesReplyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser {
  return createReplyParser(contentType, limits, (reply) => {
    const slots = new Map<unknown, Slot>();
    const unfinished = new Set<number>();
    // Custom (grammar) tool input is raw text; Pi keeps it as `{ input: text }` (its property
    // name may differ when the tool declares one; the gateway's tools never do).
    const customInputs = new Map<number, string>();
    const setCustomInput = (handle: number, input: string) => {
      customInputs.set(handle, input);
      reply.setArgs(handle, JSON.stringify({ input }));
    };
    let terminal = false;

    const createSlot = (index: unknown, item: JsonRecord): Slot | undefined => {
      let slot: Slot | undefined;
      if (item.type === "reasoning") slot = { kind: "thinking" };
      else if (item.type === "message") slot = { kind: "text", handle: reply.openText() };
      else if (item.type === "function_call" || item.type === "custom_tool_call") {
        const id = `${stringOr(item.call_id, "undefined")}|${stringOr(item.id, "undefined")}`;
        const handle = reply.openToolCall(id, stringOr(item.name));
        if (item.type === "function_call" && item.arguments) reply.appendArgs(handle, stringOr(item.arguments));
        if (item.type === "custom_tool_call") setCustomInput(handle, stringOr(item.input));
        unfinished.add(handle);
        slot = { kind: item.type === "function_call" ? "tool" : "custom", handle };
      }
      if (slot) slots.set(index, slot);
      return slot;
    };

    const onItemDone = (index: unknown, item: JsonRecord) => {
      const slot = slots.get(index) ?? createSlot(index, item);
      if (item.type === "reasoning" && slot?.kind === "thinking") slots.delete(index);
      else if (item.type === "message" && slot?.kind === "text") {
        const content = Array.isArray(item.content) ? item.content : [];
        const text = content
          .map((c) => (isRecord(c) ? stringOr(c.type === "output_text" ? c.text : c.refusal) : ""))
          .join("");
        reply.setText(slot.handle, text);
        slots.delete(index);
      } else if (item.type === "function_call" && slot?.kind === "tool") {
        if (item.arguments) reply.setArgs(slot.handle, stringOr(item.arguments));
        unfinished.delete(slot.handle);
        slots.delete(index);
      } else if (item.type === "custom_tool_call" && slot?.kind === "custom") {
        if (typeof item.input === "string") setCustomInput(slot.handle, item.input);
        unfinished.delete(slot.handle);
        slots.delete(index);
      }
    };

    const finalize = (response: unknown) => {
      terminal = true;
      const body = isRecord(response) ? response : {};
      const details = isRecord(body.incomplete_details) ? body.incomplete_details : {};
      const reason = typeof details.reason === "string" ? details.reason : undefined;
      const mapped = mapResponsesStatus(body.status, reason);
      if (body.status !== undefined)
        reply.stopReason = reason ? `${String(body.status)}.${reason}` : String(body.status);
      let pi = mapped.pi;
      if (pi === "stop" && reply.toolCallCount > 0) pi = "toolUse";
      reply.piStopReason = pi;
      if (mapped.error) reply.fail(mapped.error, false);
    };

    const onEvent = (event: JsonRecord) => {
      const slot = slots.get(event.output_index);
      switch (event.type) {
        case "response.output_item.added":
          if (isRecord(event.item)) createSlot(event.output_index, event.item);
          return;
        case "response.output_text.delta":
        case "response.refusal.delta":
          if (slot?.kind === "text") reply.appendText(slot.handle, stringOr(event.delta));
          return;
        case "response.function_call_arguments.delta":
          if (slot?.kind === "tool") reply.appendArgs(slot.handle, stringOr(event.delta));
          return;
        case "response.function_call_arguments.done":
          if (slot?.kind !== "tool") return;
          if (typeof event.arguments !== "string") throw new Error("function_call_arguments.done without arguments");
          reply.setArgs(slot.handle, event.arguments);
          return;
        case "response.custom_tool_call_input.delta":
          if (slot?.kind === "custom")
            setCustomInput(slot.handle, (customInputs.get(slot.handle) ?? "") + stringOr(event.delta));
          return;
        case "response.output_item.done":
          if (isRecord(event.item)) onItemDone(event.output_index, event.item);
          return;
        case "response.completed":
        case "response.incomplete":
          finalize(event.response);
          return;
        case "error":
          throw new Error(`Error Code ${String(event.code)}: ${String(event.message)}`);
        case "response.failed":
          throw new Error(failureText(event.response));
      }
    };

    return {
      onEvent(sse) {
        const data = parseEventJson(sse.data, "event");
        if (sse.event === "error") throw new Error(errorText(isRecord(data) ? (data.error ?? data) : data));
        if (isRecord(data) && data.error) throw new Error(errorText(data.error));
        if (isRecord(data)) onEvent(data);
      },
      onJson(value) {
        if (!isRecord(value)) throw new Error("the response is not a JSON object");
        if (value.error) throw new Error(errorText(value.error));
        if (value.status === "failed") throw new Error(failureText(value));
        (Array.isArray(value.output) ? value.output : []).forEach((item, index) => {
          if (isRecord(item)) onItemDone(index, item);
        });
        finalize(value);
      },
      finish() {
        if (!terminal) reply.fail("OpenAI Responses stream ended before a terminal response event");
        else if (reply.piStopReason === "toolUse" && unfinished.size > 0)
          reply.fail("OpenAI Responses stream completed with an unfinished tool call");
        else reply.complete = true;
        return reply.finish();
      },
    };
  });
}

function failureText(response: unknown): string {
  const body = isRecord(response) ? response : {};
  const error = isRecord(body.error) ? body.error : undefined;
  const details = isRecord(body.incomplete_details) ? body.incomplete_details : undefined;
  if (error) return `${stringOr(error.code) || "unknown"}: ${stringOr(error.message) || "no message"}`;
  if (details?.reason) return `incomplete: ${String(details.reason)}`;
  return "Unknown error (no error details in response)";
}
