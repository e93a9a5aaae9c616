// A workspace whose git directory or object store lies outside what a run lends: git in the
// sandbox fails on every command there, and the plan says so before the run (review, session 28).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { gitDirOutsideWarning } from "../../src/workspace/git-dir-outside.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-git-outside-");
const env = { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" };
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, env, encoding: "utf8" });

function repo(): string {
  const ws = fs.realpathSync(tree({ "a.txt": "a\n" }));
  git(ws, "init", "-q", "-b", "main");
  git(ws, "add", ".");
  git(ws, "commit", "-qm", "init");
  return ws;
}

describe("gitDirOutsideWarning", () => {
  it("a repository of its own, or no repository: nothing to say", () => {
    const ws = repo();
    expect(gitDirOutsideWarning(ws, [ws])).toBeUndefined();
    const plain = fs.realpathSync(tree({ "a.txt": "a\n" }));
    expect(gitDirOutsideWarning(plain, [plain])).toBeUndefined();
  });

  it("a linked worktree: names the git directory outside; none once the main repository's .git is lent", () => {
    const main = repo();
    const linked = path.join(fs.realpathSync(tree({})), "linked");
    git(main, "worktree", "add", "-q", "-b", "feat", linked);
    expect(gitDirOutsideWarning(linked, [linked])).toBe(
      `git inside the sandbox will not find this repository: the workspace's .git points to ${main}/.git/worktrees/linked, outside what the run lends (a linked worktree, a submodule, a gitdir elsewhere), so git status, add and commit fail there; lend it too (--writable <dir>: its config, hooks and refs are then judged like the workspace's own .git), or run in the main worktree.`,
    );
    expect(gitDirOutsideWarning(linked, [linked, `${main}/.git`])).toBeUndefined();
  });

  it("a .git that is a link to a folder outside, and a --shared clone's borrowed objects", () => {
    const store = repo();
    const ws = fs.realpathSync(tree({ "a.txt": "a\n" }));
    fs.symlinkSync(path.join(store, ".git"), path.join(ws, ".git"));
    expect(gitDirOutsideWarning(ws, [ws])).toMatch(
      new RegExp(`the workspace's \\.git points to ${store}/\\.git, outside`),
    );
    const clone = path.join(fs.realpathSync(tree({})), "clone");
    git(store, "clone", "-q", "--shared", store, clone);
    expect(gitDirOutsideWarning(clone, [clone])).toMatch(
      new RegExp(`its objects are borrowed from ${store}/\\.git/objects \\(objects/info/alternates`),
    );
    expect(gitDirOutsideWarning(clone, [clone, `${store}/.git/objects`])).toBeUndefined();
  });
});
