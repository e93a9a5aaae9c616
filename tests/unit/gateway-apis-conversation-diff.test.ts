// firstDifference on real Pi requests (fixtures) and changed copies of them: the one-line
// description strict replay stops with (issue 13).
import { describe, expect, it } from "vitest";
import { codecFor, type ModelRequest } from "../../src/gateway/apis/api-codec.js";
import { canonicalJson, firstDifference } from "../../src/gateway/apis/conversation-diff.js";
import { captured, subpath } from "../support/api-codec-fixtures.js";

function conversation(api: string, change: (body: Record<string, unknown>) => void = () => {}): ModelRequest {
  const { path, body } = captured(api);
  const copy = structuredClone(body);
  change(copy);
  const parsed = codecFor(api)!.parseRequest(subpath(api, path), copy);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.request;
}

type Message = Record<string, unknown>;
const messages = (body: Record<string, unknown>) => body.messages as Message[];

describe("firstDifference", () => {
  it("finds none between a request and itself", () => {
    for (const api of ["openai-completions", "anthropic-messages", "google-generative-ai"]) {
      expect(firstDifference(conversation(api), conversation(api))).toBeUndefined();
    }
  });

  it("ignores what varies between runs: call ids, cache markers, key order", () => {
    const recorded = conversation("anthropic-messages");
    const now = conversation("anthropic-messages", (body) => {
      for (const message of messages(body)) {
        for (const block of message.content as Message[]) {
          delete block.cache_control;
          if (block.type === "tool_use") block.id = `toolu_other_${String(block.id)}`;
          if (block.type === "tool_result") block.tool_use_id = `toolu_other_${String(block.tool_use_id)}`;
        }
      }
      const tool = (body.tools as Message[])[1]!;
      tool.input_schema = Object.fromEntries(Object.entries(tool.input_schema as Message).reverse());
    });
    expect(firstDifference(recorded, now)).toBeUndefined();
  });

  it("names the tool result that changed, by call number and tool, with both texts", () => {
    const now = conversation("openai-completions", (body) => {
      messages(body)[5]!.content = "FAIL 1 test";
    });
    expect(firstDifference(conversation("openai-completions"), now)).toBe(
      'tool result of call 2 (bash) differs: recorded "oops\\n\\n\\nCommand exited with code 3", now "FAIL 1 test"',
    );
  });

  it("matches results to calls by order where the wire format has no ids (Google)", () => {
    const now = conversation("google-generative-ai", (body) => {
      const contents = body.contents as Message[];
      const part = (contents[2]!.parts as Message[])[0]!;
      part.functionResponse = { name: "bash", response: { output: "bye\n" } };
    });
    expect(firstDifference(conversation("google-generative-ai"), now)).toBe(
      'tool result of call 1 (bash) differs: recorded "hello\\n", now "bye\\n"',
    );
  });

  it("says when a tool result turned into an error", () => {
    const now = conversation("anthropic-messages", (body) => {
      const block = (messages(body)[2]!.content as Message[])[0]!;
      block.is_error = true;
    });
    expect(firstDifference(conversation("anthropic-messages"), now)).toBe(
      "tool result of call 1 (bash) differs: recorded a success, now an error",
    );
  });

  it("names a changed user message and a changed tool call", () => {
    const recorded = conversation("openai-completions");
    const prompt = conversation("openai-completions", (body) => {
      messages(body)[1]!.content = [{ type: "text", text: "Check the workspace, then delete it." }];
    });
    expect(firstDifference(recorded, prompt)).toBe(
      'message 1 (user) differs: recorded "Check the workspace, then report.", now "Check the workspace, then delete it."',
    );
    const call = conversation("openai-completions", (body) => {
      const toolCalls = messages(body)[4]!.tool_calls as Message[];
      (toolCalls[0]!.function as Message).arguments = '{"command":"rm -rf ."}';
    });
    expect(firstDifference(recorded, call)).toBe(
      'tool call 2 (bash) arguments differ: recorded "{\\"command\\":\\"echo oops; exit 3\\"}", now "{\\"command\\":\\"rm -rf .\\"}"',
    );
  });

  it("cuts long texts around the first difference and escapes control characters", () => {
    const long = `${"a".repeat(200)}\u001b[31mX${"b".repeat(200)}`;
    const recorded = conversation("openai-completions", (body) => void (messages(body)[3]!.content = long));
    const now = conversation(
      "openai-completions",
      (body) => void (messages(body)[3]!.content = long.replace("X", "Y")),
    );
    const difference = firstDifference(recorded, now)!;
    expect(difference).toMatch(
      /^tool result of call 1 \(bash\) differs: recorded \.\.\."a+\\u001b\[31mXb+"\.\.\., now \.\.\."a+\\u001b\[31mYb+"\.\.\.$/,
    );
    expect(difference.length).toBeLessThan(220);
    expect(difference).not.toContain("\u001b");
  });

  it("says when messages are missing or new, and when the system prompt or tools changed", () => {
    const recorded = conversation("openai-completions");
    const shorter = conversation("openai-completions", (body) => void messages(body).splice(4));
    expect(firstDifference(recorded, shorter)).toBe('message 4 (assistant) is missing: recorded "[tool call (bash)]"');
    expect(firstDifference(shorter, recorded)).toMatch(/^message 4 \(assistant\) is new: /);
    const system = conversation("openai-completions", (body) => {
      const first = messages(body)[0]!;
      first.content = String(first.content).replace("<cwd>", "<cwd-changed>");
    });
    expect(firstDifference(recorded, system)).toMatch(/^system prompt differs: recorded \.\.\."[^"]*<cwd>/);
    const tools = conversation("openai-completions", (body) => void (body.tools as unknown[]).pop());
    expect(firstDifference(recorded, tools)).toBe("tool 2 (sandbox_run_final_result) is no longer offered");
  });

  it("reports arguments nested too deeply to compare as a difference, without overflowing the stack", () => {
    const deep = JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`);
    const recorded = conversation("anthropic-messages");
    const withDeep = (body: Record<string, unknown>) => {
      const block = (messages(body)[1]!.content as Message[])[0]!;
      block.input = deep;
    };
    expect(firstDifference(recorded, conversation("anthropic-messages", withDeep))).toMatch(
      /^tool call 1 \(bash\) arguments differ: .*nested too deeply to compare/,
    );
  });
});

describe("canonicalJson", () => {
  /** What it must equal: JSON.stringify of a copy with every object's keys sorted. */
  const sortedCopy = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sortedCopy)
      : typeof value === "object" && value !== null
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((key) => [key, sortedCopy((value as Record<string, unknown>)[key])]),
          )
        : value;

  it("writes JSON.stringify's text with the keys sorted, at every depth, without a copy", () => {
    const values: unknown[] = [
      {
        role: "user",
        content: [{ type: "text", text: 'a\n\u2028"', cache: undefined }],
        z: [1, undefined, Number.NaN],
      },
      JSON.parse('{"__proto__": {"x": 1}, "b": -0, "a": 1e400, "c": [[], {}, [null, true, "é"]]}'),
      [undefined, () => 1, Symbol("s"), { f: () => 1, s: Symbol("t"), k: 0 }],
      "text",
      -1.5,
      null,
      true,
      { z: { y: { x: { w: [{ b: 2, a: 1 }] } } } },
    ];
    for (const value of values) expect(canonicalJson(value)).toBe(JSON.stringify(sortedCopy(value)));
    // Key order does not count; values do.
    expect(canonicalJson({ a: 1, b: [2, { d: 3, c: 4 }] })).toBe(canonicalJson({ b: [2, { c: 4, d: 3 }], a: 1 }));
    expect(canonicalJson({ a: [1, 2] })).not.toBe(canonicalJson({ a: [2, 1] }));
    expect(canonicalJson(undefined)).toBe("undefined");
  });

  it("gives a value nested too deeply to walk a marker that equals no other", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const first = canonicalJson(deep);
    expect(first).toMatch(/^\(nested too deeply to compare #\d+\)$/);
    expect(canonicalJson(deep)).not.toBe(first);
  });
});
