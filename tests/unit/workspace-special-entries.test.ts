// removeSpecialEntries changes only the folder the walk found each entry in (by dev:ino): the
// owner write it may lend there (owner-write.ts) goes to that folder and no other.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { removeSpecialEntries } from "../../src/workspace/special-entries.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-special-");
const identity = (p: string) => {
  const st = fs.statSync(p);
  return `${st.dev}:${st.ino}`;
};

describe("removeSpecialEntries", () => {
  it("removes a FIFO from the folder the walk saw; one whose folder is another now is left, with why", () => {
    const root = tree({ "a/keep.txt": "", "b/keep.txt": "" });
    execFileSync("mkfifo", [path.join(root, "a/x.fifo"), path.join(root, "b/y.fifo")]);
    const { removed, left } = removeSpecialEntries(root, [
      { path: "a/x.fifo", kind: "fifo", change: "created", folder: identity(path.join(root, "a")) },
      // As if b were swapped for another folder after the walk.
      { path: "b/y.fifo", kind: "fifo", change: "created", folder: identity(path.join(root, "a")) },
    ]);
    expect(removed.map((e) => e.path)).toEqual(["a/x.fifo"]);
    expect(left.map((e) => `${e.path}: ${e.why}`)).toEqual(["b/y.fifo: its folder is not the one the walk saw"]);
    expect(fs.existsSync(path.join(root, "a/x.fifo"))).toBe(false);
    expect(fs.lstatSync(path.join(root, "b/y.fifo")).isFIFO()).toBe(true);
  });
});
