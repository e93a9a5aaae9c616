// The plain progress lines a CI log shows, one per event that matters.
import { describe, expect, it } from "vitest";
import { createProgressReporter, sandboxLine } from "../../src/cli/progress-reporter.js";
import { progressOf, summarizeArgs } from "../../src/pi/progress.js";
import type { RunEvent } from "../../src/run/run-events.js";

let seq = 0;
/** An event as the run's timeline makes it: Pi's events carry their normalised step. */
const ev = (source: RunEvent["source"], type: string, time: number, data: Record<string, unknown> = {}): RunEvent => {
  const progress = source === "pi" ? progressOf({ type, ...data }) : undefined;
  return { runId: "r", seq: seq++, time, source, type, data, ...(progress ? { progress } : {}) };
};

const usage = (totalTokens: number, cost: number) => ({
  input: 100,
  output: 20,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens,
  cost: { total: cost },
});
const assistant = (totalTokens: number, cost: number) => ({
  message: {
    role: "assistant",
    content: [],
    stopReason: "toolUse",
    usage: usage(totalTokens, cost),
    provider: "p",
    model: "m",
  },
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
        ev("pi", "message_end", 450, assistant(120, 0.0012)),
        ev("pi", "tool_execution_start", 460, {
          toolCallId: "t1",
          toolName: "bash",
          args: { command: "npm   test\n  --silent" },
        }),
        ev("pi", "tool_execution_end", 1710, { toolCallId: "t1", toolName: "bash", isError: true, result: {} }),
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

  it("shows what the model or the sandbox chose with every control character escaped: no escape sequence reaches the terminal", () => {
    const osc52 = "\x1b]52;c;ZXZpbA==\x07";
    const lines = linesFor([
      ev("pi", "tool_execution_start", 100, {
        toolCallId: "t1",
        toolName: `bash${osc52}`,
        args: { command: "echo \x1b[2J\x1b[1;1Hcleared \u202egnp.exe" },
      }),
      ev("sandbox", "egress.denied", 200, { host: "evil\x1b[31m.test", port: 443, reason: "not allowed\x9b2J" }),
      ev("sandbox", "gateway.refused", 300, {
        method: "GET",
        path: "/x\r\x1b[A",
        refused: "unknown route",
        repeated: 7,
      }),
    ]);
    expect(lines).toEqual([
      "[  0.1s]   bash\\x1b]52;c;ZXZpbA==\\x07 echo \\x1b[2J\\x1b[1;1Hcleared \\u202egnp.exe",
      "[  0.2s] egress denied: evil\\x1b[31m.test:443 (not allowed\\x9b2J)",
      "[  0.3s] gateway refused GET /x\\x0d\\x1b[A: unknown route (and 7 more like it)",
    ]);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
    for (const line of lines) expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
  });
});

describe("a model request that failed", () => {
  it("says it failed with Pi's message, not that the model replied (review, session 27: an unreachable server read as four replies of 0 tokens)", () => {
    const failed = {
      message: {
        ...assistant(0, 0).message,
        stopReason: "error",
        errorMessage: "Connection error.\u001b[2J",
      },
    };
    expect(linesFor([ev("pi", "turn_start", 400), ev("pi", "message_end", 450, failed)])).toEqual([
      "[  0.4s] turn 1",
      "[  0.5s]   model request failed: Connection error.\\x1b[2J",
    ]);
  });
});

describe("an allowed host this machine could not reach", () => {
  it("gets a line of its own (review, session 27: pip showed only 502 Bad Gateway, the cause was in --events only)", () => {
    const line = sandboxLine("egress.failed", {
      host: "pypi.org",
      port: 443,
      reason: "pypi.org did not resolve (ENOTFOUND)",
      repeated: 6,
    });
    expect(line).toBe(
      "egress failed: pypi.org:443 (pypi.org did not resolve (ENOTFOUND); an allowed host this machine could not reach) (and 6 more like it)",
    );
  });
});

describe("a host-run file the run changed", () => {
  it("gets a line of its own (review: a planted .npmrc with node-options was in --json only)", () => {
    const line = sandboxLine("workspace.host-run-files", {
      count: 2,
      files: [{ path: ".npmrc", change: "created", why: "npm reads it" }],
    });
    expect(line).toBe(
      "note: the run left files, links or names that tools on this machine read, follow or misread: .npmrc and 1 more; review them before running such tools here",
    );
  });
});

describe("a hand-back that left entries the sandbox uid's (review, session 38)", () => {
  it("is a warning line; a container that could not be removed is the run's error and gets none", () => {
    expect(
      sandboxLine("workspace.still-lent", {
        reason: "r",
        warning: "what is at or below /w/sub may still be owned by 65532",
      }),
    ).toBe("warning: what is at or below /w/sub may still be owned by 65532");
    expect(sandboxLine("workspace.still-lent", { reason: "the container could not be removed" })).toBeUndefined();
  });
});

describe("what copy mode could not carry (review, session 29)", () => {
  it("a file not copied in and an entry left out of what came back each get a note; nothing, no line", () => {
    expect(
      sandboxLine("workspace.copied-in", {
        skipped: [
          { path: "secret.key", reason: "this user cannot read it" },
          { path: "dev.sock", reason: "it is not a file, directory or symbolic link" },
        ],
      }),
    ).toBe(
      "note: not copied into the sandbox: secret.key (this user cannot read it), dev.sock (it is not a file, directory or symbolic link)",
    );
    expect(
      sandboxLine("workspace.copied-out", {
        refused: [{ path: "cache_\uDCE9.tmp", reason: "its name is not valid UTF-8" }],
      }),
    ).toMatch(/^note: left out of what came back: cache_.\.tmp \(its name is not valid UTF-8\)$/);
    expect(sandboxLine("workspace.copied-in", { skipped: [] })).toBeUndefined();
    expect(sandboxLine("workspace.copied-out", { changed: 2 })).toBeUndefined();
  });
});

describe("a trip's line", () => {
  it("is named by its code: a replay's divergence or a timeout is no limit (review, session 30)", () => {
    expect(sandboxLine("limit.tripped", { code: "replay-divergence", message: "The replay diverged" })).toBe(
      "replay diverged: The replay diverged",
    );
    expect(sandboxLine("limit.tripped", { code: "timeout", message: "The run did not finish within 5 s." })).toBe(
      "timeout: The run did not finish within 5 s.",
    );
    expect(sandboxLine("limit.tripped", { code: "limit", limit: "memory", message: "Out of memory." })).toBe(
      "limit: Out of memory.",
    );
  });
});
