// What the repositories' own git configuration makes executable or configuration inside the lent
// trees, resolved without running git: the config syntax as git reads it, the repositories that
// count (the one a tree is in, nested ones, the ones pointers name), and the paths their keys
// name. Checked against real git where git can say (git config --list, git rev-parse).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseGitConfig } from "../../src/workspace/git-config-parse.js";
import {
  commandPaths,
  configTargets,
  GIT_HOOK_NAMES,
  repositoriesOf,
  targetsInTree,
} from "../../src/workspace/git-config-paths.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-gitpaths-");

/** Host git with nothing of this host's configuration (only `git config`, which runs nothing). */
function gitConfigList(file: string): string[] {
  const out = execFileSync("git", ["config", "--file", file, "--no-includes", "--list", "-z"], {
    encoding: "utf8",
    cwd: "/",
    env: { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1" },
  });
  return out.split("\0").filter(Boolean);
}

describe("parseGitConfig reads what git reads", () => {
  const text = [
    "\ufeff# comment",
    "[core]",
    "\thooksPath = .githooks ; a comment",
    '\tfsmonitor = "./tools/fs mon" --flag # another',
    "\tbare",
    '[includeIf "gitdir:/srv/x/"]',
    "\tpath = ../team.gitconfig",
    "[Diff.Pdf]",
    '\ttextconv = sh -c "pdftotext \\"$1\\"" ',
    "[alias] st = !./scripts/st.sh \\",
    "  --all",
    '[credential "https://example.com"]',
    "\thelper = store --file=./creds",
    "",
  ].join("\n");

  it("sections, subsections (new and old form), quotes, escapes, comments, continuations, keys after headers", () => {
    const entries = parseGitConfig(text).map((e) => `${e.name}=${e.value}`);
    expect(entries).toEqual([
      "core.hookspath=.githooks",
      "core.fsmonitor=./tools/fs mon --flag",
      "core.bare=null",
      "includeif.gitdir:/srv/x/.path=../team.gitconfig",
      'diff.pdf.textconv=sh -c pdftotext "$1"',
      "alias.st=!./scripts/st.sh   --all",
      "credential.https://example.com.helper=store --file=./creds",
    ]);
  });

  it("agrees with git config --list on the same file", () => {
    const dir = tree({ cfg: text });
    const ours = parseGitConfig(text).map((e) => (e.value === null ? e.name : `${e.name}\n${e.value}`));
    expect(ours).toEqual(gitConfigList(path.join(dir, "cfg")));
  });

  it("stops where git would stop (a bad line): what came before still counts", () => {
    expect(parseGitConfig("[core]\n\tpager = ./a/b\n[broken\n\teditor = ./c\n").map((e) => e.name)).toEqual([
      "core.pager",
    ]);
  });
});

describe("commandPaths", () => {
  it("the words of a command that are paths", () => {
    expect(commandPaths('!./scripts/st.sh --all && "tools/x y" | cat')).toEqual(["./scripts/st.sh", "tools/x"]);
    // A MiB of quotes around a word, in one pass (a backtracking regex stripped them from every position).
    expect(commandPaths(`${"'".repeat(1 << 20)}x/y`)).toEqual(["x/y"]);
    expect(commandPaths("store --file=./creds")).toEqual(["./creds"]);
    expect(commandPaths("ssh -i ~/.ssh/k -o X=https://example.com $HOME/y")).toEqual(["~/.ssh/k"]);
    expect(commandPaths("cat")).toEqual([]);
  });
});

describe("configTargets and targetsInTree", () => {
  function repo(files: Record<string, string>, config: string): string {
    const ws = tree(files);
    execFileSync("git", ["init", "-q", ws], { env: { PATH: process.env.PATH, HOME: "/nonexistent" } });
    fs.appendFileSync(path.join(ws, ".git/config"), config);
    return ws;
  }

  it("hooksPath, includes (followed), attributes, excludes, template and the paths commands name", () => {
    const ws = repo(
      { "team.gitconfig": "[core]\n\tpager = ./tools/pager\n", ".githooks/pre-commit": "exit 0\n" },
      [
        "[core]",
        "\thooksPath = .githooks",
        "\tattributesFile = conf/attributes",
        "\texcludesFile = conf/ignore",
        "\tfsmonitor = ./tools/fsmon.sh",
        "\tsshCommand = ssh -i keys/id -F conf/ssh",
        "[commit]",
        "\ttemplate = conf/msg",
        "[include]",
        "\tpath = ../team.gitconfig",
        '[includeIf "onbranch:x"]',
        "\tpath = ../later.gitconfig",
        '[filter "crypt"]',
        "\tclean = ./bin/crypt clean",
        "[alias]",
        "\tdeploy = !scripts/deploy.sh",
        '[credential "https://h"]',
        "\thelper = /usr/bin/helper",
        "[user]",
        "\tname = not a path/ at all",
        "",
      ].join("\n"),
    );
    const repos = repositoriesOf({ roots: [ws], gitDirs: [path.join(ws, ".git")], pointerFiles: [] });
    expect(repos).toEqual([{ gitDir: path.join(ws, ".git"), commonDir: path.join(ws, ".git"), worktree: ws }]);
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect(Object.fromEntries([...inTree].map(([p, why]) => [p, why.replace(ws, "WS")]))).toEqual({
      ".githooks": "core.hooksPath in WS/.git/config",
      "conf/attributes": "core.attributesFile in WS/.git/config",
      "conf/ignore": "core.excludesFile in WS/.git/config",
      "tools/fsmon.sh": "core.fsmonitor in WS/.git/config",
      "keys/id": "core.sshCommand in WS/.git/config",
      "conf/ssh": "core.sshCommand in WS/.git/config",
      "conf/msg": "commit.template in WS/.git/config",
      "team.gitconfig": "include.path in WS/.git/config",
      "later.gitconfig": "includeIf.<condition>.path in WS/.git/config",
      "bin/crypt": "filter.<driver>.clean in WS/.git/config",
      "scripts/deploy.sh": "alias.<name> in WS/.git/config",
      "tools/pager": "core.pager in WS/team.gitconfig",
    });
  });

  it("a hooks folder at the tree's root protects the hook names in it, not the whole tree", () => {
    const ws = repo({}, "[core]\n\thooksPath = .\n");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [] });
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect([...inTree.keys()].sort()).toEqual([...GIT_HOOK_NAMES].sort());
  });

  it("the repository a workspace is in counts, found upwards; paths outside the tree are not its business", () => {
    const top = repo({ "pkg/app/src/a.ts": "a\n" }, "[core]\n\thooksPath = pkg/app/hooks\n\teditor = /usr/bin/vi\n");
    const ws = path.join(top, "pkg/app");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [] });
    expect(repos.map((r) => r.worktree)).toEqual([top]);
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect([...inTree.keys()]).toEqual(["hooks"]);
  });

  it("a .git that is a link to a git directory outside the tree is followed as git follows it: what its config names is protected", () => {
    const store = repo({}, "[core]\n\thooksPath = .githooks\n");
    const ws = tree({ ".githooks/pre-commit": "exit 0\n" });
    fs.symlinkSync(path.join(store, ".git"), path.join(ws, ".git"));
    const hostSays = execFileSync("git", ["config", "core.hooksPath"], { cwd: ws, encoding: "utf8" });
    expect(hostSays.trim()).toBe(".githooks");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [] });
    expect(repos.map((r) => r.worktree)).toEqual([ws]);
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect([...inTree.keys()]).toEqual([".githooks"]);
  });

  it("a symlink in the tree: both the link and what it points at are protected", () => {
    const ws = repo({ "real/hooks/pre-commit": "exit 0\n" }, "[core]\n\thooksPath = hooks-link\n");
    fs.symlinkSync("real/hooks", path.join(ws, "hooks-link"));
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [] });
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect([...inTree.keys()].sort()).toEqual(["hooks-link", "real/hooks"]);
  });

  it("git directories named only by a gitdir: file or a commondir count, with their worktrees", () => {
    const ws = tree({});
    execFileSync("git", ["init", "-q", "--separate-git-dir", path.join(ws, "store"), path.join(ws, "wt")]);
    fs.appendFileSync(path.join(ws, "store/config"), "[core]\n\thooksPath = .hooks\n");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [path.join(ws, "wt/.git")] });
    expect(repos).toEqual([
      { gitDir: path.join(ws, "store"), commonDir: path.join(ws, "store"), worktree: path.join(ws, "wt") },
    ]);
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect([...inTree.keys()]).toEqual(["wt/.hooks"]);
  });

  it("the host's own global config counts too, relative to each repository's worktree", () => {
    const ws = repo({}, "");
    const global = path.join(tree({ gitconfig: "[core]\n\thooksPath = .husky/_\n" }), "gitconfig");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [], pointerFiles: [] });
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [global], home: "/nonexistent" }));
    expect([...inTree.keys()]).toEqual([".husky/_"]);
  });
});
