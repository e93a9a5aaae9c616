import { describe, expect, it } from "vitest";
import { type SseEvent, SseParser } from "../../src/gateway/apis/sse-parser.js";

function parse(chunks: Array<string | Buffer>, limits?: ConstructorParameters<typeof SseParser>[1]) {
  const events: SseEvent[] = [];
  const parser = new SseParser((event) => events.push(event), limits);
  for (const chunk of chunks) parser.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  parser.end();
  return { events, truncated: parser.truncated };
}

/** The same bytes cut every `size` bytes (cuts land mid-line, mid-CRLF and mid-character). */
function cut(text: string, size: number): Buffer[] {
  const bytes = Buffer.from(text);
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
  return pieces;
}

const STREAM = 'event: a\ndata: {"x":"é€😀"}\n\n: comment\ndata: line1\ndata: line2\n\nevent: b\ndata:no-space\n\n';
const EXPECTED: SseEvent[] = [
  { event: "a", data: '{"x":"é€😀"}' },
  { event: null, data: "line1\nline2" },
  { event: "b", data: "no-space" },
];

describe("SseParser", () => {
  it("reads events, joins data lines, skips comments, drops one space after the colon", () => {
    expect(parse([STREAM]).events).toEqual(EXPECTED);
  });

  it.each([1, 2, 3, 5, 7])("gives the same events when the bytes arrive in %i-byte pieces", (size) => {
    expect(parse(cut(STREAM, size)).events).toEqual(EXPECTED);
  });

  it.each([
    ["CRLF", "\r\n"],
    ["CR", "\r"],
  ])("splits lines on %s, also when the pair is cut between chunks", (_name, eol) => {
    const text = STREAM.replaceAll("\n", eol);
    expect(parse([text]).events).toEqual(EXPECTED);
    for (const size of [1, 2, 3]) expect(parse(cut(text, size)).events).toEqual(EXPECTED);
  });

  it("keeps a multi-byte character whole when a chunk ends inside it", () => {
    const bytes = Buffer.from("data: 😀€\n\n");
    // Cut inside the 4-byte emoji and inside the 3-byte euro sign.
    const events = parse([bytes.subarray(0, 8), bytes.subarray(8, 12), bytes.subarray(12)]).events;
    expect(events).toEqual([{ event: null, data: "😀€" }]);
  });

  it("turns invalid UTF-8 into replacement characters instead of failing", () => {
    expect(parse([Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a])]).events).toEqual([
      { event: null, data: "\uFFFD" },
    ]);
  });

  it("delivers an unterminated last line and an event without its blank line at the end", () => {
    expect(parse(["data: one\n\ndata: two"]).events).toEqual([
      { event: null, data: "one" },
      { event: null, data: "two" },
    ]);
  });

  it("drops a byte-order mark at the start only", () => {
    expect(parse(["\uFEFFdata: a\n\ndata: \uFEFFb\n\n"]).events).toEqual([
      { event: null, data: "a" },
      { event: null, data: "\uFEFFb" },
    ]);
  });

  it("ignores other fields and a field line without a colon", () => {
    expect(parse(["id: 7\nretry: 10\ndata\nfoo: bar\ndata: x\n\n"]).events).toEqual([{ event: null, data: "\nx" }]);
  });

  it("stops, and says why, at a line longer than its cap", () => {
    const { events, truncated } = parse(["data: ok\n\n", `data: ${"a".repeat(100)}\n\n`, "data: after\n\n"], {
      maxLineBytes: 64,
    });
    expect(events).toEqual([{ event: null, data: "ok" }]);
    expect(truncated).toMatch(/line exceeded 64 bytes/);
  });

  it("counts a long line across many small chunks against the cap", () => {
    const { events, truncated } = parse(cut(`data: ${"b".repeat(200)}`, 3), { maxLineBytes: 64 });
    expect(events).toEqual([]);
    expect(truncated).toBeDefined();
  });

  it("stops at an event whose data lines add up past the event cap", () => {
    const many = Array.from({ length: 20 }, () => "data: 0123456789").join("\n");
    const { events, truncated } = parse([`${many}\n\n`], { maxEventBytes: 100 });
    expect(events).toEqual([]);
    expect(truncated).toMatch(/event exceeded 100 bytes/);
  });

  it("copies what it keeps, so a reused chunk buffer cannot change an event", () => {
    const events: SseEvent[] = [];
    const parser = new SseParser((event) => events.push(event));
    const buffer = Buffer.from("data: abc");
    parser.push(buffer);
    buffer.fill(0x7a);
    parser.push(Buffer.from("\n\n"));
    expect(events).toEqual([{ event: null, data: "abc" }]);
  });
});
