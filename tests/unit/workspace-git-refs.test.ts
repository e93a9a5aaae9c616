// Commits on the refs the run may move are judged by what they make host git write (issue 17,
// red-team finding 2): a sandbox commit on the current branch that changes .husky/pre-commit was
// written by the host's `git reset --hard`; the same with refs/stash and `git stash pop`, a new
// branch later checked out, an index and `git restore .`, ORIG_HEAD and `reset --hard ORIG_HEAD`.
// Real repositories, the host's real git; bind mode (a watch around a script) and copy mode (the
// script on the returned tree's copy).
import { execFileSync, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { gitSafetyEntries, withGitConfig } from "../../src/run/plan/git-safety-env.js";
import { workspaceRulesCheck } from "../../src/run/returned-tree-rules.js";
import { newReflogOids, parsePackedRefs, resolveRef } from "../../src/workspace/git-ref-files.js";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";
import { type HostTree, walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packTree } from "../../src/workspace-transfer/pack-tree.js";
import { readReturnedTar } from "../../src/workspace-transfer/returned-tar.js";
import {
  BISECT_START_ABBREVIATED,
  BISECT_START_COMMIT,
  BISECT_START_OPTION,
  COMMIT_ON_BRANCH,
  HOOK_IN_BETWEEN,
  HUSKY_REPO,
  NEW_BRANCH,
  ORDINARY_BISECT,
  ORDINARY_WORK,
  SHALLOW_HEAD,
  STAGED_ONLY,
  STASH_PROTECTED,
  UNDONE_COMMIT,
} from "../support/git-object-attacks.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir, tree } = tempTrees("sandbox-run-refs-");
// The scripts stand in for a sandbox, whose image gives git an identity at its lowest level (EMAIL
// here: any config wins over it; the name comes from the user's passwd entry).
const env = { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C", EMAIL: "t@t" };
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, env, encoding: "utf8" });
const sh = (cwd: string, script: string) => {
  const r = spawnSync("bash", ["-c", `set -e\n${script}`], { cwd, env, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`script failed: ${r.stderr}`);
};

function huskyRepo(extra: Record<string, string> = {}): string {
  const ws = tree({ ...HUSKY_REPO.files, ...extra });
  git(ws, "init", "-q", "-b", "master");
  git(ws, "add", ".");
  git(ws, "commit", "-qm", "init");
  sh(ws, HUSKY_REPO.branch);
  return ws;
}

/** `PATH_add tools/bin` (built, untracked); `tools/` is tracked. */
function toolsRepo(): string {
  const ws = tree({ ".envrc": "PATH_add tools/bin\n", "tools/README": "r\n", "src/a": "a\n" });
  git(ws, "init", "-q", "-b", "main");
  git(ws, "add", ".");
  git(ws, "commit", "-qm", "init");
  return ws;
}

/** A branch whose commit makes tools a link to evil/ holding bin/git; HEAD back on main, evil/ gone. */
const TOOLS_LINK_BRANCH = `git checkout -q -b agent-fix && git rm -q -r tools
mkdir -p evil/bin && printf '#!/bin/sh\\necho PWNED\\n' > evil/bin/git && chmod +x evil/bin/git && ln -s evil tools
git add -A && git -c user.name=a -c user.email=a@a commit -qm refactor
git checkout -q main && rm -rf evil`;

async function bindRun(ws: string, script: string, protectedPaths: string[] = []) {
  const w = await WorkspaceWatch.start({
    workspace: ws,
    workspaceWritable: true,
    writableRoots: [],
    protectedPaths,
    stateDir: path.join(dir(), "state"),
  });
  sh(ws, script.replaceAll("MARKER", path.join(dir(), "PWNED")));
  const report = await w.finish();
  return { report, found: report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`).sort() };
}

async function copyRun(root: string, script: string) {
  const before: HostTree = await walkHostTree(root);
  const chunks: Buffer[] = [];
  for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
  const copy = dir();
  const x = spawnSync("tar", ["-x", "-f", "-", "-C", copy, "--no-same-owner", "-p"], { input: Buffer.concat(chunks) });
  expect(x.status, x.stderr.toString()).toBe(0);
  sh(copy, script.replaceAll("MARKER", path.join(dir(), "PWNED")));
  const c = spawnSync("tar", ["-c", "--format=posix", "-f", "-", "-C", copy, "--hard-dereference", "."], {
    maxBuffer: 1 << 28,
  });
  expect(c.status, c.stderr.toString()).toBe(0);
  const returned = await readReturnedTar(Readable.from([c.stdout]), {
    before,
    stagingDir: dir(),
    limits: { maxBytes: 1 << 28, maxEntries: 100_000, maxPathBytes: 4096, maxDepth: 512, maxLinkTargetBytes: 4096 },
    what: "the workspace",
  });
  const check = workspaceRulesCheck({ lentRoots: [root], scratch: path.join(dir(), "scratch") });
  const { violations } = await check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, returned);
  return { violations, found: violations.map((v) => `${v.rule} ${v.change} ${v.path}`).sort() };
}

describe("ref files read as data", { timeout: 60_000 }, () => {
  it("loose refs through symbolic refs, then packed-refs; reflog lines the run added", () => {
    const files = new Map<string, Buffer | null>([
      ["HEAD", Buffer.from("ref: refs/heads/main\n")],
      ["refs/heads/main", null],
      ["refs/heads/loose", Buffer.from(`${"b".repeat(40)}\n`)],
    ]);
    const read = (rel: string) => (files.has(rel) ? files.get(rel)! : null);
    const packed = parsePackedRefs(
      Buffer.from(
        `# pack-refs with: peeled\n${"a".repeat(40)} refs/heads/main\n${"c".repeat(40)} refs/tags/v1\n^${"d".repeat(40)}\n`,
      ),
    );
    expect(resolveRef(read, packed, "HEAD")).toBe("a".repeat(40));
    expect(resolveRef(read, packed, "refs/heads/loose")).toBe("b".repeat(40));
    expect(resolveRef(read, packed, "refs/tags/v1")).toBe("c".repeat(40));
    expect(resolveRef(read, packed, "refs/heads/none")).toBeUndefined();
    expect(resolveRef(() => undefined, packed, "HEAD")).toBe("unknown");
    const line = (oid: string) => `${"0".repeat(40)} ${oid} t <t@t> 1 +0000\tcommit: x\n`;
    const old = Buffer.from(line("a".repeat(40)));
    expect(newReflogOids(old, Buffer.from(line("a".repeat(40)) + line("e".repeat(40))))).toEqual(["e".repeat(40)]);
    // Not kept: what lies past the old size is new.
    expect(newReflogOids(undefined, Buffer.from(line("a".repeat(40)) + line("f".repeat(40))), old.length)).toEqual([
      "f".repeat(40),
    ]);
  });
});

describe("bind mode: commits on the refs the run moved change no protected path", { timeout: 60_000 }, () => {
  it("a commit on the current branch changing .husky/pre-commit (worktree put back): refused, .git reverted; the host's reset --hard and restore . write the original", async () => {
    const ws = huskyRepo();
    const head = git(ws, "rev-parse", "HEAD");
    const { report, found } = await bindRun(ws, COMMIT_ON_BRANCH);
    expect(found).toEqual(
      expect.arrayContaining([".husky/ modified .git/refs/heads/master", ".husky/ modified .git/index"]),
    );
    const ref = report.violations.find((v) => v.path === ".git/refs/heads/master")!;
    expect(ref.detail).toMatch(/^refs\/heads\/master names [0-9a-f]{12}, whose tree changes \.husky\/pre-commit/);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
    expect(git(ws, "rev-parse", "HEAD")).toBe(head);
    git(ws, "reset", "-q", "--hard");
    git(ws, "restore", ".");
    expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("exit 0\n");
  });

  it("a stash holding the change: refused on refs/stash; the host has no stash to pop", async () => {
    const ws = huskyRepo();
    const { found } = await bindRun(ws, STASH_PROTECTED);
    expect(found).toEqual(expect.arrayContaining([".husky/ created .git/refs/stash"]));
    expect(spawnSync("git", ["stash", "list"], { cwd: ws, env, encoding: "utf8" }).stdout).toBe("");
  });

  it("a new branch carrying it, HEAD back on master: refused on the new branch", async () => {
    const ws = huskyRepo();
    const { found } = await bindRun(ws, NEW_BRANCH);
    expect(found).toEqual(expect.arrayContaining([".husky/ created .git/refs/heads/feature"]));
    expect(spawnSync("git", ["rev-parse", "--verify", "-q", "feature"], { cwd: ws, env }).status).not.toBe(0);
  });

  it("the change staged in the index alone: refused on .git/index", async () => {
    const ws = huskyRepo();
    const { found } = await bindRun(ws, STAGED_ONLY);
    expect(found).toEqual([".husky/ modified .git/index"]);
    git(ws, "restore", ".");
    expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("exit 0\n");
  });

  it("a commit made and undone: ORIG_HEAD and the reflogs name it; refused", async () => {
    const ws = huskyRepo();
    const { found, report } = await bindRun(ws, UNDONE_COMMIT);
    expect(found).toEqual(expect.arrayContaining([".husky/ created .git/ORIG_HEAD"]));
    expect(report.restore).toMatchObject({ clean: true });
    expect(fs.existsSync(path.join(ws, ".git/ORIG_HEAD"))).toBe(false);
  });

  it("a commit between the tip and the history before that adds a hook (the tip takes it out again): refused; the host's rebase never replays it", async () => {
    const ws = huskyRepo();
    const head = git(ws, "rev-parse", "HEAD");
    const { found, report } = await bindRun(ws, HOOK_IN_BETWEEN);
    expect(found).toEqual([".husky/ modified .git/refs"]);
    expect(report.violations[0]!.detail).toMatch(/a commit the run made whose tree changes \.husky\/post-commit/);
    expect(git(ws, "rev-parse", "HEAD")).toBe(head);
    expect(git(ws, "log", "--format=%s", "master")).toBe("init\n");
  });

  it("a shallow file naming commits anew: refused, .git reverted (the host's gc would drop the history behind them); one naming fewer passes", async () => {
    const ws = huskyRepo();
    const { found, report } = await bindRun(ws, SHALLOW_HEAD);
    expect(found).toEqual(["git-refs created .git/shallow"]);
    expect(report.violations[0]!.detail).toMatch(/anew as having no parents/);
    expect(fs.existsSync(path.join(ws, ".git/shallow"))).toBe(false);
    expect(git(ws, "rev-list", "--count", "HEAD")).toBe("1\n");
    // A shallow clone that is deepened (its shallow file loses lines, or goes) is ordinary work.
    const both = `${git(ws, "rev-parse", "HEAD").trim()}\n${git(ws, "rev-parse", "other").trim()}\n`;
    fs.writeFileSync(path.join(ws, ".git/shallow"), both);
    const fewer = await bindRun(ws, "git rev-parse HEAD > .git/shallow");
    expect(fewer.found).toEqual([]);
  });

  it("a shallow clone's `fetch --depth 1` after upstream moved passes (its new boundary is fetched history), a boundary on older history does not", async () => {
    const upstream = huskyRepo();
    const ws = path.join(dir(), "shallow-clone");
    git(path.dirname(ws), "clone", "-q", "--depth", "1", `file://${upstream}`, ws);
    sh(upstream, "printf 'b\\n' > src/b.ts && git add src/b.ts && git -c user.name=t -c user.email=t@t commit -qm b");
    const fetched = await bindRun(ws, "git fetch -q --depth 1 origin master");
    expect(fetched.found).toEqual([]);
    expect(fs.readFileSync(path.join(ws, ".git/shallow"), "utf8").trim().split("\n")).toHaveLength(2);
    // A commit of the run's own named as a boundary, with another of its own behind it: that one
    // would go at gc. (In a full clone, the run's commit on HEAD hides all of HEAD's history.)
    const own = await bindRun(
      ws,
      "for m in x y; do git -c user.name=t -c user.email=t@t commit -q --allow-empty -m $m; done && git rev-parse HEAD >> .git/shallow",
    );
    expect(own.found).toContain("git-refs modified .git/shallow");
    expect(own.report.violations.find((v) => v.path === ".git/shallow")!.detail).toMatch(/holds history behind it/);
  });

  it("in a full clone, a commit of the run's own on HEAD named in shallow is refused (it would hide HEAD's history)", async () => {
    const ws = huskyRepo();
    const { found } = await bindRun(
      ws,
      "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git rev-parse HEAD > .git/shallow",
    );
    expect(found).toContain("git-refs created .git/shallow");
    expect(git(ws, "rev-list", "--count", "HEAD")).toBe("1\n");
  });

  it("BISECT_START holding -f: refused, .git reverted; the host's git bisect reset keeps the user's uncommitted change", async () => {
    const ws = huskyRepo();
    fs.writeFileSync(path.join(ws, "src/a.ts"), "the user's uncommitted change\n");
    const { found, report } = await bindRun(ws, BISECT_START_OPTION);
    expect(found).toEqual(["git-pointers created .git/BISECT_START"]);
    expect(report.violations.find((v) => v.rule === "git-pointers")!.detail).toMatch(/starts with "-"/);
    expect(report.restore).toMatchObject({ clean: true });
    expect(fs.existsSync(path.join(ws, ".git/BISECT_START"))).toBe(false);
    git(ws, "bisect", "reset");
    expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe("the user's uncommitted change\n");
  });

  it("BISECT_START naming a commit no ref names (full id, or abbreviated like a branch name): refused", async () => {
    const full = await bindRun(huskyRepo(), BISECT_START_COMMIT);
    expect(full.found).toEqual([".husky/ created .git/BISECT_START"]);
    const abbreviated = await bindRun(huskyRepo(), BISECT_START_ABBREVIATED);
    expect(abbreviated.found).toEqual(["git-refs created .git/BISECT_START"]);
    expect(abbreviated.report.violations[0]!.detail).toMatch(/which is no branch/);
  });

  it("an ordinary bisect left under way passes (BISECT_START names the branch it started on)", async () => {
    const ws = huskyRepo();
    const { found } = await bindRun(ws, ORDINARY_BISECT);
    expect(found).toEqual([]);
    expect(fs.readFileSync(path.join(ws, ".git/BISECT_START"), "utf8")).toBe("master\n");
  });

  it("the caller's protectedPaths and the paths the git config names count in commits too", async () => {
    const ws = huskyRepo({ ".github/workflows/ci.yml": "on: push\n", ".githooks/pre-push": "exit 0\n" });
    fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\thooksPath = .githooks\n");
    const { report } = await bindRun(
      ws,
      `echo 'run: curl evil' >> .github/workflows/ci.yml && echo 'touch x' >> .githooks/pre-push
git -c user.name=a -c user.email=a@a commit -qam ci
git checkout -q HEAD~1 -- .github .githooks && git reset -q`,
      [".github/workflows/**"],
    );
    const details = report.violations.filter((v) => v.path === ".git/refs/heads/master").map((v) => v.rule);
    expect(details).toEqual(["git-config-paths"]);
    expect(report.violations.find((v) => v.path === ".git/refs/heads/master")!.detail).toMatch(
      /changes \.githooks\/pre-push \(core\.hooksPath .*\) \(and 1 more\)/,
    );
  });

  it("committing the worktree's own protected file as it was before the run passes", async () => {
    const ws = huskyRepo();
    // The user's uncommitted edit, there before the run: the agent commits it with its own work.
    fs.writeFileSync(path.join(ws, ".husky/pre-commit"), "npm test\n");
    const { found } = await bindRun(
      ws,
      "echo b > src/b.ts && git add -A && git -c user.name=a -c user.email=a@a commit -qm 'with the hook'",
    );
    expect(found).toEqual([]);
  });

  it("ordinary work passes: commits on a branch, a new branch, a stash, gc", async () => {
    const ws = huskyRepo();
    const { found, report } = await bindRun(ws, ORDINARY_WORK);
    expect(found).toEqual([]);
    expect(report.gitChecks?.refRoots).toBe(1);
    expect(git(ws, "stash", "list")).toContain("stash@{0}");
  });

  it("past the bound (more than 1,000 new commits to judge) the git directory is refused as a whole", async () => {
    const ws = huskyRepo();
    const lines = Array.from(
      { length: 1001 },
      (_, i) => `${"0".repeat(40)} ${crypto.createHash("sha1").update(`${i}`).digest("hex")} a <a@a> 1 +0000\tx\n`,
    ).join("");
    const { report, found } = await bindRun(ws, `printf '%s' '${lines}' >> .git/logs/refs/heads/other`);
    expect(found).toEqual(["git-refs modified .git/logs/refs/heads/other"]);
    expect(report.violations[0]!.detail).toMatch(/not checked: more than 1000 new commits/);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
  });

  it("a sparse reflog (64 MiB of nothing, no disk) cannot be read: refused at once, not held in the controller's memory", async () => {
    const ws = huskyRepo();
    // (Before, it was read whole and parsed, ~2.4 s of blocked event loop and 64 MiB held each, and passed.)
    const { report, found } = await bindRun(ws, "truncate -s 67108863 .git/logs/refs/heads/other");
    expect(found).toEqual(["git-refs modified .git/refs"]);
    expect(report.violations[0]!.detail).toMatch(/logs\/refs\/heads\/other cannot be read/);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
    expect(fs.statSync(path.join(ws, ".git/logs/refs/heads/other")).size).toBeLessThan(4096);
  });

  it("a submodule moved to another commit is refused (its commit lives in another repository)", async () => {
    const ws = huskyRepo();
    const { found, report } = await bindRun(
      ws,
      `sub=$(git rev-parse HEAD)
git update-index --add --cacheinfo "160000,$sub,vendor/lib"
git -c user.name=a -c user.email=a@a commit -qm 'vendor lib'
git rm -q --cached vendor/lib`,
    );
    expect(found).toEqual(expect.arrayContaining(["git-refs modified .git/refs/heads/master"]));
    expect(report.violations.find((v) => v.rule === "git-refs")!.detail).toMatch(/moves the submodule vendor\/lib/);
  });

  it("a new branch whose commit makes a PATH_add folder's parent a link (tools -> evil, evil/bin/git): refused like the worktree's own change; the host has no branch to check out", async () => {
    const ws = toolsRepo();
    const { report, found } = await bindRun(ws, TOOLS_LINK_BRANCH);
    expect(found).toEqual(expect.arrayContaining(["git-config-paths created .git/refs/heads/agent-fix"]));
    expect(report.violations.find((v) => v.path === ".git/refs/heads/agent-fix")!.detail).toMatch(
      /^refs\/heads\/agent-fix names [0-9a-f]{12}, whose tree changes tools \(a parent of tools\/bin \(.*\) is no longer a directory\)/,
    );
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
    expect(git(ws, "branch", "--list", "agent-fix")).toBe("");
  });

  it("layout node, node_modules ignored and installed: a commit putting node_modules there as a link to a committed folder holding .bin/git is refused", async () => {
    const ws = tree({ ".envrc": "layout node\n", ".gitignore": "node_modules/\n", "src/a": "a\n" });
    git(ws, "init", "-q", "-b", "main");
    git(ws, "add", ".");
    git(ws, "commit", "-qm", "init");
    fs.mkdirSync(path.join(ws, "node_modules/.bin"), { recursive: true });
    fs.writeFileSync(path.join(ws, "node_modules/.bin/tsc"), "tsc");
    const { report, found } = await bindRun(
      ws,
      `git checkout -q -b agent-fix
mkdir -p vendor-tools/.bin && printf '#!/bin/sh\\necho PWNED\\n' > vendor-tools/.bin/git && git add vendor-tools
git update-index --add --cacheinfo "120000,$(printf vendor-tools | git hash-object -w --stdin),node_modules"
git -c user.name=a -c user.email=a@a commit -qm tools
git checkout -q -f main && rm -rf vendor-tools`,
    );
    expect(found).toEqual(expect.arrayContaining(["git-config-paths created .git/refs/heads/agent-fix"]));
    expect(report.violations.find((v) => v.path === ".git/refs/heads/agent-fix")!.detail).toMatch(
      /whose tree changes node_modules \(a parent of node_modules\/\.bin\/<a host command> \(.*\) is no longer a directory\)/,
    );
    expect(git(ws, "branch", "--list", "agent-fix")).toBe("");
  });

  it("the link only staged (the host's restore . would write it): refused on .git/index", async () => {
    const ws = toolsRepo();
    const { found } = await bindRun(
      ws,
      `git rm -q -r --cached tools && git update-index --add --cacheinfo "120000,$(printf evil | git hash-object -w --stdin),tools"`,
    );
    expect(found).toEqual(["git-config-paths modified .git/index"]);
  });
});

describe("copy mode: the same, judged before anything is applied", { timeout: 60_000 }, () => {
  it("the commit, the stash, the new branch, the index are refused; ordinary work passes", async () => {
    expect((await copyRun(huskyRepo(), COMMIT_ON_BRANCH)).found).toEqual(
      expect.arrayContaining([".husky/ modified .git/refs/heads/master"]),
    );
    expect((await copyRun(huskyRepo(), STASH_PROTECTED)).found).toEqual(
      expect.arrayContaining([".husky/ created .git/refs/stash"]),
    );
    expect((await copyRun(huskyRepo(), NEW_BRANCH)).found).toEqual(
      expect.arrayContaining([".husky/ created .git/refs/heads/feature"]),
    );
    expect((await copyRun(huskyRepo(), STAGED_ONLY)).found).toEqual([".husky/ modified .git/index"]);
    expect((await copyRun(huskyRepo(), HOOK_IN_BETWEEN)).found).toEqual([".husky/ modified .git/refs"]);
    expect((await copyRun(huskyRepo(), SHALLOW_HEAD)).found).toEqual(["git-refs created .git/shallow"]);
    expect((await copyRun(huskyRepo(), ORDINARY_WORK)).found).toEqual([]);
  });

  it("a new branch whose commit makes a PATH_add folder's parent a link: refused before the apply", async () => {
    expect((await copyRun(toolsRepo(), TOOLS_LINK_BRANCH)).found).toEqual(
      expect.arrayContaining(["git-config-paths created .git/refs/heads/agent-fix"]),
    );
  });

  it("BISECT_START: an option, a hidden commit, a name that is no branch are refused; an ordinary bisect passes", async () => {
    expect((await copyRun(huskyRepo(), BISECT_START_OPTION)).found).toEqual(["git-pointers created .git/BISECT_START"]);
    expect((await copyRun(huskyRepo(), BISECT_START_COMMIT)).found).toEqual([".husky/ created .git/BISECT_START"]);
    expect((await copyRun(huskyRepo(), BISECT_START_ABBREVIATED)).found).toEqual([
      "git-refs created .git/BISECT_START",
    ]);
    expect((await copyRun(huskyRepo(), ORDINARY_BISECT)).found).toEqual([]);
  });
});

describe("other worktrees' and submodules' indexes (the host's git restore . there writes them)", {
  timeout: 60_000,
}, () => {
  /** A repository whose config runs `.githooks` (core.hooksPath), with a tracked pre-commit. */
  function hooksRepo(): string {
    const ws = tree({ ".githooks/pre-commit": "#!/bin/sh\nexit 0\n", "src/a": "a\n" });
    fs.chmodSync(path.join(ws, ".githooks/pre-commit"), 0o755);
    git(ws, "init", "-q", "-b", "main");
    git(ws, "config", "core.hooksPath", ".githooks");
    git(ws, "add", ".");
    git(ws, "commit", "-qm", "init");
    return ws;
  }
  const STAGE_PAYLOAD = (index?: string) =>
    `B=$(printf '#!/bin/sh\\ntouch MARKER\\n' | git hash-object -w --stdin) && ${index ? `GIT_INDEX_FILE=${index} ` : ""}git update-index --cacheinfo 100755,$B,.githooks/pre-commit`;

  it("a payload staged for a config-named hook in a linked worktree's index is refused (bind and copy mode); staging the user's own content there passes", async () => {
    const ws = hooksRepo();
    git(ws, "worktree", "add", "-q", "-b", "feat", path.join(dir(), "linked"));
    const bind = await bindRun(ws, STAGE_PAYLOAD(".git/worktrees/linked/index"));
    expect(bind.found).toEqual(["git-config-paths modified .git/worktrees/linked/index"]);
    const copy = await copyRun(ws, STAGE_PAYLOAD(".git/worktrees/linked/index"));
    expect(copy.found).toEqual(["git-config-paths modified .git/worktrees/linked/index"]);
    // The file as it is in the worktree's commit, staged again: no new content.
    const own = await bindRun(
      ws,
      "B=$(git hash-object -w .githooks/pre-commit) && GIT_INDEX_FILE=.git/worktrees/linked/index git update-index --cacheinfo 100755,$B,.githooks/pre-commit && GIT_INDEX_FILE=.git/worktrees/linked/index git update-index --add --cacheinfo 100644,$B,src/b",
    );
    expect(own.found).toEqual([]);
  });

  it("a payload staged for a hook its own config names in a submodule's index (.git/modules/<name>) is refused", async () => {
    const lib = hooksRepo();
    const ws = tree({ "README.md": "r\n" });
    git(ws, "init", "-q", "-b", "main");
    git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib");
    git(ws, "commit", "-qm", "lib");
    git(path.join(ws, "lib"), "config", "core.hooksPath", ".githooks");
    const bind = await bindRun(ws, `cd lib && ${STAGE_PAYLOAD()}`);
    expect(bind.found).toEqual(["git-config-paths modified .git/modules/lib/index"]);
  });
});

describe("a repository with a split index (core.splitIndex)", { timeout: 60_000 }, () => {
  it("git in the sandbox, with the sandbox's git configuration, writes a whole index: a commit passes the index check", async () => {
    const ws = tree({ "src/a": "a\n", "README.md": "r\n" });
    git(ws, "init", "-q", "-b", "main");
    git(ws, "config", "core.splitIndex", "true");
    git(ws, "add", ".");
    git(ws, "commit", "-qm", "init");
    expect(fs.readdirSync(path.join(ws, ".git")).some((n) => n.startsWith("sharedindex."))).toBe(true);
    const sandboxGit = Object.entries(
      withGitConfig({}, gitSafetyEntries({ externalDiff: false, filters: [], diffs: [], merges: [] })),
    )
      .map(([k, v]) => `export ${k}=${JSON.stringify(v)}`)
      .join("\n");
    const run = await bindRun(
      ws,
      `${sandboxGit}\necho b > src/b && git add src/b && git -c user.name=t -c user.email=t@t commit -qm b`,
    );
    expect(run.found).toEqual([]);
    expect(git(ws, "log", "--format=%s")).toBe("b\ninit\n");
  });
});

describe("a store the repository borrows objects from, in the tree but in no git directory (review, session 37)", {
  timeout: 60_000,
}, () => {
  /** A repository whose objects live in store/objects (named by .git/objects/info/alternates), as `clone --reference ./store` leaves it. */
  function borrowingRepo(): { ws: string; secret: string } {
    const ws = tree({ "a.txt": "a\n" });
    git(ws, "init", "-q", "-b", "main");
    git(ws, "add", ".");
    git(ws, "commit", "-qm", "init");
    sh(
      ws,
      `mkdir store && mv .git/objects store/objects && mkdir -p .git/objects/info && echo "$PWD/store/objects" > .git/objects/info/alternates`,
    );
    expect(git(ws, "log", "--format=%s")).toBe("init\n");
    // A host file whose last line must never reach a message.
    const secret = path.join(dir(), "secret");
    fs.writeFileSync(secret, "first line\nSECRET-LAST-LINE-0451\n");
    return { ws, secret };
  }
  // The sandbox commits on a new branch (the host's ref check runs git), then makes the store's own
  // alternates a link to a host file or a FIFO.
  const commitThen = (plant: string) =>
    `git checkout -q -b agent && echo b >> a.txt && git commit -qam b && git checkout -q main && ${plant}`;

  it.each([
    [
      "a link to a host file",
      (secret: string) => `mkdir -p store/objects/info && ln -s ${secret} store/objects/info/alternates`,
    ],
    ["a FIFO", () => "mkdir -p store/objects/info && mkfifo store/objects/info/alternates"],
  ])(
    "bind mode: its alternates made %s is a violation, the host's git never reads it, and no message quotes it",
    async (_, plant) => {
      const { ws, secret } = borrowingRepo();
      const run = await bindRun(ws, commitThen(plant(secret)));
      expect(run.found).toContain("git-config-paths created store/objects/info/alternates");
      const said = JSON.stringify(run.report.violations);
      expect(said).not.toContain("SECRET-LAST-LINE");
      expect(said).not.toContain("first line");
      // Git never ran over the changed store: the refs go back unchecked.
      expect(run.report.violations.find((v) => v.rule === "git-refs")?.detail).toBe(
        "not checked: an object store repositories here borrow from changed in the run",
      );
    },
  );

  it("bind mode: ordinary work in the borrowing repository passes: git finds the borrowed objects through the private stores", async () => {
    const { ws } = borrowingRepo();
    const run = await bindRun(ws, commitThen("git log -q --format=%s agent > /dev/null"));
    expect(run.found).toEqual([]);
    expect(git(ws, "log", "--format=%s", "agent")).toBe("b\ninit\n");
  });

  it.each([
    [
      "a FIFO among its packs",
      "mkdir -p store/objects/pack && mkfifo store/objects/pack/pack-0000000000000000000000000000000000000000.idx",
      "created store/objects/pack/pack-0000000000000000000000000000000000000000.idx",
    ],
    [
      "a forged blob (git checks no blob it reads for a checkout: the user's next git restore would write it)",
      'f=store/objects/$(git rev-parse HEAD:a.txt | sed "s#^..#&/#") && chmod u+w $f && printf "blob 6\\0forged" | python3 -c "import sys,zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read()))" > $f',
      "modified store/objects/",
    ],
  ])("bind mode: %s is a violation, and no ref is checked by git: the refs go back", async (_, plant, change) => {
    const { ws } = borrowingRepo();
    const run = await bindRun(ws, commitThen(plant));
    expect(
      run.found.some((f) => f.startsWith(`git-config-paths ${change}`)),
      run.found.join("\n"),
    ).toBe(true);
    expect(run.found).toContain("git-refs modified .git/refs");
    expect(run.report.violations.find((v) => v.rule === "git-refs")?.detail).toBe(
      "not checked: an object store repositories here borrow from changed in the run",
    );
  });

  it("copy mode: the same link is refused before anything is applied", async () => {
    const { ws, secret } = borrowingRepo();
    const run = await copyRun(
      ws,
      commitThen(`mkdir -p store/objects/info && ln -s ${secret} store/objects/info/alternates`),
    );
    expect(run.found).toContain("git-config-paths created store/objects/info/alternates");
    expect(JSON.stringify(run.violations)).not.toContain("SECRET-LAST-LINE");
  });
});
