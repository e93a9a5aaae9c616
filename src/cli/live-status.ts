// Live progress for a terminal: finished steps scroll above one status line that is
// redrawn in place (elapsed time, turn, the tool running now, tokens, cost). Colour unless
// NO_COLOR is set. CI logs get the plain line-per-event reporter instead.
import type { RunEvent } from "../run/run-events.js";
import { summarizeArgs } from "./progress-reporter.js";

interface Style {
  dim: (s: string) => string;
  bold: (s: string) => string;
  green: (s: string) => string;
  red: (s: string) => string;
  cyan: (s: string) => string;
}

function style(color: boolean): Style {
  const wrap = (open: number, close: number) => (s: string) => (color ? `\x1b[${open}m${s}\x1b[${close}m` : s);
  return { dim: wrap(2, 22), bold: wrap(1, 22), green: wrap(32, 39), red: wrap(31, 39), cyan: wrap(36, 39) };
}

export interface LiveStatus {
  onEvent(event: RunEvent): void;
  /** Clears the status line; call before printing the result or an error. */
  stop(): void;
}

export function createLiveStatus(
  write: (s: string) => void,
  options: { color: boolean; columns?: number },
): LiveStatus {
  const s = style(options.color);
  const columns = Math.max(40, options.columns ?? 100);
  const started = Date.now();
  const tools = new Map<string, { name: string; args: string; at: number }>();
  let turn = 0;
  let tokens = 0;
  let cost = 0;
  let phase = "starting sandbox";
  let stopped = false;

  const statusLine = () => {
    const elapsed = ((Date.now() - started) / 1000).toFixed(1);
    const running = [...tools.values()].at(-1);
    const doing = running ? `${running.name} ${s.dim(running.args)}` : phase;
    const usage = tokens ? s.dim(` · ${tokens} tok${cost ? ` · $${cost.toFixed(4)}` : ""}`) : "";
    return `${s.cyan("●")} ${elapsed}s ${s.dim(turn ? `turn ${turn}` : "")} ${doing}${usage}`;
  };
  const redraw = () => {
    if (stopped) return;
    write(`\r\x1b[K${truncate(statusLine(), columns + 40)}`);
  };
  const above = (line: string) => {
    if (stopped) return;
    write(`\r\x1b[K${line}\n`);
    redraw();
  };
  const timer = setInterval(redraw, 100);
  timer.unref();

  return {
    onEvent(event) {
      const d = event.data;
      if (event.source === "sandbox") {
        if (event.type === "container.started") phase = "Pi starting";
        else if (event.type === "limit.tripped") above(s.red(`✗ limit: ${String(d.message)}`));
        else if (event.type === "gateway.refused")
          above(s.red(`✗ gateway refused ${String(d.method)} ${String(d.path)}`));
        else if (event.type === "egress.denied") above(s.red(`✗ egress denied: ${String(d.host)}`));
        redraw();
        return;
      }
      switch (event.type) {
        case "turn_start":
          turn++;
          phase = "thinking";
          break;
        case "tool_execution_start":
          tools.set(String(d.toolCallId), {
            name: String(d.toolName),
            args: summarizeArgs(d.args, 60),
            at: Date.now(),
          });
          break;
        case "tool_execution_end": {
          const tool = tools.get(String(d.toolCallId));
          tools.delete(String(d.toolCallId));
          const took = tool ? `${((Date.now() - tool.at) / 1000).toFixed(2)}s` : "";
          const mark = d.isError ? s.red("✗") : s.green("✓");
          above(`${mark} ${s.bold(String(d.toolName))} ${s.dim(tool?.args ?? "")} ${s.dim(took)}`);
          phase = "thinking";
          break;
        }
        case "message_end": {
          const message = d.message as
            | { role?: string; usage?: { totalTokens?: number; cost?: { total?: number } } }
            | undefined;
          if (message?.role === "assistant" && message.usage) {
            tokens += message.usage.totalTokens ?? 0;
            cost += message.usage.cost?.total ?? 0;
          }
          break;
        }
      }
      redraw();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      write("\r\x1b[K");
    },
  };
}

function truncate(line: string, max: number): string {
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
