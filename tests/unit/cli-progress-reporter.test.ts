// The plain progress lines a CI log shows, one per event that matters.
import { describe, expect, it } from "vitest";
import { createProgressReporter, summarizeArgs } from "../../src/cli/progress-reporter.js";
import type { RunEvent } from "../../src/run/run-events.js";

let seq = 0;
const ev = (source: RunEvent["source"], type: string, time: number, data: Record<string, unknown> = {}): RunEvent => ({
  runId: "r",
  seq: seq++,
  time,
  source,
  type,
  data,
});

function linesFor(events: RunEvent[]): string[] {
  const lines: string[] = [];
  const report = createProgressReporter((line) => lines.push(line));
  for (const event of events) report(event);
  return lines;
}

describe("progress reporter", () => {
  it("writes a readable line per step of a run, with tool durations", () => {
    expect(
      linesFor([
        ev("sandbox", "container.started", 100, { containerId: "0123456789abcdef" }),
        ev("pi", "turn_start", 400),
        ev("pi", "message_end", 450, {
          message: { role: "assistant", usage: { totalTokens: 120, cost: { total: 0.0012 } } },
        }),
        ev("pi", "tool_execution_start", 460, {
          toolCallId: "t1",
          toolName: "bash",
          args: { command: "npm   test\n  --silent" },
        }),
        ev("pi", "tool_execution_end", 1710, { toolCallId: "t1", toolName: "bash", isError: true }),
        ev("sandbox", "gateway.refused", 1800, {
          method: "POST",
          path: "/x/chat/completions",
          refused: "the run's budget of 3 model responses is spent",
        }),
        ev("sandbox", "container.exited", 1900, { exitCode: 137, oomKilled: false, stoppedByHost: true }),
      ]),
    ).toEqual([
      "[  0.1s] sandbox started (0123456789ab)",
      "[  0.4s] turn 1",
      "[  0.5s]   model replied (120 tokens, $0.0012)",
      "[  0.5s]   bash npm test --silent",
      "[  1.7s]   bash failed in 1.25s",
      "[  1.8s] gateway refused POST /x/chat/completions: the run's budget of 3 model responses is spent",
      "[  1.9s] sandbox stopped: Pi had finished",
    ]);
  });

  it("reports a container that exited by itself with its exit code", () => {
    expect(linesFor([ev("sandbox", "container.exited", 2000, { exitCode: 1, oomKilled: false })])).toEqual([
      "[  2.0s] sandbox exited (code 1)",
    ]);
  });

  it("shortens long arguments to one line", () => {
    expect(summarizeArgs({ path: "a".repeat(200) }, 10)).toBe(`${"a".repeat(9)}…`);
    expect(summarizeArgs({ other: 1 })).toBe('{"other":1}');
  });
});
