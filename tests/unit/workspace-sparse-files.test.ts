// Sparse files a run may leave for free (`truncate -s 1M`): the next run's host side must not pay
// their apparent size. Bind mode's snapshot compares them by metadata instead of hashing their
// zeros (protected ones stay hashed and kept); copy mode refuses a tree they alone take past
// diskMb, naming them, instead of telling the caller to raise diskMb.

import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { CopyModeWorkspace } from "../../src/run/copy-mode/copy-mode-workspace.js";
import type { RunTimeline } from "../../src/run/run-events.js";
import type { RunPlan } from "../../src/sandbox-contract.js";
import { type EntryPair, entryChanged } from "../../src/workspace/workspace-rules.js";
import { diffAgainstSnapshot, takeSnapshot } from "../../src/workspace/workspace-snapshot.js";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir, tree } = tempTrees("sandbox-run-sparse-");

/** A file of `size` bytes that are all holes (as `truncate -s` makes it). */
function sparse(file: string, size: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, "");
  fs.truncateSync(file, size);
}

describe("bind mode's snapshot: sparse files", () => {
  it("are compared by metadata, not hashed (small and dense files still are); a write with mtime put back is still seen", async () => {
    const root = tree({ "dense.bin": "x".repeat(128 * 1024), "tiny.txt": "x" });
    sparse(path.join(root, "cache/blob"), 1024 * 1024);
    sparse(path.join(root, "cache/edited"), 1024 * 1024);
    const file = path.join(dir(), "snapshot.bin");
    await takeSnapshot(root, file);
    const edited = path.join(root, "cache/edited");
    const { atime, mtime } = fs.statSync(edited);
    await new Promise((r) => setTimeout(r, 20)); // let ctime move on coarse clocks
    const fd = fs.openSync(edited, "r+");
    fs.writeSync(fd, "evil", 4096);
    fs.closeSync(fd);
    fs.utimesSync(edited, atime, mtime);
    const pairs = new Map<string, EntryPair>();
    await diffAgainstSnapshot(root, file, { onPair: (pair) => pairs.set(pair.path, pair) });
    expect(pairs.get("cache/blob")?.before?.hash).toBeUndefined();
    expect(pairs.get("cache/edited")?.before?.hash).toBeUndefined();
    expect(pairs.get("dense.bin")?.before?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(pairs.get("tiny.txt")?.before?.hash).toMatch(/^[0-9a-f]{64}$/);
    const editedPair = pairs.get("cache/edited")!;
    expect(entryChanged(editedPair.before!, editedPair.after!)).toBe(true);
  });

  it("an ordinary one re-made is a change (metadata); a protected one is still kept: a write to it is a violation, put back", async () => {
    const ws = tree({ "README.md": "hi\n" });
    sparse(path.join(ws, "cache/blob"), 1024 * 1024);
    sparse(path.join(ws, "data/keep.bin"), 512 * 1024);
    const keep = path.join(ws, "data/keep.bin");
    const w = await WorkspaceWatch.start({
      workspace: ws,
      workspaceWritable: true,
      writableRoots: [],
      protectedPaths: ["data/keep.bin"],
      stateDir: path.join(dir(), "state"),
    });
    // Same bytes, new inode: judged by metadata now (hashing it would have said "unchanged").
    fs.rmSync(path.join(ws, "cache/blob"));
    sparse(path.join(ws, "cache/blob"), 1024 * 1024);
    const { atime, mtime } = fs.statSync(keep);
    const fd = fs.openSync(keep, "r+");
    fs.writeSync(fd, "evil", 100);
    fs.closeSync(fd);
    fs.utimesSync(keep, atime, mtime);
    const report = await w.finish();
    expect(report.changedFiles.modified).toEqual(["cache/blob", "data/keep.bin"]);
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`)).toEqual([
      "protectedPaths modified data/keep.bin",
    ]);
    expect(report.restore?.clean).toBe(true);
    expect(fs.readFileSync(keep).equals(Buffer.alloc(512 * 1024))).toBe(true);
  });
});

describe("copy mode's prepare: sparse files", () => {
  const prepare = (hostPath: string) =>
    CopyModeWorkspace.prepare({
      plan: {
        handBack: "apply",
        copies: [{ kind: "read-only", hostPath, containerPath: "/ro", writable: false }],
      } as unknown as RunPlan,
      runDir: dir(),
      proxy: false,
      diskMb: 1,
      timeline: {} as RunTimeline,
      check: {} as never,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );

  it("a tree that fits but for its sparse files is refused naming the largest, without the diskMb hint; a dense one still gets it", async () => {
    const root = tree({ "src/a.ts": "a\n" });
    sparse(path.join(root, "big1"), 8 * 1024 * 1024);
    sparse(path.join(root, "big2"), 4 * 1024 * 1024);
    for (let i = 0; i < 7; i++) sparse(path.join(root, `cache/blob${i}`), 2 * 1024 * 1024);
    const error = (await prepare(root)) as SandboxRunError;
    expect(isSandboxRunError(error), String(error)).toBe(true);
    expect(error.code).toBe("limit");
    expect(error.shortMessage).toContain(`the read-only directory ${root} holds 9 sparse file(s)`);
    expect(error.shortMessage).toMatch(/big1 \(8 MiB\), big2 \(4 MiB\), cache\/blob\d \(2 MiB\), .* and 4 more\./);
    expect(error.hint).toBe(
      "Remove the sparse files from the tree (or move them out of it), or use bind mode on a local engine.",
    );

    const dense = tree({ "big.bin": "x".repeat(2 * 1024 * 1024) });
    sparse(path.join(dense, "hole"), 4 * 1024 * 1024);
    const denseError = (await prepare(dense)) as SandboxRunError;
    expect(denseError.shortMessage).toContain(`holds 6 MiB, more than the sandbox's copy of it may hold (1 MiB)`);
    expect(denseError.hint).toContain("Raise limits.diskMb");
  });
});
