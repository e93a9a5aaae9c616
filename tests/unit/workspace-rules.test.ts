// The pure rule function: pairs of (path, facts before, facts after) in walk order in, violations
// and restore steps out. The same function judges a returned tar in copy mode, so these cases
// are written as entry lists, with no filesystem.
import { describe, expect, it } from "vitest";
import { builtinProtectionOf, gitPathAllowed } from "../../src/workspace/builtin-protections.js";
import { comparePaths } from "../../src/workspace/fd-walk.js";
import {
  evaluateWorkspaceRules,
  RestorePlan,
  type EntryFacts,
  type EntryPair,
  type RuleConfig,
} from "../../src/workspace/workspace-rules.js";

const dir = (mode = 0o755, extra: Partial<EntryFacts> = {}): EntryFacts => ({
  kind: "directory",
  mode: 0o040000 | mode,
  size: 4096,
  ...extra,
});
const file = (hash: string, mode = 0o644): EntryFacts => ({ kind: "file", mode: 0o100000 | mode, size: 1, hash });
const link = (target: string): EntryFacts => ({ kind: "symlink", mode: 0o120777, size: target.length, hash: target });

/** A tree as path -> facts; "" is the root. */
type Tree = Record<string, EntryFacts>;

const REPO: Tree = {
  "": dir(),
  ".git": dir(0o755, { gitLike: true }),
  ".git/HEAD": file("head"),
  ".git/config": file("config"),
  ".git/description": file("desc"),
  ".git/hooks": dir(),
  ".git/hooks/pre-commit.sample": file("sample"),
  ".git/index": file("index"),
  ".git/info": dir(),
  ".git/info/exclude": file("exclude"),
  ".git/objects": dir(),
  ".git/objects/ab": dir(),
  ".git/objects/ab/cdef": file("obj"),
  ".git/refs": dir(),
  ".git/refs/heads": dir(),
  ".git/refs/heads/main": file("main"),
  src: dir(),
  "src/a.ts": file("a"),
};

/** The pairs of two trees in walk order. */
function pairs(before: Tree, after: Tree): EntryPair[] {
  const paths = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort(comparePaths);
  return paths.map((path) => ({ path, before: before[path], after: after[path] }));
}

function judge(after: Tree, config: RuleConfig = {}, before: Tree = REPO) {
  const violations = evaluateWorkspaceRules(pairs(before, after), config);
  const plan = new RestorePlan();
  for (const v of violations) plan.add(v.restore);
  return {
    found: violations.map((v) => `${v.rule} ${v.change} ${v.path}`),
    steps: plan.ordered(),
  };
}

const withChanges = (changes: Record<string, EntryFacts | undefined>, base: Tree = REPO): Tree => {
  const out: Tree = { ...base };
  for (const [p, f] of Object.entries(changes)) {
    if (f) out[p] = f;
    else delete out[p];
  }
  return out;
};

describe("git directories: only what ordinary git work writes may change", () => {
  it("allows a commit: objects, refs, logs, index, HEAD, ORIG_HEAD, COMMIT_EDITMSG, packed-refs", () => {
    const after = withChanges({
      ".git/objects/12": dir(),
      ".git/objects/12/3456": file("new-object"),
      ".git/refs/heads/main": file("main2"),
      ".git/refs/heads/topic": file("topic"),
      ".git/logs": dir(),
      ".git/logs/HEAD": file("log"),
      ".git/index": file("index2"),
      ".git/HEAD": file("head2"),
      ".git/ORIG_HEAD": file("orig"),
      ".git/COMMIT_EDITMSG": file("msg"),
      ".git/packed-refs": file("packed"),
      ".git/index.lock": file("lock"),
      "src/a.ts": file("a2"),
      "src/b.ts": file("b"),
    });
    expect(judge(after).found).toEqual([]);
  });

  it.each([
    [".git/config", file("fsmonitor")],
    [".git/commondir", file("../evil")],
    [".git/config.worktree", file("fsmonitor")],
    [".git/info/attributes", file("* filter=x")],
    [".git/info/exclude", file("evil.sh")],
    [".git/hooks/pre-commit", file("#!/bin/sh")],
    [".git/objects/info/alternates", file("/elsewhere")],
    [".git/rebase-merge", dir()],
    [".git/description", undefined],
  ])("%s changed: a git-metadata violation that reverts the whole .git", (path, facts) => {
    const after = withChanges({
      [path]: facts,
      ...(path.startsWith(".git/objects/info") ? { ".git/objects/info": dir() } : {}),
    });
    const { found, steps } = judge(after);
    expect(found).toContain(`git-metadata ${REPO[path] ? (facts ? "modified" : "deleted") : "created"} ${path}`);
    expect(steps).toEqual([{ action: "revert", path: ".git" }]);
  });

  it("judges a submodule's git directory (.git/modules/x) by the same rules, as its own git directory", () => {
    const before = withChanges({
      ".git/modules": dir(),
      ".git/modules/x": dir(0o755, { gitLike: true }),
      ".git/modules/x/HEAD": file("h"),
      ".git/modules/x/config": file("c"),
      ".git/modules/x/objects": dir(),
      ".git/modules/x/refs": dir(),
    });
    // Ordinary work in the submodule: fine (relative to its own git dir, not to .git).
    expect(judge(withChanges({ ".git/modules/x/HEAD": file("h2") }, before), {}, before).found).toEqual([]);
    expect(judge(withChanges({ ".git/modules/x/config": file("evil") }, before), {}, before).found).toEqual([
      "git-metadata modified .git/modules/x/config",
    ]);
  });

  it("a .git directory replaced by a gitdir: file: the pointer and the lost config are violations; .git is reverted", () => {
    const after: Tree = { "": dir(), ".git": file("gitdir: evil"), src: dir(), "src/a.ts": file("a") };
    const { found, steps } = judge(after);
    expect(found).toContain("new-repositories modified .git");
    expect(found).toContain("git-metadata deleted .git/config");
    expect(steps).toEqual([{ action: "revert", path: ".git" }]);
  });

  it("a new nested repository (sub/.git, a bare repository, a .git file) is removed as a whole", () => {
    const after = withChanges({
      sub: dir(),
      "sub/.git": dir(0o755, { gitLike: true }),
      "sub/.git/config": file("fsmonitor"),
      "sub/.git/HEAD": file("h"),
      bare: dir(0o755, { gitLike: true }),
      "bare/HEAD": file("h"),
      "bare/config": file("c"),
      "bare/objects": dir(),
      "bare/refs": dir(),
      "other/.git": file("gitdir: ../bare"),
      other: dir(),
    });
    const { found, steps } = judge(after);
    expect(found).toEqual([
      "new-repositories created bare",
      "new-repositories created other/.git",
      "new-repositories created sub/.git",
    ]);
    expect(steps).toEqual([
      { action: "remove", path: "bare" },
      { action: "remove", path: "sub/.git" },
      { action: "remove", path: "other/.git" },
    ]);
  });

  it("an existing directory turned into a bare repository: the marker entries it gained are removed", () => {
    const before = withChanges({ data: dir(), "data/objects": dir(), "data/refs": dir() });
    const after = withChanges({ "data/HEAD": file("h"), data: dir(0o755, { gitLike: true }) }, before);
    const { found, steps } = judge(after, {}, before);
    expect(found).toEqual(["new-repositories created data/HEAD"]);
    expect(steps).toEqual([{ action: "remove", path: "data/HEAD" }]);
  });

  it("the allowed list is exact", () => {
    for (const p of [
      "HEAD",
      "index",
      "refs/heads/x",
      "logs/HEAD",
      "objects/pack/p.pack",
      "FETCH_HEAD",
      "lfs/objects/x",
    ])
      expect(gitPathAllowed(p), p).toBe(true);
    for (const p of ["config", "hooks/post-checkout", "info/attributes", "commondir", "modules/x/config", "gitdir"])
      expect(gitPathAllowed(p), p).toBe(false);
    expect(gitPathAllowed("objects/info/alternates")).toBe(false);
    expect(gitPathAllowed("config.lock")).toBe(false);
    expect(gitPathAllowed("HEAD.lock")).toBe(true);
  });
});

describe("directory modes", () => {
  it("a directory made group/world-writable or setgid is a violation; its mode is set back", () => {
    const after = withChanges({ ".git": dir(0o777, { gitLike: true }), src: dir(0o2755), new: dir(0o777) });
    const { found, steps } = judge(after);
    expect(found).toEqual(["directory-modes mode .git", "directory-modes mode new", "directory-modes mode src"]);
    expect(steps).toEqual(
      expect.arrayContaining([
        { action: "mode", path: ".git", mode: 0o755 },
        { action: "mode", path: "src", mode: 0o755 },
        { action: "mode", path: "new", mode: 0o755 },
      ]),
    );
  });

  it("a directory that already was world-writable is not a violation", () => {
    const before = withChanges({ tmp: dir(0o777) });
    expect(judge(withChanges({ "tmp/x": file("x") }, before), {}, before).found).toEqual([]);
  });
});

describe("built-in protections", () => {
  it("protect the listed names at any depth, case-insensitively, files and directories", () => {
    const after = withChanges({
      ".envrc": file("evil"),
      "src/deep": dir(),
      "src/deep/.BashRC": file("evil"),
      "src/.vscode": dir(),
      "src/.vscode/tasks.json": file("folderOpen"),
      ".claude": dir(),
      ".claude/commands": dir(),
      ".claude/commands/x.md": file("x"),
      ".claude/notes.md": file("fine"),
      ".gitmodules": file("[submodule]"),
      ".mcp.json": file("{}"),
    });
    const { found, steps } = judge(after);
    expect(found).toEqual([
      ".claude/commands/ created .claude/commands",
      ".claude/commands/ created .claude/commands/x.md",
      ".envrc created .envrc",
      ".gitmodules created .gitmodules",
      ".mcp.json created .mcp.json",
      ".vscode/ created src/.vscode",
      ".vscode/ created src/.vscode/tasks.json",
      ".bashrc created src/deep/.BashRC",
    ]);
    expect(steps.map((s) => `${s.action} ${s.path}`).sort()).toEqual([
      "remove .claude/commands",
      "remove .envrc",
      "remove .gitmodules",
      "remove .mcp.json",
      "remove src/.vscode",
      "remove src/deep/.BashRC",
    ]);
  });

  it("an existing protected directory is reverted as a whole", () => {
    const before = withChanges({ ".vscode": dir(), ".vscode/settings.json": file("s") });
    const { steps } = judge(withChanges({ ".vscode/tasks.json": file("t") }, before), {}, before);
    expect(steps).toEqual([{ action: "revert", path: ".vscode" }]);
  });

  it("a policy turns one off only by naming it; other rules still hold below it", () => {
    const after = withChanges({ ".vscode": dir(), ".vscode/.envrc": file("x"), ".vscode/a.json": file("y") });
    expect(judge(after, { disabled: [".vscode/"] }).found).toEqual([".envrc created .vscode/.envrc"]);
    expect(judge(withChanges({ ".git/config": file("x") }), { disabled: ["git-metadata"] }).found).toEqual([]);
  });

  it("builtinProtectionOf names the outermost scope", () => {
    expect(builtinProtectionOf("a/.pi/b/.envrc", new Set())).toEqual({ rule: ".pi/", scope: "a/.pi" });
    expect(builtinProtectionOf("a/.pi/b/.envrc", new Set([".pi/"]))).toEqual({
      rule: ".envrc",
      scope: "a/.pi/b/.envrc",
    });
    expect(builtinProtectionOf(".claude/settings.json", new Set())?.scope).toBe(".claude/settings.json");
    expect(builtinProtectionOf("src/profile", new Set())).toBeUndefined();
  });
});

describe("the caller's protectedPaths and the walk", () => {
  it("caller globs: a modified file is reverted, a created one removed", () => {
    const before = withChanges({
      ".github": dir(),
      ".github/workflows": dir(),
      ".github/workflows/ci.yml": file("ci"),
    });
    const after = withChanges(
      { ".github/workflows/ci.yml": file("evil"), ".github/workflows/new.yml": file("n") },
      before,
    );
    const { found, steps } = judge(after, { protectedPaths: [".github/workflows/**"] }, before);
    expect(found).toEqual([
      "protectedPaths modified .github/workflows/ci.yml",
      "protectedPaths created .github/workflows/new.yml",
    ]);
    expect(steps).toEqual([
      { action: "revert", path: ".github/workflows/ci.yml" },
      { action: "remove", path: ".github/workflows/new.yml" },
    ]);
  });

  it("an entry the walk could not see is a violation: an existing directory gets its mode back, a new one goes", () => {
    const before = withChanges({ ".github": dir() });
    const after = withChanges(
      { ".github": dir(0o311, { problem: "cannot list the directory: EACCES" }), hidden: dir(0o311, { problem: "x" }) },
      before,
    );
    const { found, steps } = judge(after, {}, before);
    expect(found).toEqual(["walk unreadable .github", "walk unreadable hidden"]);
    expect(steps).toHaveLength(2);
    expect(steps).toEqual(
      expect.arrayContaining([
        { action: "mode", path: ".github", mode: 0o755 },
        { action: "remove", path: "hidden" },
      ]),
    );
  });

  it("a symlink swapped in for a protected file is a change of kind", () => {
    const before = withChanges({ ".envrc": file("ok") });
    expect(judge(withChanges({ ".envrc": link("/tmp/evil") }, before), {}, before).found).toEqual([
      ".envrc modified .envrc",
    ]);
  });
});
