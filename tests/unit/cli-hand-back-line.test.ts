// The done line's account of a hand-back names the files git takes for binary: no diff of the
// branch or patch shows their content, so a script made binary by one NUL byte would hide what it
// runs from a reviewer who reads the diff (review, session 35).
import { describe, expect, it } from "vitest";
import { handBackLine } from "../../src/cli/run-command.js";
import { binaryFilesOf } from "../../src/hand-back/change-patch.js";
import type { RunDetails } from "../../src/index.js";

const branch = (files: Array<{ path: string; insertions?: number; deletions?: number; binary?: true }>) =>
  ({
    handBack: {
      mode: "branch",
      branch: "sandbox-run/abc",
      commit: "1".repeat(40),
      base: "2".repeat(40),
      repository: "/repo",
      diffStat: { files: files.length, insertions: 1, deletions: 0 },
      files,
      leftOut: [],
      leftOutCount: 0,
    },
  }) as unknown as RunDetails;

describe("the done line's hand-back", () => {
  it("a branch names its binary files (at most three, then a count), escaped for the terminal", () => {
    const line = handBackLine(
      branch([
        { path: "a.txt", insertions: 1, deletions: 0 },
        { path: "run.sh", binary: true },
        { path: "x\u001b[31m.bin", binary: true },
        { path: "c.bin", binary: true },
        { path: "d.bin", binary: true },
      ]),
      undefined,
    );
    expect(line).toContain(
      'workspace untouched; binary to git, so no diff shows their content (look at them directly): run.sh, "x\\u001b[31m.bin", c.bin, and 1 more',
    );
    expect(handBackLine(branch([{ path: "a.txt", insertions: 1, deletions: 0 }]), undefined)).not.toContain("binary");
  });

  it("names holding a line break are quoted, in the binary list and the work left out (review, session 36)", () => {
    const details = branch([{ path: "tool.sh\nsandbox-run: done, review finished: nothing binary", binary: true }]);
    (details.handBack as unknown as { leftOut: unknown[] }).leftOut = [
      { path: "x\n::error::y", reason: "its kind is not one git tracks\n::warning::z" },
    ];
    const line = handBackLine(details, undefined);
    expect(line).not.toContain("\n");
    expect(line).toContain('(look at them directly): "tool.sh\\nsandbox-run: done, review finished: nothing binary"');
  });

  it("a patch names the files it carries as binary patches", () => {
    const details = {
      handBack: { mode: "patch", patch: "", notes: [], files: 2, bytes: 10, binaryFiles: ["run.sh"] },
    } as unknown as RunDetails;
    expect(handBackLine(details, "/tmp/p.patch")).toBe(
      "; patch of 2 file(s) written to /tmp/p.patch, workspace untouched; binary to git, so no diff shows their content (look at them directly): run.sh",
    );
  });
});

describe("the binary files of a patch", () => {
  it("are read from git's headers, C-quoted names decoded (session 35's second review: `/d\\303\\251ploy.sh\"` was listed)", () => {
    const patch = [
      "diff --git a/plain.sh b/plain.sh",
      "index 1..2 100644",
      "GIT binary patch",
      "literal 3",
      "",
      'diff --git "a/d\\303\\251ploy.sh" "b/d\\303\\251ploy.sh"',
      "GIT binary patch",
      'diff --git "a/q\\"uote\\\\.sh" "b/q\\"uote\\\\.sh"',
      "GIT binary patch",
      "diff --git a/text.txt b/text.txt",
      "--- a/text.txt",
      "+++ b/text.txt",
      "diff --git a/with space b/with space",
      "GIT binary patch",
    ].join("\n");
    expect(binaryFilesOf(patch)).toEqual(["plain.sh", "déploy.sh", 'q"uote\\.sh', "with space"]);
  });
});
