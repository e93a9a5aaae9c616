import { describe, expect, it } from "vitest";
import { decodeName, hasUndecodedBytes, nameBytes } from "../../src/util/name-bytes.js";

const bytes = (...parts: Array<string | number[]>) =>
  Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));

describe("names as strings unique to their bytes", () => {
  it("valid UTF-8 (a real U+FFFD and astral characters included) reads as Node reads it, and is its own bytes", () => {
    for (const name of ["plain.txt", "notes_\uFFFD.txt", "a\u{1F480}b", "é\u0301", ""]) {
      expect(decodeName(Buffer.from(name))).toEqual({ name, exact: true });
      expect(hasUndecodedBytes(name)).toBe(false);
      expect(nameBytes(name)).toBe(name);
    }
  });

  it("each byte that is not valid UTF-8 becomes its own escape, and nameBytes gives the bytes back", () => {
    const cases = [
      bytes("report_", [0xff], ".txt"),
      bytes([0xc0, 0x80]), // overlong NUL
      bytes([0xed, 0xb3, 0xbf]), // an encoded surrogate (CESU-8)
      bytes([0xf4, 0x90, 0x80, 0x80]), // past U+10FFFF
      bytes("\u{1F480}", [0xff]), // an escape right after an astral character
      bytes("é", [0xe9], "é"), // Latin-1 beside UTF-8
      bytes([0xe2, 0x82]), // a sequence cut short
    ];
    const names = cases.map((raw) => decodeName(raw));
    for (const [i, { name, exact }] of names.entries()) {
      expect(exact).toBe(false);
      expect(hasUndecodedBytes(name)).toBe(true);
      expect(Buffer.from(nameBytes(name) as Buffer).equals(cases[i]!)).toBe(true);
    }
    expect(names[0]!.name).toBe("report_\uDCFF.txt");
    // Never the name a real file holding U+FFFD has (Node reads both as "report_\uFFFD.txt").
    expect(names[0]!.name).not.toBe(decodeName(Buffer.from("report_\uFFFD.txt")).name);
    expect(names[5]!.name).toBe("é\uDCE9é");
  });

  it("decodes a slice of a larger buffer (a tar header's field)", () => {
    const block = bytes("xx", "ab", [0xff], "yy");
    expect(decodeName(block, 2, 5)).toEqual({ name: "ab\uDCFF", exact: false });
    expect(decodeName(block, 0, 2)).toEqual({ name: "xx", exact: true });
  });
});
