import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  asAgentEnd,
  asAgentSettled,
  asAssistantMessageEnd,
  asAutoRetryEnd,
  asAutoRetryStart,
  asToolExecutionEnd,
  asToolExecutionStart,
  asTurnEnd,
  asTurnStart,
  type PiEvent,
  parsePiRecord,
  textBlocksOf,
} from "../../src/pi/pi-events.js";

function fixtureEvents(name: string): PiEvent[] {
  return readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => {
      const parsed = parsePiRecord(l);
      if (!parsed.ok) throw new Error(parsed.error);
      return parsed.event;
    });
}

describe("parsePiRecord", () => {
  it("refuses a line whose structure would cost the controller far more than its bytes, before parsing it (review: 16 MiB of [{},{},...] took ~5 s and ~400 MB)", () => {
    const flood = `{"type":"message_update","a":[${Array(250_000).fill("{}").join(",")}]}`;
    expect(parsePiRecord(flood)).toEqual({
      ok: false,
      error: "too large a structure: its JSON holds more than 200000 values",
      tooLarge: true,
    });
    const deep = `{"type":"x","a":${"[".repeat(200)}${"]".repeat(200)},"pad":"${"p".repeat(70_000)}"}`;
    expect(parsePiRecord(deep)).toMatchObject({ ok: false, error: expect.stringContaining("deeper than 128") });
    // Short lines too: 9 KB of nesting parses, then breaks what walks it (whole-change review).
    const short = `{"type":"x","a":${"[".repeat(4500)}${"]".repeat(4500)}}`;
    expect(parsePiRecord(short)).toMatchObject({ ok: false, error: expect.stringContaining("deeper than 128") });
    // Large Pi lines are long strings (a file read, a command's output): passed whole.
    const output = `{"type":"tool_execution_end","result":{"content":[{"type":"text","text":"${"x,{[".repeat(2_000_000)}"}]}}`;
    expect(parsePiRecord(output)).toMatchObject({ ok: true, event: { type: "tool_execution_end" } });
  });

  it("accepts an object with a string type and keeps every field", () => {
    expect(parsePiRecord('{"type":"future_event","x":[1,{"y":2}]}')).toEqual({
      ok: true,
      event: { type: "future_event", x: [1, { y: 2 }] },
    });
  });

  it.each([
    ["not JSON", "{oops", "not JSON"],
    ["an array", '[{"type":"x"}]', "not a JSON object"],
    ["null", "null", "not a JSON object"],
    ["a string", '"type"', "not a JSON object"],
    ["an object without type", '{"kind":"x"}', 'no string "type"'],
    ["an object with a numeric type", '{"type":3}', 'no string "type"'],
  ])("rejects %s", (_label, line, message) => {
    const parsed = parsePiRecord(line);
    expect(parsed.ok).toBe(false);
    expect(parsed).toMatchObject({ error: expect.stringContaining(message) });
  });
});

describe("event accessors", () => {
  it("read the real schema run", () => {
    const events = fixtureEvents("pi-schema-run.jsonl");
    const starts = events.map(asToolExecutionStart).filter((e) => e !== undefined);
    expect(starts.map((s) => [s.toolName, s.args])).toEqual([
      ["bash", { command: "echo hello from bash; id -u" }],
      ["final_result", { summary: 42 }],
      ["final_result", { summary: "all good", items: ["a"] }],
    ]);
    const ends = events.map(asToolExecutionEnd).filter((e) => e !== undefined);
    expect(ends.map((e) => [e.toolName, e.isError, e.durationMs])).toEqual([
      ["bash", false, 8],
      ["final_result", true, undefined],
      ["final_result", false, 0],
    ]);
    // Loose objects: fields the schema does not name survive parsing.
    expect(ends[0]!.result.structuredContent).toMatchObject({ exit_code: 0 });
    expect(ends[2]!.result.details).toEqual({ summary: "all good", items: ["a"] });

    const assistants = events.map(asAssistantMessageEnd).filter((e) => e !== undefined);
    expect(assistants.map((a) => a.message.stopReason)).toEqual(["toolUse", "toolUse", "toolUse"]);
    expect(assistants[0]!.message).toMatchObject({ provider: "scripted", model: "probe", responseId: "chatcmpl-1" });
    expect(assistants[0]!.message.usage).toMatchObject({
      input: 100,
      output: 20,
      totalTokens: 120,
      cost: { total: 0 },
    });

    expect(events.filter((e) => asTurnStart(e))).toHaveLength(3);
    expect(
      events
        .map(asTurnEnd)
        .filter((e) => e !== undefined)
        .map((e) => e.toolResults.length),
    ).toEqual([1, 1, 1]);
    expect(events.map(asAgentEnd).find((e) => e !== undefined)?.messages.length).toBeGreaterThan(3);
    expect(events.map(asAgentSettled).filter((e) => e !== undefined)).toEqual([
      { type: "agent_settled", aborted: false },
    ]);
  });

  it("read the retry events of the real model-error run", () => {
    const events = fixtureEvents("pi-model-error-run.jsonl");
    const start = events.map(asAutoRetryStart).find((e) => e !== undefined);
    expect(start).toMatchObject({
      attempt: 1,
      maxAttempts: 1,
      errorMessage: '500: {"message":"scripted provider outage"}',
    });
    const end = events.map(asAutoRetryEnd).find((e) => e !== undefined);
    expect(end).toMatchObject({ success: false, finalError: '500: {"message":"scripted provider outage"}' });
    const assistant = events.map(asAssistantMessageEnd).find((e) => e !== undefined);
    expect(assistant?.message).toMatchObject({ stopReason: "error", content: [] });
  });

  it("return undefined for user message_end, other types and malformed events", () => {
    expect(asAssistantMessageEnd({ type: "message_end", message: { role: "user", content: "hi" } })).toBeUndefined();
    expect(asAssistantMessageEnd({ type: "message_start", message: { role: "assistant" } })).toBeUndefined();
    expect(
      asToolExecutionEnd({ type: "tool_execution_end", toolCallId: "a", toolName: "x", result: {}, isError: "no" }),
    ).toBeUndefined();
    expect(asAgentSettled({ type: "agent_settled" })).toBeUndefined();
    expect(
      asToolExecutionStart({ type: "tool_execution_end", toolCallId: "a", toolName: "x", args: {} }),
    ).toBeUndefined();
  });
});

describe("textBlocksOf", () => {
  it("keeps text blocks in order and skips thinking and tool calls", () => {
    expect(
      textBlocksOf([
        { type: "thinking", thinking: "t" },
        { type: "text", text: "a" },
        { type: "toolCall", id: "1", name: "bash", arguments: {} },
        { type: "text", text: "b" },
      ]),
    ).toEqual(["a", "b"]);
  });
});
