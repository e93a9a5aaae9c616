// Copy mode's apply of a mode-only change to a file whose inode has other names (a guarded hook an
// earlier run hard-linked to an ordinary path): only the changed name may change.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { applyReturnedTree } from "../../src/workspace-transfer/apply-tree.js";
import { diffTrees } from "../../src/workspace-transfer/tree-entry.js";
import { tempTrees } from "../support/temp-trees.js";
import { roundTrip } from "../support/transfer-round-trip.js";

const { dir, tree } = tempTrees("sandbox-run-hardlink-mode-");

const HOOK = "#!/bin/sh\necho 'secret scan: refusing commit'; exit 1\n";

/** A tree whose guarded hook (0755) is hard-linked to docs/hook-notes.txt, sent and chmod'ed 644 by "the sandbox". */
async function linkedHookChmodded() {
  const root = tree({ ".githooks/pre-commit": HOOK, "docs/x.md": "x\n" });
  const hook = path.join(root, ".githooks/pre-commit");
  const notes = path.join(root, "docs/hook-notes.txt");
  fs.chmodSync(hook, 0o755);
  fs.linkSync(hook, notes);
  const trip = await roundTrip(
    root,
    (copy) => {
      fs.chmodSync(path.join(copy, "docs/hook-notes.txt"), 0o644);
      fs.writeFileSync(path.join(copy, "docs/y.md"), "y\n");
    },
    { copy: dir(), staging: dir() },
  );
  expect(diffTrees(trip.before.entries, trip.returned.after)).toEqual({
    created: ["docs/y.md"],
    modified: ["docs/hook-notes.txt"],
    deleted: [],
  });
  return { ...trip, hook, notes };
}

const modeOf = (file: string) => fs.statSync(file).mode & 0o7777;

describe("apply: a mode-only change to a hard-linked file", () => {
  it("replaces that name by a fresh copy (the other name keeps its mode); an undo puts the shared inode back", async () => {
    const undone = await linkedHookChmodded();
    const ino = fs.statSync(undone.hook).ino;
    expect(() =>
      applyReturnedTree(undone.before, undone.returned, "the workspace", {
        asideDir: undone.stagingDir,
        beforeWrite: (rel) => {
          if (rel === "docs/y.md") throw new Error("disk full");
        },
      }),
    ).toThrow(/every change made so far was undone/);
    expect(fs.statSync(undone.notes)).toMatchObject({ ino, nlink: 2 });
    expect(modeOf(undone.hook)).toBe(0o755);

    const { before, returned, stagingDir, hook, notes } = await linkedHookChmodded();
    const hookIno = fs.statSync(hook).ino;
    applyReturnedTree(before, returned, "the workspace", { asideDir: stagingDir });
    expect(modeOf(hook)).toBe(0o755);
    expect(fs.statSync(hook)).toMatchObject({ ino: hookIno, nlink: 1 });
    expect(modeOf(notes)).toBe(0o644);
    expect(fs.statSync(notes).ino).not.toBe(hookIno);
    expect(fs.readFileSync(notes, "utf8")).toBe(HOOK);
    expect(fs.readFileSync(hook, "utf8")).toBe(HOOK);
  });
});
