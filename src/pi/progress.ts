// Pi's events as the few steps a person follows a run by: a turn starts, a tool starts or ends, the
// model replies. The CLI renders these and never reads Pi's event shapes itself. Every string here
// comes from the model or the sandbox: renderers must treat it as hostile (cli/terminal-text.ts).

import { reportedCount } from "../util/reported-count.js";
import { asAssistantMessageEnd, asToolExecutionEnd, asToolExecutionStart, type PiEvent } from "./pi-events.js";

export type Progress =
  | { kind: "turn" }
  | { kind: "tool-start"; callId: string; tool: string; summary: string }
  | { kind: "tool-end"; callId: string; tool: string; failed: boolean }
  /** `failed`: the request failed (Pi's error message, at most 200 characters); Pi may retry it. */
  | { kind: "model-reply"; tokens: number; costUsd: number; failed?: string };

export function progressOf(event: PiEvent): Progress | undefined {
  switch (event.type) {
    case "turn_start":
      return { kind: "turn" };
    case "tool_execution_start": {
      const start = asToolExecutionStart(event);
      return (
        start && {
          kind: "tool-start",
          callId: start.toolCallId,
          tool: start.toolName,
          summary: summarizeArgs(start.args),
        }
      );
    }
    case "tool_execution_end": {
      const end = asToolExecutionEnd(event);
      return end && { kind: "tool-end", callId: end.toolCallId, tool: end.toolName, failed: end.isError };
    }
    case "message_end": {
      const message = asAssistantMessageEnd(event)?.message;
      if (!message) return undefined;
      const reply = {
        kind: "model-reply" as const,
        // Pi's report, which the sandbox can write (util/reported-count.ts).
        tokens: reportedCount(message.usage.totalTokens),
        costUsd: reportedCount(message.usage.cost.total),
      };
      // A failed request is a message too (stopReason "error"): not a reply (review, session 27: an
      // unreachable server read as four turns of "model replied (0 tokens)").
      if (message.stopReason !== "error") return reply;
      return { ...reply, failed: (message.errorMessage ?? "no message").slice(0, 200) };
    }
    default:
      return undefined;
  }
}

/** A one-line summary of a tool call's arguments: the command, path or pattern, else the JSON. */
export function summarizeArgs(args: unknown, max = 80): string {
  if (!args || typeof args !== "object") return "";
  const a = args as Record<string, unknown>;
  const main = a.command ?? a.path ?? a.pattern ?? a.file_path;
  const text = typeof main === "string" ? main : JSON.stringify(args);
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > max ? `${oneLine.slice(0, max - 1)}…` : oneLine;
}
