// Live progress for a terminal: finished steps scroll above one status line that is
// redrawn in place (elapsed time, turn, the tool running now, tokens, cost). Colour unless
// NO_COLOR is set. CI logs get the plain line-per-event reporter instead. Everything the model or
// the sandbox chose goes through terminalLine before it reaches the terminal.
import type { RunEvent } from "../index.js";
import { TRIP_LABELS } from "./progress-reporter.js";
import { terminalLine as t } from "./terminal-text.js";

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
        else if (event.type === "limit.tripped")
          above(s.red(`✗ ${TRIP_LABELS[String(d.code)] ?? "limit"}: ${t(d.message)}`));
        else if (event.type === "gateway.refused") above(s.red(`✗ gateway refused ${t(d.method)} ${t(d.path)}`));
        else if (event.type === "egress.denied") above(s.red(`✗ egress denied: ${t(d.host)}`));
        else if (event.type === "egress.failed") above(s.red(`✗ egress failed: ${t(d.host)} (${t(d.reason)})`));
        redraw();
        return;
      }
      const step = event.progress;
      switch (step?.kind) {
        case "turn":
          turn++;
          phase = "thinking";
          break;
        case "tool-start":
          tools.set(step.callId, { name: t(step.tool), args: t(step.summary).slice(0, 60), at: Date.now() });
          break;
        case "tool-end": {
          const tool = tools.get(step.callId);
          tools.delete(step.callId);
          const took = tool ? `${((Date.now() - tool.at) / 1000).toFixed(2)}s` : "";
          const mark = step.failed ? s.red("✗") : s.green("✓");
          above(`${mark} ${s.bold(t(step.tool))} ${s.dim(tool?.args ?? "")} ${s.dim(took)}`);
          phase = "thinking";
          break;
        }
        case "model-reply":
          tokens += step.tokens;
          cost += step.costUsd;
          if (step.failed !== undefined) above(s.red(`✗ model request failed: ${t(step.failed)}`));
          break;
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
