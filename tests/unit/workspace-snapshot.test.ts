// Snapshot and diff on real directories: what counts as created, modified and deleted, the
// cases metadata alone would get wrong, and a tree too big to list in full.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { protectedMountPaths } from "../../src/workspace/protected-paths.js";
import { type EntryFacts, type EntryPair, entryChanged } from "../../src/workspace/workspace-rules.js";
import {
  ChangeCollector,
  type ChangedFiles,
  diffAgainstSnapshot,
  takeSnapshot,
} from "../../src/workspace/workspace-snapshot.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-snap-");

/** Snapshot, change, diff: the changed files and every pair the merge produced. */
async function diffAfter(
  root: string,
  change: () => void | Promise<void>,
  options: { hashMaxBytes?: number; max?: number } = {},
): Promise<{ changes: ChangedFiles; pairs: EntryPair[] }> {
  const file = path.join(tree({}), "snapshot.bin");
  await takeSnapshot(root, file, { hashMaxBytes: options.hashMaxBytes });
  await change();
  const collector = new ChangeCollector(options.max);
  const pairs: EntryPair[] = [];
  await diffAgainstSnapshot(root, file, {
    hashMaxBytes: options.hashMaxBytes,
    onPair: (pair) => {
      pairs.push(pair);
      const changed = pair.before && pair.after ? entryChanged(pair.before, pair.after) : true;
      collector.addPair(pair, changed);
    },
  });
  return { changes: collector.result(), pairs };
}

describe("takeSnapshot / diffAgainstSnapshot", () => {
  it("reports created, modified and deleted files with relative paths, sorted", async () => {
    const root = tree({ "a.txt": "a", "src/b.ts": "b", "src/c.ts": "c" });
    const { changes } = await diffAfter(root, () => {
      fs.writeFileSync(path.join(root, "src/b.ts"), "b2");
      fs.rmSync(path.join(root, "src/c.ts"));
      fs.mkdirSync(path.join(root, "new/deep"), { recursive: true });
      fs.writeFileSync(path.join(root, "new/deep/d.ts"), "d");
      fs.writeFileSync(path.join(root, "0.txt"), "0");
    });
    expect(changes).toEqual({ created: ["0.txt", "new/deep/d.ts"], modified: ["src/b.ts"], deleted: ["src/c.ts"] });
  });

  it("reports nothing when nothing changed, and nothing for an identical rewrite", async () => {
    const root = tree({ "a.txt": "same", "b.txt": "b" });
    expect((await diffAfter(root, () => {})).changes).toEqual({ created: [], modified: [], deleted: [] });
    // `git checkout` of an unchanged file: new inode and mtime, same bytes.
    const { changes } = await diffAfter(root, () => {
      fs.rmSync(path.join(root, "a.txt"));
      fs.writeFileSync(path.join(root, "a.txt"), "same");
    });
    expect(changes.modified).toEqual([]);
  });

  it("catches a same-size write whose mtime was put back (content hash)", async () => {
    const root = tree({ "ci.yml": "run: test" });
    const file = path.join(root, "ci.yml");
    const { atime, mtime } = fs.statSync(file);
    const { changes } = await diffAfter(root, () => {
      fs.writeFileSync(file, "run: evil");
      fs.utimesSync(file, atime, mtime);
    });
    expect(changes.modified).toEqual(["ci.yml"]);
  });

  it("catches a same-size write with mtime put back in a tree that is not hashed (ctime)", async () => {
    const root = tree({ ".git/objects/ab/cdef": "object-1" });
    const file = path.join(root, ".git/objects/ab/cdef");
    const { atime, mtime } = fs.statSync(file);
    const { changes, pairs } = await diffAfter(root, async () => {
      await new Promise((r) => setTimeout(r, 20)); // let ctime move on coarse clocks
      fs.writeFileSync(file, "object-2");
      fs.utimesSync(file, atime, mtime);
    });
    expect(pairs.find((p) => p.path === ".git/objects/ab/cdef")?.before?.hash).toBeUndefined(); // metadata only
    expect(changes.modified).toEqual([".git/objects/ab/cdef"]);
  });

  it("reports a mode change (chmod +x) as a modification", async () => {
    const root = tree({ "hook.sh": "#!/bin/sh" });
    const { changes } = await diffAfter(root, () => fs.chmodSync(path.join(root, "hook.sh"), 0o755));
    expect(changes.modified).toEqual(["hook.sh"]);
  });

  it("records symlinks by target without following them, and large files by metadata", async () => {
    const root = tree({ "big.bin": "x".repeat(2048) });
    fs.symlinkSync("/etc/passwd", path.join(root, "link"));
    const { changes, pairs } = await diffAfter(
      root,
      () => {
        fs.rmSync(path.join(root, "link"));
        fs.symlinkSync("/etc/shadow", path.join(root, "link"));
        fs.writeFileSync(path.join(root, "big.bin"), "y".repeat(2048));
      },
      { hashMaxBytes: 1024 },
    );
    expect(pairs.find((p) => p.path === "link")?.before).toMatchObject({ kind: "symlink", hash: "/etc/passwd" });
    expect(pairs.find((p) => p.path === "big.bin")?.before?.hash).toBeUndefined();
    expect(changes.modified).toEqual(["big.bin", "link"]);
  });

  it("treats a file replaced by a directory as deleted plus created", async () => {
    const root = tree({ thing: "file" });
    const { changes } = await diffAfter(root, () => {
      fs.rmSync(path.join(root, "thing"));
      fs.mkdirSync(path.join(root, "thing"));
      fs.writeFileSync(path.join(root, "thing/inner"), "x");
    });
    expect(changes).toEqual({ created: ["thing/inner"], modified: [], deleted: ["thing"] });
  });

  it("merges in walk order: a name that sorts between a directory and its children ('a-b' vs 'a/x')", async () => {
    const root = tree({ "a/x": "1", "a-b": "2", "a.c/y": "3" });
    const { changes, pairs } = await diffAfter(root, () => {
      fs.writeFileSync(path.join(root, "a/x"), "changed");
      fs.writeFileSync(path.join(root, "a-b"), "changed");
    });
    expect(changes).toEqual({ created: [], modified: ["a-b", "a/x"], deleted: [] });
    expect(pairs.every((p) => p.before && p.after)).toBe(true);
  });

  it("caps the lists and keeps exact counts", async () => {
    const root = tree({});
    const { changes } = await diffAfter(
      root,
      () => {
        for (let i = 0; i < 25; i++) fs.writeFileSync(path.join(root, `f${i}`), "x");
      },
      { max: 10 },
    );
    expect(changes.created).toHaveLength(10);
    expect(changes.truncated).toEqual({ created: 25, modified: 0, deleted: 0 });
  });
});

describe("entryChanged", () => {
  const base: EntryFacts = { kind: "file", size: 3, mtimeMs: 1, ctimeMs: 1, mode: 0o100644, ino: 7, hash: "h" };
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
  it("judges directories by kind and permission bits only", () => {
    const d: EntryFacts = { kind: "directory", size: 4096, mtimeMs: 1, ctimeMs: 1, mode: 0o040755, ino: 3 };
    expect(entryChanged(d, { ...d, mtimeMs: 9, ctimeMs: 9 })).toBe(false);
    expect(entryChanged(d, { ...d, mode: 0o040777 })).toBe(true);
  });
});

describe("protected paths", () => {
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
    ];
    expect(protectedMountPaths(root, patterns)).toEqual([
      path.join(root, ".git/config"),
      path.join(root, ".git/hooks"),
      path.join(root, ".github"), // .github/workflows is inside it
    ]);
    // A folder named without "/**" matched only the entry itself and protected none of its files,
    // silently (review, session 30): refused, saying what to write.
    for (const bare of ["src", ".git/hooks"])
      expect(() => protectedMountPaths(root, [...patterns, bare])).toThrow(
        `The policy's protectedPaths entry "${bare}" names the folder ${bare}: without "/**" it protects only the entry itself, none of the files inside it.\nWrite "${bare}/**" to protect the folder and everything in it.`,
      );
  });
});

describe("ChangeCollector", () => {
  it("lists paths up to a byte budget in all, the counts exact (review, session 45: 1,300 paths 2,000 folders deep made a list no JSON string holds)", () => {
    const collector = new ChangeCollector(10_000, 100);
    for (const name of ["a", "b", "c"]) collector.add("created", `${name}/${"x".repeat(38)}`);
    collector.add("deleted", "short");
    const other = new ChangeCollector();
    other.add("modified", "m".repeat(30));
    collector.absorb(other);
    const result = collector.result();
    expect(result.created).toEqual([`a/${"x".repeat(38)}`, `b/${"x".repeat(38)}`]);
    expect(result.deleted).toEqual(["short"]);
    expect(result.modified).toEqual([]);
    expect(result.truncated).toEqual({ created: 3, modified: 1, deleted: 1 });
  });
});
