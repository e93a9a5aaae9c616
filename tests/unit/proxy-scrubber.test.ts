// The response scrubber: exact sequences replaced wherever they fall in the stream, including
// across chunk boundaries, the longest match first, nothing else touched.
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { describe, expect, it } from "vitest";
import { ScrubStream, scrubText } from "../../src/proxy/scrubber.js";

const TOKEN = "ghp_REALtoken0123456789";
const replacements = [
  { find: TOKEN, replace: "PLACEHOLDER" },
  { find: `Bearer ${TOKEN}`, replace: "Bearer PLACEHOLDER-AS-SENT" },
];

const scrubbed = (chunks: string[]) =>
  text(Readable.from(chunks.map((c) => Buffer.from(c))).pipe(new ScrubStream(replacements)));

describe("ScrubStream", () => {
  const body = `a ${TOKEN} b Bearer ${TOKEN} c ${TOKEN}${TOKEN} end`;
  const expected = "a PLACEHOLDER b Bearer PLACEHOLDER-AS-SENT c PLACEHOLDERPLACEHOLDER end";

  it("replaces every occurrence in one chunk, preferring the longer match at the same place", async () => {
    expect(await scrubbed([body])).toBe(expected);
  });

  it("finds matches split across chunks, down to one byte per chunk", async () => {
    expect(await scrubbed([...body])).toBe(expected);
    for (let cut = 1; cut < body.length; cut += 3) {
      expect(await scrubbed([body.slice(0, cut), body.slice(cut)])).toBe(expected);
    }
  });

  it("passes everything else through unchanged, including a partial match at the very end", async () => {
    const tail = `nothing here ${TOKEN.slice(0, 10)}`;
    expect(await scrubbed([tail.slice(0, 5), tail.slice(5)])).toBe(tail);
    expect(await scrubbed([])).toBe("");
  });

  it("works on binary data", async () => {
    const bytes = Buffer.concat([Buffer.from([0, 255, 1]), Buffer.from(TOKEN), Buffer.from([254, 0])]);
    const out = await text(
      Readable.from([bytes.subarray(0, 7), bytes.subarray(7)]).pipe(new ScrubStream(replacements)),
    );
    expect(Buffer.from(out, "latin1").includes(Buffer.from(TOKEN))).toBe(false);
  });
});

describe("scrubText", () => {
  it("replaces in header values", () => {
    expect(scrubText(`x ${TOKEN} y`, replacements)).toBe("x PLACEHOLDER y");
    expect(scrubText("unrelated", replacements)).toBe("unrelated");
  });
});
