// Live progress for a terminal: finished steps scroll above one status line that is
// redrawn in place (elapsed time, turn, the tool running now, tokens, cost). Colour unless
// NO_COLOR is set. CI logs get the plain line-per-event reporter instead. Everything the model or
// the sandbox chose goes through terminalLine before it reaches the terminal.
import type { RunEvent } from "../index.js";
import { TRIP_LABELS } from "./progress-reporter.js";
import { terminalLine as t } from "./terminal-text.js";
import { isHostEvent } from "./warning-events.js";

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
    write(`\r\x1b[K${fitToColumns(statusLine(), columns)}`);
  };
  const above = (line: string) => {
    if (stopped) return;
    // Cut as the status line is: wrapped, the sandbox's text would start a row of its own at column 0.
    write(`\r\x1b[K${fitToColumns(line, columns)}\n`);
    redraw();
  };
  const timer = setInterval(redraw, 100);
  timer.unref();

  return {
    onEvent(event) {
      const d = event.data;
      if (isHostEvent(event)) {
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

/** The colour codes the status line holds (style() makes them): they take no cell. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching the status line's own colour codes is the point
const COLOURS = /\x1b\[[0-9;]*m/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the same codes, kept by the split
const COLOUR_SPLIT = /(\x1b\[[0-9;]*m)/;

/**
 * The status line cut to fewer cells than the terminal's columns: a line that wraps is not redrawn
 * in place (`\r\x1b[K` clears only its last row), so every redraw left a row behind and the screen
 * scrolled ten rows a second, pushing the "✗ egress denied" lines out of view (red-team review,
 * round 3, session 41: a tool's arguments in fullwidth characters). Colour codes count as no cell,
 * and every character from U+1100 on as two: wide East Asian characters and emoji take two, and
 * the few narrow ones counted so only cut the line a little early.
 */
export function fitToColumns(line: string, columns: number): string {
  const cells = (ch: string) => (ch.codePointAt(0)! >= 0x1100 ? 2 : 1);
  let total = 0;
  for (const ch of line.replace(COLOURS, "")) total += cells(ch);
  if (total < columns) return line;
  // Two cells kept for the ellipsis (one, but two where East Asian locales draw it wide).
  const room = columns - 3;
  let used = 0;
  let out = "";
  const coloured = line.includes("\x1b[");
  for (const part of line.split(COLOUR_SPLIT)) {
    if (part.startsWith("\x1b[")) {
      out += part;
      continue;
    }
    for (const ch of part) {
      if (used + cells(ch) > room) return `${out}…${coloured ? "\x1b[0m" : ""}`;
      used += cells(ch);
      out += ch;
    }
  }
  return out;
}
