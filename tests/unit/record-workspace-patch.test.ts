// The record's workspace patch on hostile trees: a FIFO, a 2 GB sparse file, a path deeper than
// PATH_MAX, a symlink to a secret. It never throws, never reads the sparse file, never follows
// the link, and says in notes what it left out.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { WorkspaceBaseline } from "../../src/record/workspace-patch.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-patch-");

describe("WorkspaceBaseline", () => {
  it("patches ordinary changes, and notes what it left out: a FIFO, a 2 GB sparse file, a too-deep path", async () => {
    const ws = tree({ "a.txt": "one\n", "content.txt": "a/a/ stays in content\n" });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      fs.writeFileSync(path.join(ws, "a.txt"), "two\n");
      fs.writeFileSync(path.join(ws, "content.txt"), "a/a/ stays in content\nb/b/ too\n");
      execFileSync("mkfifo", [path.join(ws, "pipe")]);
      const sparse = fs.openSync(path.join(ws, "sparse.bin"), "w");
      fs.ftruncateSync(sparse, 2 * 1024 * 1024 * 1024);
      fs.closeSync(sparse);
      let fd = fs.openSync(ws, "r");
      for (let i = 0; i < 30; i++) {
        fs.mkdirSync(`/proc/self/fd/${fd}/${"d".repeat(200)}`);
        const next = fs.openSync(`/proc/self/fd/${fd}/${"d".repeat(200)}`, "r");
        fs.closeSync(fd);
        fd = next;
      }
      fs.writeFileSync(`/proc/self/fd/${fd}/deep.txt`, "deep\n");
      fs.closeSync(fd);
      fs.symlinkSync("/etc/shadow", path.join(ws, "secret-link"));

      const { patch, notes } = await baseline.patch();
      expect(patch).toContain("diff --git a/a.txt b/a.txt");
      expect(patch).toContain("-one\n+two\n");
      expect(patch).toContain(" a/a/ stays in content\n+b/b/ too\n");
      expect(patch).toContain("+++ b/secret-link");
      expect(patch).toContain("+/etc/shadow");
      expect(patch).not.toContain("root:");
      expect(notes).toEqual(
        expect.arrayContaining([
          "after: pipe skipped: a fifo",
          expect.stringMatching(/^after: sparse\.bin skipped: 2147483648 bytes, sparse: \d+ bytes allocated/),
          expect.stringMatching(/^after: d{80}\.\.\. skipped: path longer than 3000 bytes$/),
        ]),
      );
    } finally {
      baseline.dispose();
    }
  });

  it("names every file as it is: a name holding ' a/b/' or '\"b/a/' applies to that path, not another", async () => {
    // The side folders a/ and b/ are stripped from the headers only where git put them.
    const names = ["x a/b/y.txt", "q b/a/r.txt", 'w"a/b/z.txt', "tab\tname a/b/t.txt", "plain.txt"];
    const ws = tree({ "keep.txt": "k\n" });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      for (const name of names) {
        fs.mkdirSync(path.dirname(path.join(ws, name)), { recursive: true });
        fs.writeFileSync(path.join(ws, name), `${name}\n`);
      }
      fs.rmSync(path.join(ws, "keep.txt"));
      const { patch } = await baseline.patch();
      const target = tree({ "keep.txt": "k\n" });
      execFileSync("git", ["apply", "-"], { cwd: target, input: patch });
      for (const name of names) expect(fs.readFileSync(path.join(target, name), "utf8")).toBe(`${name}\n`);
      expect(fs.existsSync(path.join(target, "keep.txt"))).toBe(false);
      expect(fs.existsSync(path.join(target, "x a/y.txt"))).toBe(false);
    } finally {
      baseline.dispose();
    }
  });

  it("a renamed file applies as the run left it (review: the rename lines kept the side folders, and `git apply` moved a/<old> to b/<new>)", async () => {
    const body = "a file long enough that git would call the move a rename\n".repeat(20);
    const ws = tree({ "notes.txt": body, "a/notes.txt": "an unrelated file\n", "keep.txt": "k\n" });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      fs.renameSync(path.join(ws, "notes.txt"), path.join(ws, "notes-renamed.txt"));
      const { patch } = await baseline.patch();
      expect(patch).not.toMatch(/^rename (from|to) /m);
      for (const apply of [
        ["git", ["apply", "-"]],
        ["patch", ["-p1", "-s"]],
      ] as const) {
        const target = tree({ "notes.txt": body, "a/notes.txt": "an unrelated file\n", "keep.txt": "k\n" });
        execFileSync(apply[0], [...apply[1]], { cwd: target, input: patch });
        expect(fs.readFileSync(path.join(target, "notes-renamed.txt"), "utf8"), apply[0]).toBe(body);
        expect(fs.existsSync(path.join(target, "notes.txt")), apply[0]).toBe(false);
        expect(fs.readFileSync(path.join(target, "a/notes.txt"), "utf8"), apply[0]).toBe("an unrelated file\n");
      }
    } finally {
      baseline.dispose();
    }
  });

  it("a file over the cap on one side is left out of both (review: a changed file padded past 4 MiB read as deleted)", async () => {
    const ws = tree({ "dist/index.js": "console.log('ok')\n", "README.md": "r\n" });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      fs.writeFileSync(path.join(ws, "dist/index.js"), `evil()\n${"/".repeat(5 * 1024 * 1024)}\n`);
      fs.writeFileSync(path.join(ws, "big-new.js"), "x".repeat(5 * 1024 * 1024));
      fs.writeFileSync(path.join(ws, "README.md"), "r\nchanged\n");
      const { patch, notes } = await baseline.patch();
      expect(patch).toContain("diff --git a/README.md b/README.md");
      expect(patch).not.toContain("dist/index.js");
      expect(patch).not.toContain("big-new.js");
      expect(notes.join("\n")).toMatch(/after: dist\/index\.js skipped: \d+ bytes \(more than 4 MiB\)/);
      expect(notes.join("\n")).toMatch(/after: big-new\.js skipped/);
    } finally {
      baseline.dispose();
    }
  });

  it("leaving a path out of both copies never goes through a link the other copy holds there (a folder swapped for a link to a host folder)", async () => {
    const outside = tree({ "big.bin": "host file\n", "d/big.bin": "host file\n" });
    const ws = tree({ "d/big.bin": "x".repeat(5 * 1024 * 1024), e: "e\n" });
    fs.rmSync(path.join(ws, "e"));
    fs.symlinkSync(path.join(outside, "d"), path.join(ws, "e"));
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      // Before: d/ a folder holding a file over the cap, e a link. After: the other way round.
      fs.rmSync(path.join(ws, "d"), { recursive: true });
      fs.symlinkSync(outside, path.join(ws, "d"));
      fs.rmSync(path.join(ws, "e"));
      fs.mkdirSync(path.join(ws, "e"));
      fs.writeFileSync(path.join(ws, "e/big.bin"), "y".repeat(5 * 1024 * 1024));
      const { notes } = await baseline.patch();
      expect(notes.join("\n")).toMatch(/before: d\/big\.bin skipped/);
      expect(notes.join("\n")).toMatch(/after: e\/big\.bin skipped/);
      expect(fs.readFileSync(path.join(outside, "big.bin"), "utf8")).toBe("host file\n");
      expect(fs.readFileSync(path.join(outside, "d/big.bin"), "utf8")).toBe("host file\n");
    } finally {
      baseline.dispose();
    }
  });

  it("a folder one side could not copy is left out of both, with all it holds (review: its files read as deleted)", async () => {
    const ws = tree({ "src/app.js": "app\n", "src/util.js": "util\n", "README.md": "r\n" });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      // Not a folder the walk can copy any more (as a folder chmod 000 is, for a caller who is not root).
      fs.rmSync(path.join(ws, "src"), { recursive: true });
      execFileSync("mkfifo", [path.join(ws, "src")]);
      fs.writeFileSync(path.join(ws, "README.md"), "r\nchanged\n");
      const { patch, notes } = await baseline.patch();
      expect(patch).toContain("diff --git a/README.md b/README.md");
      expect(patch).not.toContain("src/");
      expect(notes.join("\n")).toMatch(/after: src skipped/);
    } finally {
      baseline.dispose();
    }
  });

  it("never holds the event loop: the copies yield as they go and the diff is waited for (other runs stream meanwhile)", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 3000; i++) files[`d${i % 30}/f${i}.txt`] = `${i}\n`;
    const ws = tree(files);
    /** How many turns the event loop took while `work` ran: 0 for work that holds it throughout. */
    const turnsDuring = async <T>(work: () => Promise<T>): Promise<{ value: T; turns: number }> => {
      let turns = 0;
      let running = true;
      const tick = () => {
        if (!running) return;
        turns++;
        setImmediate(tick);
      };
      setImmediate(tick);
      const value = await work();
      running = false;
      return { value, turns };
    };
    const taken = await turnsDuring(() => WorkspaceBaseline.take(ws));
    const baseline = taken.value;
    try {
      fs.writeFileSync(path.join(ws, "d1/f1.txt"), "changed\n");
      const patched = await turnsDuring(() => baseline.patch());
      expect(patched.value.patch).toContain("-1\n+changed\n");
      // 3,000 files and their folders: at least five pauses in each copy, more while git runs.
      expect(taken.turns).toBeGreaterThanOrEqual(5);
      expect(patched.turns).toBeGreaterThanOrEqual(6);
    } finally {
      baseline.dispose();
    }
  });

  it("never throws: a workspace that is gone gives an empty patch and notes that say why", async () => {
    const ws = tree({ "a.txt": "a" });
    const baseline = await WorkspaceBaseline.take(ws);
    fs.rmSync(ws, { recursive: true });
    const { patch, notes } = await baseline.patch();
    baseline.dispose();
    expect(patch).toBe("");
    expect(notes[0]).toMatch(/^after: the copy stopped early \(cannot open .* as a directory: ENOENT\)$/);
    expect(notes[1]).toBe("no patch: the workspace could not be copied after the run");
  });
});
