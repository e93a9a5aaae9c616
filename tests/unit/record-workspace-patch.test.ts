// The record's workspace patch on hostile trees: a FIFO, a 2 GB sparse file, a path deeper than
// PATH_MAX, a symlink to a secret. It never throws, never reads the sparse file, never follows
// the link, and says in notes what it left out.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { RunRecorder } from "../../src/record/run-recorder.js";
import {
  changedNotInPatch,
  diffSides,
  PATCH_FILE_MAX_BYTES,
  stripSidePrefixes,
  WorkspaceBaseline,
} from "../../src/record/workspace-patch.js";
import { HostDir } from "../../src/util/host-dir.js";
import { turnsDuring } from "../support/event-loop-turns.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree, dir } = tempTrees("sandbox-run-patch-");

/** `count` files of `size` (4 MiB) under `folder` (sparse: nothing to write), past the 64 MiB total at 17. */
function bulkFiles(ws: string, folder: string, size = PATCH_FILE_MAX_BYTES, count = 17): void {
  fs.mkdirSync(path.join(ws, folder), { recursive: true });
  for (let i = 0; i < count; i++) {
    const fd = fs.openSync(path.join(ws, folder, `f${String(i).padStart(2, "0")}.bin`), "w");
    fs.ftruncateSync(fd, size);
    fs.closeSync(fd);
  }
}

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
      await baseline.dispose();
    }
  });

  it("clears credential values out of binary files before the diff: git writes them compressed and encoded, past any scrub of the patch's text (second fix review, round 3, session 41)", async () => {
    const secret = "sk-live-7f3a9c2e5b1d";
    const ws = tree({ ".env": `ACME_KEY=${secret}\n`, "old.bin": `\0before ${secret}\n` });
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      fs.writeFileSync(
        path.join(ws, "copy.bin"),
        Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(`ACME_KEY=${secret}\n`)]),
      );
      fs.rmSync(path.join(ws, "old.bin"));
      const scrub = (bytes: Buffer) => Buffer.from(bytes.toString("latin1").replaceAll(secret, "[scrubbed]"), "latin1");
      const { patch } = await baseline.patch(scrub);
      expect(patch).toContain("GIT binary patch");
      // Applied, the patch gives back the files with the value taken out.
      const target = tree({ "old.bin": `\0before [scrubbed]\n` });
      fs.writeFileSync(path.join(target, "changes.patch"), patch);
      execFileSync("git", ["apply", "--binary", "changes.patch"], { cwd: target });
      expect(fs.readFileSync(path.join(target, "copy.bin")).toString("latin1")).not.toContain(secret);
      expect(fs.readFileSync(path.join(target, "copy.bin")).toString("latin1")).toContain("[scrubbed]");
    } finally {
      await baseline.dispose();
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
      await baseline.dispose();
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
      await baseline.dispose();
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
      await baseline.dispose();
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
      await baseline.dispose();
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
      await baseline.dispose();
    }
  });

  it("never holds the event loop: the copies yield as they go and the diff is waited for (other runs stream meanwhile)", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 3000; i++) files[`d${i % 30}/f${i}.txt`] = `${i}\n`;
    const ws = tree(files);
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
      await baseline.dispose();
    }
  });

  it("never throws: a workspace that is gone gives an empty patch and notes that say why", async () => {
    const ws = tree({ "a.txt": "a" });
    const baseline = await WorkspaceBaseline.take(ws);
    fs.rmSync(ws, { recursive: true });
    const { patch, notes } = await baseline.patch();
    await baseline.dispose();
    expect(patch).toBe("");
    expect(notes[0]).toMatch(/^after: the copy stopped early \(cannot open .* as a directory: ENOENT\)$/);
    expect(notes[1]).toBe("no patch: the workspace could not be copied after the run");
  });

  it("leaves node_modules out of both copies, unwalked, with one note (review: installed packages spent the 64 MiB total and package.json, sorting after them, was never in the patch)", async () => {
    const ws = tree({
      "package.json": '{ "name": "app" }\n',
      "src/index.ts": "export const x = 1;\n",
      "packages/lib/node_modules/dep/index.js": "dep\n",
      "packages/lib/index.js": "lib\n",
    });
    bulkFiles(ws, "node_modules/big");
    execFileSync("mkfifo", [path.join(ws, "node_modules/pipe")]); // never walked: never noted
    const baseline = await WorkspaceBaseline.take(ws);
    try {
      fs.writeFileSync(path.join(ws, "package.json"), '{ "name": "app", "version": "2.0.0" }\n');
      fs.writeFileSync(path.join(ws, "src/index.ts"), "export const x = 2;\n");
      fs.writeFileSync(path.join(ws, "node_modules/left-pad.js"), "installed\n");
      const changes = await baseline.patch();
      expect(changes.patch).toContain("diff --git a/package.json b/package.json");
      expect(changes.patch).toContain('+{ "name": "app", "version": "2.0.0" }');
      expect(changes.patch).toContain("-export const x = 1;\n+export const x = 2;");
      expect(changes.patch).not.toContain("node_modules");
      expect(changes.notes).toEqual([
        "node_modules/ (and 1 more such folders) left out of the patch: installed packages",
      ]);
      expect(changedNotInPatch(changes, ["package.json", "src/index.ts", "node_modules/left-pad.js"])).toEqual([
        "changed but not in the patch: node_modules/left-pad.js (installed packages)",
      ]);
    } finally {
      await baseline.dispose();
    }
  });

  it("stops at the total in one note, the folder it was reached in cut off whole, the top folder's own files copied first (review: every later file was one note and one removal)", async () => {
    const ws = tree({
      "assets/logo.txt": "logo\n",
      "package.json": '{ "name": "app" }\n',
      "src/app.ts": "app\n",
      "zz.txt": "last\n",
    });
    // 16 of them leave a few bytes of the total: fewer than package.json needs (sorting after data/, it was lost).
    bulkFiles(ws, "data", PATCH_FILE_MAX_BYTES - 1);
    const scratch = dir();
    const staging = HostDir.open(path.join(scratch, "rec"), { create: true });
    const recorder = await RunRecorder.open({
      staging,
      scratch,
      prompt: "p",
      policy: loadPolicy("read-only"),
      workspace: ws,
      plan: {},
      call: {} as never,
      versions: { sandboxRun: "0", pi: "0", node: "0" },
    });
    await recorder.captureBefore();
    fs.writeFileSync(path.join(ws, "assets/logo.txt"), "logo 2\n");
    fs.writeFileSync(path.join(ws, "package.json"), '{ "name": "app2" }\n');
    fs.writeFileSync(path.join(ws, "src/app.ts"), "app 2\n");
    fs.writeFileSync(path.join(ws, "zz.txt"), "last 2\n");
    fs.writeFileSync(path.join(ws, "data/f00.bin"), "changed\n");
    await recorder.captureAfter();
    const changedFiles = {
      created: [],
      modified: ["assets/logo.txt", "data/f00.bin", "package.json", "src/app.ts", "zz.txt"],
      deleted: [],
    };
    await recorder.finish({ ok: true, result: "done", meta: { changedFiles } });
    const patch = fs.readFileSync(path.join(scratch, "rec/changes.patch"), "utf8");
    const notes = fs.readFileSync(path.join(scratch, "rec/changes-notes.txt"), "utf8").trimEnd().split("\n");
    expect(patch).toContain('+{ "name": "app2" }');
    expect(patch).toContain("-last\n+last 2");
    expect(patch).toContain("-logo\n+logo 2"); // sorts before data/: copied before the total
    expect(patch).not.toContain("data/");
    expect(patch).not.toContain("src/app.ts");
    // What the run changed and the patch misses comes first; then one note per copy.
    expect(notes[0]).toBe("changed but not in the patch: data/f00.bin, src/app.ts (the copy reached 64 MiB)");
    // (The top folder's files take a few bytes before data/: the total is reached at its 16th file, or 17th after.)
    const cutOff =
      /the copy stopped at 64 MiB \(at data\/f1[56]\.bin\): left out of the patch from there: data\/, src\/$/;
    expect(notes.slice(1)).toEqual([
      expect.stringMatching(new RegExp(`^before: ${cutOff.source}`)),
      expect.stringMatching(new RegExp(`^after: ${cutOff.source}`)),
    ]);
  });

  it("the total reached by the top folder's own files: each of its folders is left out of both copies by name, not only of the one that stopped", async () => {
    const files: Record<string, string> = { "src/app.ts": "app\n" };
    for (let i = 0; i < 17; i++) files[`big-${String(i).padStart(2, "0")}.txt`] = `${i}\n`.padEnd(64 * 1024, "x");
    const ws = tree(files);
    const baseline = await WorkspaceBaseline.take(ws, undefined, { totalBytes: 1024 * 1024 });
    try {
      // After the run the rest fits: the copy after holds src/, the one before stopped short of it.
      fs.rmSync(path.join(ws, "big-00.txt"));
      fs.rmSync(path.join(ws, "big-01.txt"));
      fs.writeFileSync(path.join(ws, "src/app.ts"), "app 2\n");
      const changes = await baseline.patch();
      expect(changes.patch).toContain("diff --git a/big-00.txt b/big-00.txt\ndeleted file");
      expect(changes.patch).not.toContain("src/app.ts"); // not "new file": it is in neither copy
      expect(changes.patch).not.toContain("big-16.txt");
      expect(changes.notes).toEqual([
        "before: the copy stopped at 1 MiB (at big-16.txt): left out of the patch from there: big-16.txt, src/",
      ]);
      expect(changedNotInPatch(changes, ["big-00.txt", "src/app.ts"])).toEqual([
        "changed but not in the patch: src/app.ts (the copy reached 1 MiB)",
      ]);
    } finally {
      await baseline.dispose();
    }
  });
});

describe("the patch's diff is bounded (review, round 3, session 39: a slow diff held the host 177 s past the run)", () => {
  /** Two sides in a scratch folder: a/x.txt and b/x.txt. */
  function sides(a: string, b: string): string {
    const scratch = tree({ "a/x.txt": a, "b/x.txt": b });
    return scratch;
  }

  it("past its deadline there is no patch, and a note says why; the caller's stop rejects", async () => {
    const scratch = sides("one\n", "two\n");
    const notes: string[] = [];
    expect(await diffSides(scratch, (line) => notes.push(line), { timeoutMs: 1 })).toBe("");
    expect(notes).toEqual([expect.stringMatching(/^no patch: git diff took longer than/)]);
    const stop = new AbortController();
    stop.abort(new Error("stopped by the caller"));
    await expect(diffSides(scratch, () => {}, { signal: stop.signal })).rejects.toThrow("stopped by the caller");
    // Unbounded by either, the same sides make their patch.
    expect(await diffSides(scratch, () => {})).toContain("-one\n+two\n");
  });

  it("the side folders come out of a patch of many lines without holding the event loop, headers only", async () => {
    // A content line that looks like a header ("--- a/a/...") inside a hunk stays as it is.
    const hunk = Array.from({ length: 300_000 }, (_, i) => (i % 1000 === 0 ? "--- a/a/x.txt" : `+${i}`)).join("\n");
    const patch = `diff --git a/a/x.txt b/b/x.txt\n--- a/a/x.txt\n+++ b/b/x.txt\n@@ -0,0 +1,300000 @@\n${hunk}\n`;
    const { value: stripped, turns } = await turnsDuring(() => stripSidePrefixes(patch));
    expect(
      stripped.startsWith(
        "diff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n@@ -0,0 +1,300000 @@\n--- a/a/x.txt\n+1\n",
      ),
    ).toBe(true);
    expect(stripped.length).toBe(patch.length - 8);
    expect(turns).toBeGreaterThanOrEqual(4);
  });
});
