// `sandbox-run batch`'s progress on stderr: on a terminal, finished tasks scroll above one bar that
// is redrawn in place (done, failed, running, ETA); elsewhere (a CI log), one plain line per task
// start and end. Task ids are the caller's, messages may quote the sandbox: all go through
// terminalLine.
import { terminalLine as t } from "./terminal-text.js";

interface BatchProgress {
  started(id: string): void;
  finished(id: string, outcome: { ok: boolean; ms: number; warm?: boolean; error?: string }): void;
  /** A line about the batch as a whole (e.g. a warm sandbox discarded), above the bar on a terminal. */
  note(text: string): void;
  /** Clears the bar (a terminal) and writes the summary line. */
  stop(summary: string): void;
}

export function createBatchProgress(
  write: (text: string) => void,
  options: { total: number; tty: boolean; columns?: number; color?: boolean; now?: () => number },
): BatchProgress {
  const now = options.now ?? (() => Date.now());
  const started = now();
  const running = new Set<string>();
  let done = 0;
  let failed = 0;
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
  const stamp = () => `[${seconds(now() - started).padStart(7)}]`;
  const paint = (code: number, text: string) => (options.color ? `\x1b[${code}m${text}\x1b[39m` : text);

  const bar = (): string => {
    const columns = Math.max(40, options.columns ?? 80);
    const finished = done + failed;
    const elapsed = now() - started;
    const eta =
      finished > 0 && finished < options.total ? (elapsed / finished) * (options.total - finished) : undefined;
    const text = ` ${finished}/${options.total} · ${done} done · ${failed} failed · ${running.size} running${eta === undefined ? "" : ` · ETA ${clock(eta)}`}`;
    const width = Math.max(10, Math.min(30, columns - text.length - 3));
    const filled = Math.round((finished / options.total) * width);
    return `[${"#".repeat(filled)}${"-".repeat(width - filled)}]${text}`.slice(0, columns - 1);
  };
  const redraw = () => {
    if (options.tty) write(`\r\x1b[K${bar()}`);
  };
  const line = (text: string) => {
    if (options.tty) write(`\r\x1b[K${text}\n${bar()}`);
    else write(`${stamp()} ${text}\n`);
  };

  return {
    started(id) {
      running.add(id);
      if (options.tty) redraw();
      else line(`${t(id)}: started`);
    },
    finished(id, outcome) {
      running.delete(id);
      if (outcome.ok) done++;
      else failed++;
      const warm = outcome.warm ? ", warm" : "";
      line(
        outcome.ok
          ? `${paint(32, "ok")} ${t(id)} in ${seconds(outcome.ms)}${warm}`
          : `${paint(31, "failed")} ${t(id)} after ${seconds(outcome.ms)}${warm}: ${t(outcome.error ?? "")}`,
      );
    },
    note(text) {
      line(paint(33, t(text)));
    },
    stop(summary) {
      write(options.tty ? `\r\x1b[K${summary}\n` : `${stamp()} ${summary}\n`);
    },
  };
}

function clock(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
