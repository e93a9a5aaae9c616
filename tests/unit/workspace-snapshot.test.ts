// Snapshot and diff on real directories: what counts as created, modified and deleted, and
// the cases metadata alone would get wrong.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { protectedChanges, protectedMountPaths } from "../../src/workspace/protected-paths.js";
import { diffSnapshots, entryChanged, takeSnapshot, type EntryState } from "../../src/workspace/workspace-snapshot.js";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";

const dirs: string[] = [];
function tree(files: Record<string, string>): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-snap-")));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function diffAfter(root: string, change: () => void) {
  const before = await takeSnapshot(root);
  change();
  return diffSnapshots(before, await takeSnapshot(root, { previous: before }));
}

describe("takeSnapshot / diffSnapshots", () => {
  it("reports created, modified and deleted files with relative paths, sorted", async () => {
    const root = tree({ "a.txt": "a", "src/b.ts": "b", "src/c.ts": "c" });
    const diff = await diffAfter(root, () => {
      fs.writeFileSync(path.join(root, "src/b.ts"), "b2");
      fs.rmSync(path.join(root, "src/c.ts"));
      fs.mkdirSync(path.join(root, "new/deep"), { recursive: true });
      fs.writeFileSync(path.join(root, "new/deep/d.ts"), "d");
      fs.writeFileSync(path.join(root, "0.txt"), "0");
    });
    expect(diff).toEqual({ created: ["0.txt", "new/deep/d.ts"], modified: ["src/b.ts"], deleted: ["src/c.ts"] });
  });

  it("reports nothing when nothing changed, and nothing for an identical rewrite", async () => {
    const root = tree({ "a.txt": "same", "b.txt": "b" });
    expect(await diffAfter(root, () => {})).toEqual({ created: [], modified: [], deleted: [] });
    // `git checkout` of an unchanged file: new inode and mtime, same bytes.
    const diff = await diffAfter(root, () => {
      fs.rmSync(path.join(root, "a.txt"));
      fs.writeFileSync(path.join(root, "a.txt"), "same");
    });
    expect(diff.modified).toEqual([]);
  });

  it("catches a same-size write whose mtime was put back (content hash)", async () => {
    const root = tree({ "ci.yml": "run: test" });
    const file = path.join(root, "ci.yml");
    const { atime, mtime } = fs.statSync(file);
    const diff = await diffAfter(root, () => {
      fs.writeFileSync(file, "run: evil");
      fs.utimesSync(file, atime, mtime);
    });
    expect(diff.modified).toEqual(["ci.yml"]);
  });

  it("catches a same-size write with mtime put back in a tree that is not hashed (ctime)", async () => {
    const root = tree({ ".git/objects/ab/cdef": "object-1" });
    const file = path.join(root, ".git/objects/ab/cdef");
    const before = await takeSnapshot(root);
    expect(before.get(".git/objects/ab/cdef")?.hash).toBeUndefined(); // metadata only there
    const { atime, mtime } = fs.statSync(file);
    await new Promise((r) => setTimeout(r, 20)); // let ctime move on coarse clocks
    fs.writeFileSync(file, "object-2");
    fs.utimesSync(file, atime, mtime);
    const diff = diffSnapshots(before, await takeSnapshot(root, { previous: before }));
    expect(diff.modified).toEqual([".git/objects/ab/cdef"]);
  });

  it("reports a mode change (chmod +x) as a modification", async () => {
    const root = tree({ "hook.sh": "#!/bin/sh" });
    const diff = await diffAfter(root, () => fs.chmodSync(path.join(root, "hook.sh"), 0o755));
    expect(diff.modified).toEqual(["hook.sh"]);
  });

  it("records symlinks by target without following them, and large files by metadata", async () => {
    const root = tree({ "big.bin": "x".repeat(2048) });
    fs.symlinkSync("/etc/passwd", path.join(root, "link"));
    const before = await takeSnapshot(root, { hashMaxBytes: 1024 });
    expect(before.get("link")).toMatchObject({ kind: "symlink", hash: "/etc/passwd" });
    expect(before.get("big.bin")?.hash).toBeUndefined();
    fs.rmSync(path.join(root, "link"));
    fs.symlinkSync("/etc/shadow", path.join(root, "link"));
    fs.writeFileSync(path.join(root, "big.bin"), "y".repeat(2048));
    const diff = diffSnapshots(before, await takeSnapshot(root, { hashMaxBytes: 1024, previous: before }));
    expect(diff.modified).toEqual(["big.bin", "link"]);
  });

  it("treats a file replaced by a directory as deleted plus created", async () => {
    const root = tree({ thing: "file" });
    const diff = await diffAfter(root, () => {
      fs.rmSync(path.join(root, "thing"));
      fs.mkdirSync(path.join(root, "thing"));
      fs.writeFileSync(path.join(root, "thing/inner"), "x");
    });
    expect(diff).toEqual({ created: ["thing/inner"], modified: [], deleted: ["thing"] });
  });
});

describe("entryChanged", () => {
  const base: EntryState = { kind: "file", size: 3, mtimeMs: 1, ctimeMs: 1, mode: 0o100644, ino: 7, hash: "h" };
  it("trusts hashes over metadata when both sides have one", () => {
    expect(entryChanged(base, { ...base, mtimeMs: 2, ctimeMs: 2, ino: 8 })).toBe(false);
    expect(entryChanged(base, { ...base, hash: "other" })).toBe(true);
  });
  it("falls back to metadata when a side has no hash", () => {
    const noHash = { ...base, hash: undefined };
    expect(entryChanged(noHash, { ...noHash })).toBe(false);
    expect(entryChanged(noHash, { ...noHash, ctimeMs: 5 })).toBe(true);
    expect(entryChanged(noHash, { ...noHash, ino: 9 })).toBe(true);
  });
});

describe("protected paths", () => {
  it("names the protected changes of a diff", () => {
    const changes = {
      created: [".git/hooks/pre-commit", "src/new.ts"],
      modified: [".github/workflows/ci.yml", "README.md"],
      deleted: [".pi/x"],
    };
    expect(protectedChanges(changes, [".git/hooks/**", ".github/workflows/**", ".pi/**"])).toEqual([
      { path: ".git/hooks/pre-commit", change: "created" },
      { path: ".github/workflows/ci.yml", change: "modified" },
      { path: ".pi/x", change: "deleted" },
    ]);
    expect(protectedChanges(changes, [])).toEqual([]);
  });

  it("finds existing protected directories and files to mount read-only, never through a symlink", () => {
    const root = tree({
      ".git/hooks/pre-commit.sample": "x",
      ".git/config": "[core]",
      ".github/workflows/ci.yml": "y",
      "outside/file": "z",
      "src/a.ts": "a",
    });
    fs.symlinkSync(path.join(root, "outside"), path.join(root, ".pi"));
    fs.symlinkSync(path.join(root, "outside/file"), path.join(root, ".npmrc"));
    const patterns = [
      ".git/hooks/**",
      ".git/config",
      ".github/workflows/**",
      ".github/**",
      ".pi/**",
      ".npmrc",
      "missing/**",
      "**/*.pem",
      "src",
      ".git/hooks",
    ];
    expect(protectedMountPaths(root, patterns)).toEqual([
      path.join(root, ".git/config"),
      path.join(root, ".git/hooks"),
      path.join(root, ".github"), // .github/workflows is inside it
    ]);
  });
});

describe("WorkspaceWatch", () => {
  it("reports workspace paths relative, writable-root paths absolute, and only workspace violations", async () => {
    const workspace = tree({ ".github/workflows/ci.yml": "ci", "src/a.ts": "a" });
    const extra = tree({ "cache.txt": "c" });
    const watch = await WorkspaceWatch.start({
      workspace,
      workspaceWritable: true,
      writableRoots: [extra],
      protectedPaths: [".github/workflows/**", "**/cache.txt"],
    });
    fs.writeFileSync(path.join(workspace, ".github/workflows/ci.yml"), "evil");
    fs.writeFileSync(path.join(workspace, "src/b.ts"), "b");
    fs.writeFileSync(path.join(extra, "cache.txt"), "c2");
    const report = await watch.finish();
    expect(report.changedFiles).toEqual({
      created: ["src/b.ts"],
      modified: [".github/workflows/ci.yml", `${extra}/cache.txt`],
      deleted: [],
    });
    expect(report.violations).toEqual([{ path: ".github/workflows/ci.yml", change: "modified" }]);
  });

  it("does not walk a read-only workspace", async () => {
    const workspace = tree({ "a.ts": "a" });
    const watch = await WorkspaceWatch.start({
      workspace,
      workspaceWritable: false,
      writableRoots: [],
      protectedPaths: ["**"],
    });
    fs.writeFileSync(path.join(workspace, "a.ts"), "changed on the host, not by the run");
    const report = await watch.finish();
    expect(report.changedFiles).toEqual({ created: [], modified: [], deleted: [] });
    expect(report.violations).toEqual([]);
  });
});
