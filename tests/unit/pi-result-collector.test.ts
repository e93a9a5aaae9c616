import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { JsonlReader } from "../../src/pi/jsonl-reader.js";
import { type PiEvent, parsePiRecord } from "../../src/pi/pi-events.js";
import { ResultCollector } from "../../src/pi/result-collector.js";

// Real Pi 1.6.0 runs against the scripted model server, read the way the host reads them.
function fixtureEvents(name: string): PiEvent[] {
  const events: PiEvent[] = [];
  const reader = new JsonlReader({
    maxLineBytes: 1 << 20,
    onLine: (line) => {
      const parsed = parsePiRecord(line);
      if (!parsed.ok) throw new Error(parsed.error);
      events.push(parsed.event);
    },
    onOversizeLine: (n) => {
      throw new Error(`fixture line of ${n} bytes`);
    },
  });
  reader.push(readFileSync(new URL(`../fixtures/${name}`, import.meta.url)));
  reader.end();
  return events;
}

function run(events: PiEvent[], finalToolName?: string): ResultCollector {
  const collector = new ResultCollector({ finalToolName });
  for (const event of events) collector.observe(event);
  return collector;
}

const usage = (input: number, output: number, cost = 0) => ({
  input,
  output,
  cacheRead: 1,
  cacheWrite: 2,
  totalTokens: input + output,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: cost },
});

function assistant(content: object[], stopReason: string, extra: object = {}): PiEvent {
  return {
    type: "message_end",
    message: {
      role: "assistant",
      content,
      api: "openai-completions",
      provider: "p",
      model: "m",
      usage: usage(10, 5),
      stopReason,
      timestamp: 1,
      ...extra,
    },
  };
}
const text = (t: string) => ({ type: "text", text: t });
const toolCall = (name: string) => ({ type: "toolCall", id: "c", name, arguments: {} });
const toolEnd = (toolName: string, isError: boolean, details: unknown, message = "", toolCallId = "c") => ({
  type: "tool_execution_end",
  toolCallId,
  toolName,
  result: { content: [text(message)], details },
  isError,
});
const settled: PiEvent = { type: "agent_settled", aborted: false };

describe("ResultCollector on recorded Pi runs", () => {
  it("schema run: takes the accepted final_result call, not the rejected one before it", () => {
    const events = fixtureEvents("pi-schema-run.jsonl");
    // The fixture really holds a rejected call first; otherwise this test proves nothing.
    expect(
      events.filter((e) => e.type === "tool_execution_end" && e.toolName === "final_result" && e.isError === true),
    ).toHaveLength(1);
    const c = run(events, "final_result");
    expect(c.outcome()).toEqual({
      kind: "structured",
      value: { summary: "all good", items: ["a"] },
      claims: [{ callId: "call_3_0", value: { summary: "all good", items: ["a"] } }],
    });
    expect(c.turns).toBe(3);
    expect(c.toolCalls).toBe(3);
    expect(c.settled).toBe(true);
    expect(c.usage).toEqual({ input: 300, output: 60, cacheRead: 0, cacheWrite: 0, totalTokens: 360, cost: 0 });
  });

  it("schema run cut before the accepted call: reports the rejection Pi sent back", () => {
    const events = fixtureEvents("pi-schema-run.jsonl");
    const accepted = events.findIndex((e) => e.type === "tool_execution_start" && e.toolCallId === "call_3_0");
    expect(accepted).toBeGreaterThan(0);
    const outcome = run([...events.slice(0, accepted), settled], "final_result").outcome();
    expect(outcome.kind).toBe("no-result");
    expect(outcome).toMatchObject({
      reason: expect.stringContaining("called final_result once but Pi rejected every call"),
    });
    expect(outcome).toMatchObject({ reason: expect.stringContaining("items: missing") });
  });

  it("text run: returns the assistant's text", () => {
    const c = run(fixtureEvents("pi-text-run.jsonl"));
    expect(c.outcome()).toEqual({
      kind: "text",
      text: "Hello from the scripted model.\nSecond line \u2028 with a line separator.",
    });
    expect(c.turns).toBe(1);
    expect(c.toolCalls).toBe(0);
    expect(c.settled).toBe(true);
    expect(c.usage).toMatchObject({ input: 100, output: 20, totalTokens: 120 });
  });

  it("text run in schema mode: the model never called the final tool", () => {
    const outcome = run(fixtureEvents("pi-text-run.jsonl"), "final_result").outcome();
    expect(outcome).toEqual({
      kind: "no-result",
      reason: 'the model ended its turn without calling final_result (stopReason "stop")',
    });
  });

  it("model-error run: the provider's error, after Pi's retry also failed", () => {
    const events = fixtureEvents("pi-model-error-run.jsonl");
    expect(events.some((e) => e.type === "auto_retry_end" && e.success === false)).toBe(true);
    const c = run(events);
    expect(c.outcome()).toEqual({ kind: "model-error", message: '500: {"message":"scripted provider outage"}' });
    expect(c.turns).toBe(2);
    expect(c.settled).toBe(true);
    expect(run(events, "final_result").outcome().kind).toBe("model-error");
  });
});

describe("ResultCollector on hand-made streams", () => {
  it("text mode returns the last assistant message, joining its text blocks", () => {
    const outcome = run([
      assistant([text("Let me look."), toolCall("bash")], "toolUse"),
      assistant([{ type: "thinking", thinking: "hmm" }, text("Part one."), text("Part two.")], "stop"),
      settled,
    ]).outcome();
    expect(outcome).toEqual({ kind: "text", text: "Part one.\nPart two." });
  });

  it("ignores message_end records of other roles", () => {
    const outcome = run([
      assistant([text("answer")], "stop"),
      { type: "message_end", message: { role: "user", content: [text("not the answer")], timestamp: 1 } },
      settled,
    ]).outcome();
    expect(outcome).toEqual({ kind: "text", text: "answer" });
  });

  it("sums usage and cost over assistant messages", () => {
    const c = run([
      assistant([toolCall("bash")], "toolUse", { usage: usage(100, 10, 0.25) }),
      assistant([text("done")], "stop", { usage: usage(200, 20, 0.5) }),
    ]);
    expect(c.usage).toEqual({ input: 300, output: 30, cacheRead: 2, cacheWrite: 4, totalTokens: 330, cost: 0.75 });
  });

  it("counts no negative usage: the stream is the sandbox's to write (review, session 44)", () => {
    const c = run([
      assistant([toolCall("bash")], "toolUse", { usage: usage(100, 10, 0.25) }),
      assistant([text("done")], "stop", { usage: usage(-9_000_000, -20, -123.45) }),
    ]);
    expect(c.usage).toEqual({ input: 100, output: 10, cacheRead: 2, cacheWrite: 4, totalTokens: 110, cost: 0.25 });
    // Nor sums past what a number holds exactly (two 1.7e308 replies made Infinity, null in --json).
    const huge = run([
      assistant([toolCall("bash")], "toolUse", { usage: usage(1.7e308, 0) }),
      assistant([text("done")], "stop", { usage: usage(1.7e308, 0) }),
    ]);
    expect(huge.usage.input).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("schema mode keeps the first accepted final call and ignores later ones and other tools", () => {
    const outcome = run(
      [
        toolEnd("other_tool", false, { wrong: true }),
        toolEnd("final_result", true, {}, "Validation failed"),
        toolEnd("final_result", false, { n: 1 }, "", "c1"),
        toolEnd("final_result", false, { n: 2 }, "", "c2"),
        settled,
      ],
      "final_result",
    ).outcome();
    // The first is the answer; every accepted call is kept as a claim for the host to check.
    expect(outcome).toEqual({
      kind: "structured",
      value: { n: 1 },
      claims: [
        { callId: "c1", value: { n: 1 } },
        { callId: "c2", value: { n: 2 } },
      ],
    });
  });

  it("schema mode: an accepted result stands even if a later model call fails", () => {
    const outcome = run(
      [toolEnd("final_result", false, { ok: true }), assistant([], "error", { errorMessage: "boom" })],
      "final_result",
    ).outcome();
    expect(outcome).toEqual({
      kind: "structured",
      value: { ok: true },
      claims: [{ callId: "c", value: { ok: true } }],
    });
  });

  it("text mode: an errored message without text is a model error, not empty text", () => {
    const outcome = run([assistant([], "error", { errorMessage: "429 rate limited" }), settled]).outcome();
    expect(outcome).toEqual({ kind: "model-error", message: "429 rate limited" });
  });

  it("an errored message with partial text is still a model error", () => {
    const outcome = run([
      assistant([text("Half an ans")], "error", { errorMessage: "connection reset" }),
      settled,
    ]).outcome();
    expect(outcome).toEqual({ kind: "model-error", message: "connection reset" });
  });

  it("falls back to auto_retry_end.finalError, then to a generic message", () => {
    const retried = run([
      assistant([], "error"),
      { type: "auto_retry_end", success: false, attempt: 3, finalError: "503 overloaded" },
      settled,
    ]);
    expect(retried.outcome()).toEqual({ kind: "model-error", message: "503 overloaded" });
    const bare = run([assistant([], "aborted"), { type: "agent_settled", aborted: true }]);
    expect(bare.outcome()).toEqual({
      kind: "model-error",
      message: 'the model request ended with stopReason "aborted" and no error message',
    });
  });

  it("a successful retry clears the earlier error", () => {
    const outcome = run([
      assistant([], "error", { errorMessage: "500" }),
      { type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 10, errorMessage: "500" },
      assistant([text("recovered")], "stop"),
      { type: "auto_retry_end", success: true, attempt: 2 },
      settled,
    ]).outcome();
    expect(outcome).toEqual({ kind: "text", text: "recovered" });
  });

  it("no assistant message at all", () => {
    expect(run([{ type: "agent_start" }, settled]).outcome()).toEqual({
      kind: "no-result",
      reason: "Pi produced no assistant message",
    });
    expect(run([]).outcome()).toEqual({
      kind: "no-result",
      reason: "Pi produced no assistant message (the event stream ended before Pi settled)",
    });
  });

  it("text mode: a run that stopped on a tool call has no answer, even if the message had text", () => {
    const outcome = run([assistant([text("Let me check."), toolCall("bash")], "toolUse"), settled]).outcome();
    expect(outcome).toEqual({
      kind: "no-result",
      reason: "the agent stopped after a tool call without a final answer",
    });
  });

  it("text mode: a message with no text blocks is not an empty answer", () => {
    const outcome = run([assistant([{ type: "thinking", thinking: "..." }], "stop"), settled]).outcome();
    expect(outcome).toEqual({
      kind: "no-result",
      reason: 'the model\'s final message contained no text (stopReason "stop")',
    });
  });

  it("a reply truncated by the output token limit is not an answer", () => {
    const events = [assistant([text("The answer is")], "length"), settled];
    expect(run(events).outcome()).toEqual({
      kind: "no-result",
      reason: "the model reached its output token limit before finishing",
    });
    expect(run(events, "final_result").outcome()).toEqual({
      kind: "no-result",
      reason: "the model reached its output token limit without calling final_result",
    });
  });

  it("schema mode: the agent stopped after some other tool", () => {
    const outcome = run(
      [assistant([toolCall("bash")], "toolUse"), toolEnd("bash", false, {}), settled],
      "final_result",
    ).outcome();
    expect(outcome).toEqual({
      kind: "no-result",
      reason: "the agent stopped after a tool call without calling final_result",
    });
  });

  it("counts turns, tool calls and settling, and ignores unknown events", () => {
    const c = run([
      { type: "turn_start" },
      { type: "tool_execution_start", toolCallId: "a", toolName: "bash", args: {} },
      { type: "tool_execution_start", toolCallId: "b", toolName: "read", args: {} },
      { type: "something_new", payload: 1 },
      { type: "turn_start" },
    ]);
    expect(c.turns).toBe(2);
    expect(c.toolCalls).toBe(2);
    expect(c.settled).toBe(false);
    c.observe(settled);
    expect(c.settled).toBe(true);
  });
});
