// Copy mode's check of a returned tree by the same rules as bind mode's walk: a real repository
// is sent (walk + pack), changed by GNU tar's round trip as the sandbox would change it, read
// back as hostile input, and judged before anything is applied. The git rules see what the
// reader left out (FIFOs), the content that came back (pointers), the mode the archive gave
// (git-modes), and what the repository's config names.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { workspaceRulesCheck } from "../../src/run/returned-tree-rules.js";
import { type HostTree, walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packTree } from "../../src/workspace-transfer/pack-tree.js";
import { readReturnedTar } from "../../src/workspace-transfer/returned-tar.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir: tempDir, tree } = tempTrees("sandbox-run-returned-");

const env = { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1" };
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, env, encoding: "utf8" });

function repo(files: Record<string, string> = {}, config = ""): string {
  const root = tree({ "src/a.ts": "a\n", ...files });
  git(root, "init", "-q");
  if (config) fs.appendFileSync(path.join(root, ".git/config"), config);
  git(root, "add", ".");
  git(root, "commit", "-qm", "init");
  return root;
}

/** Sends the tree, lets `change` work on the sandbox's copy, reads it back and judges it. */
async function roundTrip(root: string, change: (copy: string) => void, disabled: string[] = []) {
  const before: HostTree = await walkHostTree(root);
  const chunks: Buffer[] = [];
  for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
  const copy = tempDir("sandbox-run-returned-copy-");
  const x = spawnSync("tar", ["-x", "-f", "-", "-C", copy, "--no-same-owner", "-p"], { input: Buffer.concat(chunks) });
  expect(x.status, x.stderr.toString()).toBe(0);
  change(copy);
  const c = spawnSync("tar", ["-c", "--format=posix", "-f", "-", "-C", copy, "--hard-dereference", "."], {
    maxBuffer: 1 << 28,
  });
  expect(c.status, c.stderr.toString()).toBe(0);
  const returned = await readReturnedTar(Readable.from([c.stdout]), {
    before,
    stagingDir: tempDir("sandbox-run-returned-staging-"),
    limits: { maxBytes: 1 << 28, maxEntries: 100_000, maxPathBytes: 4096, maxDepth: 512, maxLinkTargetBytes: 4096 },
    what: "the workspace",
  });
  const check = workspaceRulesCheck({ lentRoots: [root], disabled });
  const { violations } = await check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, returned);
  return { before, returned, violations, found: violations.map((v) => `${v.rule} ${v.change} ${v.path}`).sort() };
}

describe("copy mode: judging a large returned tree beside other runs of the same controller (review, session 37)", () => {
  it("lets the event loop through as it goes (150,000 entries held a shared controller for over a second)", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 20_000; i++) files[`data/d${i % 50}/f${i}.txt`] = "";
    const root = tree(files);
    const { before, returned } = await roundTrip(root, (copy) =>
      fs.writeFileSync(path.join(copy, "data/new.txt"), "new\n"),
    );
    // The check again, alone, counting the other work that got a turn meanwhile.
    let turns = 0;
    let running = true;
    const tick = () => {
      turns++;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    const check = workspaceRulesCheck({ lentRoots: [root] });
    const { violations } = await check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, returned);
    running = false;
    expect(violations).toEqual([]);
    expect(turns).toBeGreaterThan(1);
  });
});

describe("copy mode: one entry per path (review, session 45)", () => {
  it("a path both left out for its kind and returned as a directory is refused, not paired twice", async () => {
    const root = repo();
    const { before, returned } = await roundTrip(root, (copy) => fs.mkdirSync(path.join(copy, "mirror.git")));
    expect(returned.after.some((e) => e.path === "mirror.git")).toBe(true);
    // The reader refuses such a tar; the rules hold whoever built the lists.
    const doubled = { ...returned, refusedKinds: new Map([["mirror.git", "fifo" as const]]) };
    const check = workspaceRulesCheck({ lentRoots: [root] });
    await expect(check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, doubled)).rejects.toThrow(
      '"mirror.git" appears twice in a tree',
    );
  });
});

describe("copy mode: a tree with more config folders than a run reads (review, session 27)", () => {
  const monorepo = () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 1001; i++) files[`packages/p${i}/.envrc`] = "export A=1\n";
    return repo(files);
  };

  it("is refused by default, and judged with git-config-paths off, the way out the refusal names", async () => {
    await expect(roundTrip(monorepo(), () => {})).rejects.toThrow(/more than 1000 folders/);
    const { found } = await roundTrip(monorepo(), (copy) => fs.writeFileSync(path.join(copy, "src/a.ts"), "b\n"), [
      "git-config-paths",
    ]);
    expect(found).toEqual([]);
  });
});

describe("copy mode: the returned tree's git directories are judged as plain data", () => {
  it("a planted repository spelt in another case (head, OBJECTS, Refs, a config) is a new repository: on a case-insensitive disk git finds it (review, session 35)", async () => {
    const root = repo({ "data/keep.txt": "k\n" });
    const { found } = await roundTrip(root, (copy) => {
      fs.mkdirSync(path.join(copy, "bare/OBJECTS"), { recursive: true });
      fs.mkdirSync(path.join(copy, "bare/Refs"), { recursive: true });
      fs.writeFileSync(path.join(copy, "bare/OBJECTS/.keep"), "");
      fs.writeFileSync(path.join(copy, "bare/Refs/.keep"), "");
      fs.writeFileSync(path.join(copy, "bare/head"), "ref: refs/heads/main\n");
      fs.writeFileSync(path.join(copy, "bare/config"), "[core]\n\tpager = touch /tmp/pwned; cat\n");
      // An existing folder given the markers in another case.
      fs.writeFileSync(path.join(copy, "data/hEaD"), "ref: refs/heads/main\n");
      fs.writeFileSync(path.join(copy, "data/commonDir"), "..\n");
    });
    expect(found).toEqual([
      "new-repositories created bare",
      "new-repositories created data/commonDir",
      "new-repositories created data/hEaD",
    ]);
  });

  it("ordinary git work in the sandbox (commit, branch, pack-refs) passes", async () => {
    const root = repo();
    const { found } = await roundTrip(root, (copy) => {
      fs.writeFileSync(path.join(copy, "src/a.ts"), "a2\n");
      git(copy, "commit", "-qam", "x");
      git(copy, "branch", "topic");
      git(copy, "pack-refs", "--all");
    });
    expect(found).toEqual([]);
  });

  it("a symlinked logs/HEAD and refs/, a FIFO COMMIT_EDITMSG and a bad HEAD are violations before anything is applied", async () => {
    const root = repo();
    const { found, violations } = await roundTrip(root, (copy) => {
      fs.rmSync(path.join(copy, ".git/logs/HEAD"));
      fs.symlinkSync("/root/.bashrc", path.join(copy, ".git/logs/HEAD"));
      fs.rmSync(path.join(copy, ".git/refs"), { recursive: true });
      fs.symlinkSync("/tmp/refs", path.join(copy, ".git/refs"));
      fs.rmSync(path.join(copy, ".git/COMMIT_EDITMSG"));
      execFileSync("mkfifo", [path.join(copy, ".git/COMMIT_EDITMSG")]);
      fs.writeFileSync(path.join(copy, ".git/HEAD"), "ref: ../../.bashrc\n");
    });
    expect(found).toEqual(
      expect.arrayContaining([
        "git-entry-kinds modified .git/COMMIT_EDITMSG",
        "git-entry-kinds modified .git/logs/HEAD",
        "git-entry-kinds modified .git/refs",
        "git-pointers modified .git/HEAD",
      ]),
    );
    expect(violations.find((v) => v.path === ".git/COMMIT_EDITMSG")?.detail).toBe("a FIFO");
  });

  it("modes: a world-writable file is applied without the bits the run added, but inside .git it is a violation", async () => {
    const root = repo({ "run.sh": "echo\n" });
    const { found, returned } = await roundTrip(root, (copy) => {
      fs.chmodSync(path.join(copy, "run.sh"), 0o777);
      fs.chmodSync(path.join(copy, ".git/HEAD"), 0o666);
    });
    expect(found).toEqual(["git-modes modified .git/HEAD"]);
    expect(returned.writeBitsCleared.sort()).toEqual([".git/HEAD", "run.sh"]);
    const runSh = returned.after.find((e) => e.path === "run.sh")!;
    expect([runSh.mode.toString(8), runSh.modeAsReturned?.toString(8)]).toEqual(["755", "777"]);
  });

  it("paths the repository's config names (core.hooksPath, include.path) are protected", async () => {
    const root = repo(
      { ".githooks/pre-commit": "exit 0\n", "team.gitconfig": "[user]\n" },
      "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../team.gitconfig\n",
    );
    const { violations } = await roundTrip(root, (copy) => {
      fs.appendFileSync(path.join(copy, ".githooks/pre-commit"), "touch /tmp/pwned\n");
      fs.appendFileSync(path.join(copy, "team.gitconfig"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    });
    expect(violations.map((v) => `${v.rule} ${v.path}: ${v.detail}`)).toEqual([
      `git-config-paths .githooks/pre-commit: core.hooksPath in ${root}/.git/config`,
      `git-config-paths team.gitconfig: include.path in ${root}/.git/config`,
    ]);
  });
});

describe("copy mode: what one lent tree's configs name in another", () => {
  it("a workspace .envrc's PATH_add into a lent toolchain and a package's .envrc below the top guard what they name (they were read per tree, and only at its top)", async () => {
    const tools = tree({ "bin/mytool": "t\n" });
    const ws = tree({ ".envrc": `PATH_add ${tools}/bin\n` });
    const sent = await roundTrip(tools, (copy) => fs.writeFileSync(path.join(copy, "bin/git"), "planted\n"));
    const lent = [
      { hostPath: ws, entries: (await walkHostTree(ws)).entries },
      { hostPath: tools, entries: sent.before.entries },
    ];
    const check = workspaceRulesCheck({ lentRoots: [ws, tools] });
    const kind = "writable-root" as const;
    const { violations } = await check(
      sent.before.entries,
      sent.returned.after,
      { hostPath: tools, kind },
      sent.returned,
      lent,
    );
    expect(violations.map((v) => `${v.path} ${v.rule}: ${v.detail}`)).toEqual([
      `bin/git git-config-paths: direnv PATH_add in ${ws}/.envrc`,
    ]);

    const mono = repo({ "packages/web/.envrc": "source_env env.local\n", "packages/web/env.local": "x\n" });
    const { found } = await roundTrip(mono, (copy) =>
      fs.appendFileSync(path.join(copy, "packages/web/env.local"), "touch /tmp/x\n"),
    );
    expect(found).toContain("git-config-paths modified packages/web/env.local");
  });
  it("a link at a protected name protects what it points at (a hook, a package's .claude folder)", async () => {
    const ws = tree({ "conf/pre-commit": "npm test\n", "shared/claude/settings.json": "{}\n", "src/a.ts": "a\n" });
    fs.mkdirSync(path.join(ws, ".husky"));
    fs.symlinkSync("../conf/pre-commit", path.join(ws, ".husky/pre-commit"));
    fs.mkdirSync(path.join(ws, "pkg"));
    fs.symlinkSync("../shared/claude", path.join(ws, "pkg/.claude"));
    const { found } = await roundTrip(ws, (copy) => {
      fs.writeFileSync(path.join(copy, "conf/pre-commit"), "touch /tmp/pwned\n");
      fs.writeFileSync(path.join(copy, "shared/claude/settings.json"), '{"hooks":{}}\n');
      fs.writeFileSync(path.join(copy, "src/a.ts"), "ordinary work\n");
    });
    expect(found).toEqual([
      "git-config-paths modified conf/pre-commit",
      "git-config-paths modified shared/claude/settings.json",
    ]);
  });

  it("a host command in a PATH folder the caller also mounts read-only stays guarded under layout node (copy mode counted the mount as a lent tree)", async () => {
    const toolchain = tree({ "bin/mytoolz-s26": "#!/bin/sh\necho host tool\n" });
    const ws = tree({ ".envrc": "layout node\n", "node_modules/.bin/ok": "o\n" });
    const sent = await roundTrip(ws, (copy) =>
      fs.writeFileSync(path.join(copy, "node_modules/.bin/mytoolz-s26"), "x\n"),
    );
    const lent = [
      { hostPath: ws, entries: sent.before.entries },
      { hostPath: toolchain, entries: (await walkHostTree(toolchain)).entries },
    ];
    const savedPath = process.env.PATH;
    process.env.PATH = `${toolchain}/bin:${savedPath}`;
    try {
      const check = workspaceRulesCheck({ lentRoots: [ws] });
      const { violations } = await check(
        sent.before.entries,
        sent.returned.after,
        { hostPath: ws, kind: "workspace" },
        sent.returned,
        lent,
      );
      expect(violations.map((v) => `${v.path} ${v.rule}`)).toEqual(["node_modules/.bin/mytoolz-s26 git-config-paths"]);
    } finally {
      process.env.PATH = savedPath;
    }
  });
});

describe("copy mode: host-run reports come from the same judgement as the violations (re-reading, round 3, session 41)", () => {
  /** A link out of the tree, a name `tar czf out.tgz *` reads as an option, and a link in a folder git refuses by name. */
  const leaveLinksAndNames = (copy: string) => {
    fs.mkdirSync(path.join(copy, "dist"));
    fs.symlinkSync("/etc/hostname", path.join(copy, "dist/notes.txt"));
    fs.mkdirSync(path.join(copy, "-rf"));
    fs.mkdirSync(path.join(copy, "git~1"));
    fs.symlinkSync("/etc/hostname", path.join(copy, "git~1/x"));
  };
  const reported = async (handsBackGitFolders: boolean) => {
    const root = repo();
    const { before, returned } = await roundTrip(root, leaveLinksAndNames);
    const check = workspaceRulesCheck({ lentRoots: [root], handsBackGitFolders });
    const judged = await check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, returned);
    expect(judged.violations).toEqual([]);
    return { paths: judged.hostRun.map((h) => `${h.change} ${h.path}`).sort(), count: judged.hostRunCount };
  };

  it("applied: links out and misread names are reported, a git~1/ folder's too (it is applied as a plain folder)", async () => {
    expect(await reported(true)).toEqual({
      paths: ["created -rf", "created dist/notes.txt", "created git~1/x"],
      count: 3,
    });
  });

  it("handed back as a branch or patch: links resolve through the host's .git, not the sandbox's (its .git swapped for a link to a plain folder made `dist/repo -> ../.git` land there; fix review, round 3, session 41)", async () => {
    const root = repo();
    const { before, returned } = await roundTrip(root, (copy) => {
      fs.rmSync(path.join(copy, ".git"), { recursive: true });
      fs.mkdirSync(path.join(copy, "deep/a/b"), { recursive: true });
      fs.symlinkSync("deep/a/b", path.join(copy, ".git"));
      fs.mkdirSync(path.join(copy, "dist"));
      fs.symlinkSync("../.git", path.join(copy, "dist/repo"));
    });
    const check = workspaceRulesCheck({ lentRoots: [root], handsBackGitFolders: false });
    const judged = await check(before.entries, returned.after, { hostPath: root, kind: "workspace" }, returned);
    // Only this one is handed back (the .git ones are left out of a branch or patch).
    expect(judged.violations.filter((v) => !v.path.split("/").includes(".git") && v.path !== ".git")).toEqual([
      expect.objectContaining({ path: "dist/repo", rule: "git-metadata" }),
    ]);
  });

  it("handed back as a branch: links resolve through the host's own entries where the branch leaves the changes out (an ignored node_modules the sandbox swapped for a link; second fix review, round 3, session 41)", async () => {
    const root = repo({ "node_modules/x.js": "x\n", "d1/d2/keep.txt": "k\n" });
    const { before, returned } = await roundTrip(root, (copy) => {
      fs.rmSync(path.join(copy, "node_modules"), { recursive: true });
      fs.mkdirSync(path.join(copy, "deep/a/b/c"), { recursive: true });
      fs.symlinkSync("deep/a/b/c", path.join(copy, "node_modules"));
      // Inside by its text and in the sandbox; out of the tree once node_modules is the host's folder.
      fs.symlinkSync("../../node_modules", path.join(copy, "d1/d2/w"));
      fs.mkdirSync(path.join(copy, "dist"));
      fs.symlinkSync("../d1/d2/w/../../etc/shadow", path.join(copy, "dist/notes.txt"));
      // An ignored host-run file: the branch leaves it out, so nothing of it reaches the host.
      fs.writeFileSync(path.join(copy, ".env"), "A=1\n");
    });
    const check = workspaceRulesCheck({ lentRoots: [root], handsBackGitFolders: false });
    const at = { hostPath: root, kind: "workspace" } as const;
    const sandboxView = await check(before.entries, returned.after, at, returned);
    expect(sandboxView.hostRun.map((h) => h.path)).not.toContain("dist/notes.txt");
    expect(sandboxView.hostRun.map((h) => h.path)).toContain(".env");
    const leftOut = (p: string) => p === "node_modules" || p === ".env";
    const hostView = await check(before.entries, returned.after, at, returned, undefined, leftOut);
    expect(hostView.hostRun.map((h) => `${h.change} ${h.path}`)).toContain("created dist/notes.txt");
    // What the branch leaves out is not reported: it never reaches the host.
    expect(hostView.hostRun.map((h) => h.path)).not.toContain("node_modules");
    expect(hostView.hostRun.map((h) => h.path)).not.toContain(".env");
  });

  it("handed back as a branch or patch: what is in a git-named folder never reaches the host and is not reported", async () => {
    expect(await reported(false)).toEqual({ paths: ["created -rf", "created dist/notes.txt"], count: 2 });
  });
});
