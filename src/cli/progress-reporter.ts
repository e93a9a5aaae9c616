// Plain one-line-per-event progress on stderr: what the agent is doing, readable in a CI log.
import type { RunEvent } from "../run/run-events.js";

export function createProgressReporter(write: (line: string) => void): (event: RunEvent) => void {
  const toolStarts = new Map<string, number>();
  let turns = 0;
  const stamp = (event: RunEvent) => `[${(event.time / 1000).toFixed(1).padStart(5)}s]`;
  return (event) => {
    const d = event.data;
    if (event.source === "sandbox") {
      if (event.type === "container.started")
        write(`${stamp(event)} sandbox started (${String(d.containerId).slice(0, 12)})`);
      else if (event.type === "limit.tripped") write(`${stamp(event)} limit: ${String(d.message)}`);
      else if (event.type === "egress.denied")
        write(`${stamp(event)} egress denied: ${String(d.host)}:${String(d.port)} (${String(d.reason)})`);
      else if (event.type === "container.exited") {
        write(
          `${stamp(event)} ${d.stoppedByHost ? "sandbox stopped: Pi had finished" : `sandbox exited (code ${String(d.exitCode)})`}`,
        );
      } else if (event.type === "gateway.refused")
        write(`${stamp(event)} gateway refused ${String(d.method)} ${String(d.path)}: ${String(d.refused)}`);
      return;
    }
    if (event.type === "turn_start") write(`${stamp(event)} turn ${++turns}`);
    else if (event.type === "message_end") {
      const message = d.message as
        | { role?: string; usage?: { totalTokens?: number; cost?: { total?: number } } }
        | undefined;
      if (message?.role === "assistant" && message.usage) {
        const cost = message.usage.cost?.total ? `, $${message.usage.cost.total.toFixed(4)}` : "";
        write(`${stamp(event)}   model replied (${message.usage.totalTokens ?? 0} tokens${cost})`);
      }
    } else if (event.type === "tool_execution_start") {
      toolStarts.set(String(d.toolCallId), event.time);
      write(`${stamp(event)}   ${String(d.toolName)} ${summarizeArgs(d.args)}`);
    } else if (event.type === "tool_execution_end") {
      const began = toolStarts.get(String(d.toolCallId)) ?? event.time;
      const mark = d.isError ? "failed" : "done";
      write(`${stamp(event)}   ${String(d.toolName)} ${mark} in ${((event.time - began) / 1000).toFixed(2)}s`);
    }
  };
}

export function summarizeArgs(args: unknown, max = 80): string {
  if (!args || typeof args !== "object") return "";
  const a = args as Record<string, unknown>;
  const main = a.command ?? a.path ?? a.pattern ?? a.file_path;
  const text = typeof main === "string" ? main : JSON.stringify(args);
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > max ? `${oneLine.slice(0, max - 1)}…` : oneLine;
}
