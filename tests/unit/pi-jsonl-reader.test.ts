import { readFileSync } from "node:fs";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { JsonlReader } from "../../src/pi/jsonl-reader.js";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));

interface Collected {
  lines: string[];
  oversize: number[];
}

function collect(chunks: Buffer[], maxLineBytes = 1 << 20): Collected {
  const out: Collected = { lines: [], oversize: [] };
  const reader = new JsonlReader({
    maxLineBytes,
    onLine: (line) => out.lines.push(line),
    onOversizeLine: (n) => out.oversize.push(n),
  });
  for (const chunk of chunks) reader.push(chunk);
  reader.end();
  return out;
}

const bytes = (text: string) => Buffer.from(text, "utf8");

/** Every way of cutting `buf` into two chunks, including an empty first or last chunk. */
function* twoWaySplits(buf: Buffer): Generator<[number, Buffer[]]> {
  for (let at = 0; at <= buf.length; at++) yield [at, [buf.subarray(0, at), buf.subarray(at)]];
}

describe("JsonlReader", () => {
  // The text fixture is a real Pi run whose reply contains a raw U+2028 (a 3-byte sequence),
  // so cutting it everywhere also cuts inside a multibyte character.
  for (const name of ["pi-schema-run.jsonl", "pi-text-run.jsonl", "pi-model-error-run.jsonl"]) {
    it(`frames ${name} identically however the bytes are chunked`, () => {
      const buf = fixture(name);
      const expected = buf
        .toString("utf8")
        .split("\n")
        .filter((l) => l.length > 0);
      expect(expected.length).toBeGreaterThan(10);
      for (const [at, chunks] of twoWaySplits(buf)) {
        const { lines, oversize } = collect(chunks);
        if (lines.length !== expected.length || lines.some((l, i) => l !== expected[i])) {
          expect.fail(`split at byte ${at} changed the records`);
        }
        expect(oversize).toEqual([]);
      }
      const oneByteAtATime = collect([...buf].map((b) => Buffer.from([b])));
      expect(oneByteAtATime.lines).toEqual(expected);
      for (const line of oneByteAtATime.lines) expect(() => JSON.parse(line)).not.toThrow();
    });
  }

  it("keeps U+2028 and U+2029 inside a record instead of treating them as line breaks", () => {
    const record = JSON.stringify({ type: "x", text: "a\u2028b\u2029c" });
    expect(record).toContain("\u2028"); // JSON.stringify leaves them raw, as Pi does
    const { lines } = collect([bytes(`${record}\n{"type":"y"}\n`)]);
    expect(lines).toEqual([record, '{"type":"y"}']);
    expect(JSON.parse(lines[0]!).text).toBe("a\u2028b\u2029c");
  });

  it("keeps U+2028 from the real text run inside its message", () => {
    const { lines } = collect([fixture("pi-text-run.jsonl")]);
    const end = lines.map((l) => JSON.parse(l)).find((e) => e.type === "message_end" && e.message.role === "assistant");
    expect(end.message.content[0].text).toBe(
      "Hello from the scripted model.\nSecond line \u2028 with a line separator.",
    );
  });

  it("decodes multibyte characters split across chunks at every byte", () => {
    const text = '{"type":"t","s":"é€😀中"}';
    const buf = bytes(`${text}\n`);
    for (const [, chunks] of twoWaySplits(buf)) expect(collect(chunks).lines).toEqual([text]);
    expect(collect([...buf].map((b) => Buffer.from([b]))).lines).toEqual([text]);
  });

  it("strips a CR before the LF, also when the CR and LF arrive in different chunks", () => {
    expect(collect([bytes("a\r\nb\r\n")]).lines).toEqual(["a", "b"]);
    expect(collect([bytes("a\r"), bytes("\nb\r"), bytes("\n")]).lines).toEqual(["a", "b"]);
  });

  it("keeps a CR that is not right before the LF", () => {
    expect(collect([bytes("a\rb\n\rc\n")]).lines).toEqual(["a\rb", "\rc"]);
  });

  it("skips empty lines, including a lone CR", () => {
    expect(collect([bytes("\n\na\n\r\n\nb\n\n")]).lines).toEqual(["a", "b"]);
  });

  it("emits the final unterminated line at end()", () => {
    const out = collect([bytes('{"type":"a"}\n{"type":'), bytes('"b"}')]);
    expect(out.lines).toEqual(['{"type":"a"}', '{"type":"b"}']);
  });

  it("emits nothing before end() for a line still waiting for its LF", () => {
    const lines: string[] = [];
    const reader = new JsonlReader({ maxLineBytes: 100, onLine: (l) => lines.push(l), onOversizeLine: () => {} });
    reader.push(bytes("one\ntw"));
    expect(lines).toEqual(["one"]);
    reader.push(bytes("o"));
    expect(lines).toEqual(["one"]);
    reader.end();
    expect(lines).toEqual(["one", "two"]);
  });

  it("drops an over-long line arriving in small chunks, reports it once, and keeps reading", () => {
    const long = "x".repeat(1000);
    const input = bytes(`before\n${long}\nafter\n`);
    const chunks: Buffer[] = [];
    for (let i = 0; i < input.length; i += 7) chunks.push(input.subarray(i, i + 7));
    const out = collect(chunks, 100);
    expect(out.lines).toEqual(["before", "after"]);
    // "before\n" fills the first chunk, so the long line passes 100 bytes in its 15th chunk.
    expect(out.oversize).toEqual([105]);
  });

  it("never buffers more than maxLineBytes of an over-long line", () => {
    const oversize: number[] = [];
    const lines: string[] = [];
    const reader = new JsonlReader({
      maxLineBytes: 1024,
      onLine: (l) => lines.push(l),
      onOversizeLine: (n) => oversize.push(n),
    });
    reader.push(bytes("x".repeat(1000)));
    expect(reader.bufferedBytes).toBe(1000);
    let largest = 0;
    for (let i = 0; i < 100; i++) {
      reader.push(bytes("x".repeat(100)));
      largest = Math.max(largest, reader.bufferedBytes);
    }
    expect(largest).toBeLessThanOrEqual(1024);
    reader.push(bytes("\nnext\n"));
    expect(oversize).toEqual([1100]);
    expect(lines).toEqual(["next"]);
    expect(reader.bufferedBytes).toBe(0);
  });

  it("drops an over-long line that arrives inside one chunk", () => {
    const out = collect([bytes(`a\n${"y".repeat(101)}\nb\n`)], 100);
    expect(out.lines).toEqual(["a", "b"]);
    expect(out.oversize).toEqual([101]);
  });

  it("accepts a line of exactly maxLineBytes, even split across chunks", () => {
    const line = "z".repeat(100);
    for (const [, chunks] of twoWaySplits(bytes(`${line}\n`))) {
      const out = collect(chunks, 100);
      expect(out.lines).toEqual([line]);
      expect(out.oversize).toEqual([]);
    }
  });

  it("reports an over-long line as soon as it passes the limit, not when (or if) its LF arrives", () => {
    const oversize: number[] = [];
    const lines: string[] = [];
    const reader = new JsonlReader({
      maxLineBytes: 10,
      onLine: (l) => lines.push(l),
      onOversizeLine: (n) => oversize.push(n),
    });
    reader.push(bytes("0123456789"));
    expect(oversize).toEqual([]);
    reader.push(bytes("abc"));
    expect(oversize).toEqual([13]);
    reader.push(bytes("def"));
    reader.push(bytes("g\nok\n"));
    expect(oversize).toEqual([13]);
    expect(lines).toEqual(["ok"]);
  });

  it("reports an over-long line that never ends, once", () => {
    const out = collect([bytes("ok\n"), bytes("w".repeat(30)), bytes("w".repeat(30))], 50);
    expect(out.lines).toEqual(["ok"]);
    expect(out.oversize).toEqual([60]);
  });

  it("reads a Readable stream of chunks", async () => {
    const buf = fixture("pi-schema-run.jsonl");
    const chunks: Buffer[] = [];
    for (let i = 0; i < buf.length; i += 4093) chunks.push(buf.subarray(i, i + 4093));
    const lines: string[] = [];
    const reader = new JsonlReader({ maxLineBytes: 1 << 20, onLine: (l) => lines.push(l), onOversizeLine: () => {} });
    for await (const chunk of Readable.from(chunks)) reader.push(chunk as Buffer);
    reader.end();
    expect(chunks.length).toBeGreaterThan(3);
    expect(lines).toEqual(
      buf
        .toString("utf8")
        .split("\n")
        .filter((l) => l.length > 0),
    );
    expect(lines.map((l) => JSON.parse(l).type).at(-1)).toBe("agent_settled");
  });

  it("copies the unfinished line: a chunk reused after push() does not change it", () => {
    const lines: string[] = [];
    const reader = new JsonlReader({ maxLineBytes: 1 << 20, onLine: (l) => lines.push(l), onOversizeLine: () => {} });
    const chunk = Buffer.alloc(16);
    chunk.write('{"a":"first');
    reader.push(chunk.subarray(0, 11));
    chunk.fill(0x78);
    reader.push(bytes('"}\n'));
    expect(lines).toEqual(['{"a":"first"}']);
  });

  it("reuses its scratch space: long lines spanning chunks, one after another, each come out whole", () => {
    const records = [300_000, 10, 70_000, 5, 300_000].map((n, i) => `{"i":${i},"pad":"${"x".repeat(n)}"}`);
    const buf = bytes(`${records.join("\n")}\n`);
    const chunks: Buffer[] = [];
    for (let i = 0; i < buf.length; i += 65_536) chunks.push(buf.subarray(i, i + 65_536));
    expect(collect(chunks).lines).toEqual(records);
  });
});
