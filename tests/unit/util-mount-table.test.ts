// What the mount table says is mounted below a folder: only mounts visible at their path count
// (bind mode covers each with a read-only bind, build-run-plan.ts readOnlyCovers). Real tmpfs mounts: root only.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { mountPointsInside } from "../../src/util/mount-table.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-mount-table-");

describe("mountPointsInside", () => {
  it("lists visible mount points, names with spaces too; not one hidden by a mount over a folder above it, nor one reached through a link (review, session 33: binding a hidden one failed every read-only run)", () => {
    const ws = tree({ "a/.keep": "", "x/.keep": "", "sp ace/.keep": "" });
    const mounted: string[] = [];
    const tmpfs = (at: string) => {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", at]);
      mounted.unshift(at);
    };
    try {
      tmpfs(path.join(ws, "a"));
      tmpfs(path.join(ws, "sp ace"));
      expect(mountPointsInside(ws).sort()).toEqual(["a", "sp ace"]);
      // A folder made below the mount, and mounted: nested points count too.
      fs.mkdirSync(path.join(ws, "a/b"));
      tmpfs(path.join(ws, "a/b"));
      expect(mountPointsInside(ws).sort()).toEqual(["a", "a/b", "sp ace"]);
      // Over `x`'s parent: `x` below it is hidden (its path shows the new tmpfs, where it is no folder).
      tmpfs(path.join(ws, "x"));
      const hidden = path.join(ws, "x");
      fs.mkdirSync(path.join(hidden, "inner"));
      tmpfs(path.join(hidden, "inner"));
      expect(mountPointsInside(ws)).toContain("x/inner");
      tmpfs(hidden); // a second tmpfs over x: x/inner is under the first, out of sight
      expect(mountPointsInside(ws)).not.toContain("x/inner");
      expect(mountPointsInside(ws)).toContain("x");
    } finally {
      for (const at of mounted) execFileSync("umount", ["-l", at]);
    }
  });
});
