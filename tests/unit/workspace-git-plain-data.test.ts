// What git writes into a pointer file (refs, packed-refs, FETCH_HEAD, ...), judged from content the
// sandbox chose: the judgement's time stays linear in it.
import { describe, expect, it } from "vitest";
import { pointerProblem, withoutTrailingBlanks } from "../../src/workspace/git-plain-data.js";

describe("pointer files of blanks", () => {
  it("trailing spaces, tabs and line ends go without a backtracking regex (80 KB of blanks and one letter held the controller 10 s; a MiB, hours)", () => {
    expect(withoutTrailingBlanks("ref: refs/heads/main \t\r\n\n")).toBe("ref: refs/heads/main");
    expect(withoutTrailingBlanks(" \n\t")).toBe("");
    const blanks = `${" ".repeat(1 << 20)}x`;
    expect(withoutTrailingBlanks(blanks)).toBe(blanks);
    expect(pointerProblem("packed-refs", Buffer.from(blanks))).toMatch(/line 1 is not/);
    expect(pointerProblem("ref", Buffer.from(`${"0".repeat(40)}${" ".repeat(1 << 20)}\n`))).toBeUndefined();
  });
});
