// The branch and patch hand-backs without an engine: a judged tree (sent, changed by "the sandbox"
// with GNU tar on both ends, read back as copy-out does) becomes one commit written by the host's
// own git, or a patch, and nothing else changes. The same with real Pi in the real image:
// tests/integration/hand-back.test.ts.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { handBackLine, leftOutNote } from "../../src/cli/run-command.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { branchSelection, commitChanges, HAND_BACK_IDENTITY } from "../../src/hand-back/branch-commit.js";
import { patchOfChanges } from "../../src/hand-back/change-patch.js";
import { findHandBackBase } from "../../src/hand-back/hand-back-base.js";
import type { RunDetails } from "../../src/index.js";
import { selectionAfterCheck } from "../../src/run/copy-mode/hand-back-run.js";
import { workspaceRulesCheck } from "../../src/run/returned-tree-rules.js";
import { judgedChanges } from "../../src/workspace-transfer/judged-changes.js";
import { commitAll, committedTree, git, repoFingerprint, setTraps, sprungTraps } from "../support/git-repo.js";
import { tempTrees } from "../support/temp-trees.js";
import { type RoundTrip, roundTrip } from "../support/transfer-round-trip.js";

const { dir, tree } = tempTrees("sandbox-run-hand-back-");

const sandboxChanges = (copy: string) => {
  fs.writeFileSync(path.join(copy, "a.txt"), "a, changed by the sandbox\n");
  fs.rmSync(path.join(copy, "b.txt"));
  fs.mkdirSync(path.join(copy, "new"));
  fs.writeFileSync(path.join(copy, "new/d.txt"), "new file\n");
  fs.writeFileSync(path.join(copy, "new/empty.txt"), "");
  fs.chmodSync(path.join(copy, "run.sh"), 0o755);
  fs.symlinkSync("a.txt", path.join(copy, "link"));
  fs.writeFileSync(path.join(copy, "image.bin"), Buffer.from([0, 1, 2, 255, 0, 7]));
  // Ignored by the repository's rules: left out.
  fs.mkdirSync(path.join(copy, "build"));
  fs.writeFileSync(path.join(copy, "build/out.js"), "built\n");
  fs.writeFileSync(path.join(copy, "debug.log"), "log\n");
  // Tracked although it matches an ignore rule: its change goes in.
  fs.writeFileSync(path.join(copy, "keep.log"), "tracked log, changed\n");
  // Git metadata and a nested repository: never handed back.
  fs.appendFileSync(path.join(copy, ".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned-by-config\n");
  fs.writeFileSync(path.join(copy, ".git/hooks/post-commit"), "#!/bin/sh\ntouch /tmp/pwned-by-hook\n", {
    mode: 0o755,
  });
  fs.mkdirSync(path.join(copy, "vendor/lib/.git"), { recursive: true });
  fs.writeFileSync(path.join(copy, "vendor/lib/.git/HEAD"), "ref: refs/heads/main\n");
  fs.writeFileSync(path.join(copy, "vendor/lib/code.js"), "nested\n");
  // A filter the host's config defines, asked for by a new .gitattributes: content, never run.
  fs.writeFileSync(path.join(copy, ".gitattributes"), "* filter=probe\n");
};

function hostRepo(): { repo: string; base: string; markers: string } {
  const repo = tree({
    "a.txt": "a\n",
    "b.txt": "b\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    "keep.log": "tracked log\n",
    ".gitignore": "build/\n*.log\n",
  });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "add", "-f", "keep.log");
  git(repo, "commit", "-qm", "base");
  const base = git(repo, "rev-parse", "HEAD").trim();
  const markers = dir("sandbox-run-hand-back-markers-");
  setTraps(repo, markers);
  return { repo, base, markers };
}

async function judged(root: string, change: (copy: string) => void): Promise<RoundTrip> {
  return roundTrip(root, change, {
    copy: dir("sandbox-run-hand-back-copy-"),
    staging: dir("sandbox-run-hand-back-staging-"),
  });
}

/** What branchSelection and commitChanges take for `trip` over `root`, in a private folder of its own. */
async function selectionInput(root: string, trip: RoundTrip) {
  const privateDir = dir("sandbox-run-hand-back-private-");
  return {
    base: await findHandBackBase(root, privateDir),
    changes: judgedChanges(trip.before, trip.returned),
    sent: trip.before,
    returnedPaths: trip.returned.after.map((e) => e.path),
    privateDir,
  };
}

async function branchOf(
  root: string,
  trip: RoundTrip,
  runId = "0123456789ab",
  more: { signal?: AbortSignal; lineCountTimeoutMs?: number } = {},
) {
  return commitChanges({
    ...more,
    ...(await selectionInput(root, trip)),
    runId,
    message: "sandbox-run: changes of run test\n",
    what: "the workspace",
  });
}

async function usageErrorOf(promise: Promise<unknown>, code = "usage"): Promise<SandboxRunError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isSandboxRunError(error), String(error)).toBe(true);
  expect((error as SandboxRunError).code).toBe(code);
  return error as SandboxRunError;
}

/** A hand-back the host refused after the run ran: exit 1, not a usage error (review, session 31). */
const notHandedBackOf = (promise: Promise<unknown>) => usageErrorOf(promise, "not-applied");

describe("branch hand-back", () => {
  it("commits exactly the judged changes onto sandbox-run/<id>, parented on the base, as sandbox-run; the repository is otherwise byte for byte as it was and no hook, fsmonitor, filter or signing program ran", async () => {
    const { repo, base, markers } = hostRepo();
    const trip = await judged(repo, sandboxChanges);
    const before = repoFingerprint(repo);
    const report = await branchOf(repo, trip);

    expect(report).toMatchObject({ mode: "branch", branch: "sandbox-run/0123456789ab", base, repository: repo });
    expect(git(repo, "rev-parse", "refs/heads/sandbox-run/0123456789ab").trim()).toBe(report.commit);
    expect(git(repo, "rev-parse", `${report.commit}^`).trim()).toBe(base);
    expect(git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%G?", report.commit!).trim()).toBe(
      `${HAND_BACK_IDENTITY.name} <${HAND_BACK_IDENTITY.email}>|${HAND_BACK_IDENTITY.name} <${HAND_BACK_IDENTITY.email}>|N`,
    );
    expect(committedTree(repo, report.commit!)).toEqual({
      ".gitattributes": "100644 * filter=probe\n",
      ".gitignore": "100644 build/\n*.log\n",
      "a.txt": "100644 a, changed by the sandbox\n",
      "image.bin": `100644 ${Buffer.from([0, 1, 2, 255, 0, 7]).toString("utf8")}`,
      "keep.log": "100644 tracked log, changed\n",
      link: "120000 a.txt",
      "new/d.txt": "100644 new file\n",
      "new/empty.txt": "100644 ",
      "run.sh": "100755 #!/bin/sh\necho hi\n",
    });
    expect(report.diffStat).toEqual({ files: 9, insertions: 5, deletions: 3 });
    // Binary to git (no line counts): named as such, for the done line (review, session 35).
    expect(report.files).toContainEqual({ path: "image.bin", binary: true });
    expect(report.files).toContainEqual({
      path: "run.sh",
      insertions: expect.any(Number),
      deletions: expect.any(Number),
    });
    expect(report.leftOut).toEqual(
      expect.arrayContaining([
        { path: ".git/config", reason: "git metadata" },
        { path: ".git/hooks/post-commit", reason: "git metadata" },
        { path: "build/out.js", reason: "not tracked, and the repository's ignore rules exclude it" },
        { path: "debug.log", reason: "not tracked, and the repository's ignore rules exclude it" },
        { path: "vendor/lib/code.js", reason: "inside the nested repository vendor/lib" },
      ]),
    );
    // HEAD, the index, the config, the hooks, every working-tree file: not touched at all.
    expect(repoFingerprint(repo)).toEqual(before);
    expect(sprungTraps(markers)).toEqual([]);
    expect(fs.existsSync("/tmp/pwned-by-config") || fs.existsSync("/tmp/pwned-by-hook")).toBe(false);
  });

  it("a file with a NUL byte is binary in the report whatever .gitattributes the run wrote (review, session 45: `*.sh diff` made it three lines)", async () => {
    const { repo } = hostRepo();
    const trip = await judged(repo, (copy) => {
      fs.writeFileSync(path.join(copy, ".gitattributes"), "*.sh diff\n");
      fs.writeFileSync(path.join(copy, "evil.sh"), "echo hi\n\0\nrm -rf ~\n");
    });
    const report = await branchOf(repo, trip);
    expect(report.files).toContainEqual({ path: "evil.sh", binary: true });
    // The user's own git, with no attributes of the branch checked out, says the same.
    expect(git(repo, "diff-tree", "-r", "--numstat", report.base, report.commit!)).toContain("-\t-\tevil.sh");
  });

  it("an edit the commit cannot carry (inside a nested repository) stays in the cut list of what was left out, ahead of git metadata by the hundred, and the done line names it", async () => {
    const { repo } = hostRepo();
    fs.mkdirSync(path.join(repo, "vendor/lib/.git"), { recursive: true });
    fs.writeFileSync(path.join(repo, "vendor/lib/.git/HEAD"), "ref: refs/heads/main\n");
    fs.writeFileSync(path.join(repo, "vendor/lib/code.js"), "nested\n");
    const trip = await judged(repo, (copy) => {
      for (let i = 0; i < 150; i++) fs.writeFileSync(path.join(copy, `.git/refs/heads/b${i}`), "0".repeat(40));
      fs.writeFileSync(path.join(copy, "vendor/lib/code.js"), "nested, changed by the sandbox\n");
      fs.writeFileSync(path.join(copy, "a.txt"), "a, changed by the sandbox\n");
    });
    const report = await branchOf(repo, trip);
    expect(report.leftOutCount).toBe(151);
    expect(report.leftOut[0]).toEqual({
      path: "vendor/lib/code.js",
      reason: "inside the nested repository vendor/lib",
    });
    expect(leftOutNote(report)).toBe(
      "; NOT in the branch and not applied (lost with the sandbox): vendor/lib/code.js (inside the nested repository vendor/lib)",
    );
    expect(leftOutNote({ leftOut: report.leftOut.filter((l) => l.reason === "git metadata") })).toBe("");
  });

  it("branchSelection names what the commit will leave out: ignored, nested, git metadata (second fix review, round 3, session 41); the commit takes that selection as it is, whatever the ignore rules say later", async () => {
    const { repo } = hostRepo();
    fs.writeFileSync(path.join(repo, ".gitignore"), "node_modules\n");
    fs.mkdirSync(path.join(repo, "vendor/lib/.git"), { recursive: true });
    fs.writeFileSync(path.join(repo, "vendor/lib/.git/HEAD"), "ref: refs/heads/main\n");
    fs.writeFileSync(path.join(repo, "vendor/lib/code.js"), "nested\n");
    const trip = await judged(repo, (copy) => {
      fs.mkdirSync(path.join(copy, "node_modules"));
      fs.symlinkSync("../deep", path.join(copy, "node_modules/x"));
      fs.writeFileSync(path.join(copy, "vendor/lib/code.js"), "nested, changed\n");
      fs.writeFileSync(path.join(copy, "a.txt"), "a, changed\n");
      fs.writeFileSync(path.join(copy, ".git/description"), "changed\n");
    });
    const input = await selectionInput(repo, trip);
    const selection = await branchSelection(input);
    expect(selection.leftOut.map((l) => l.path).sort()).toEqual([
      ".git/description",
      "node_modules/x",
      "vendor/lib/code.js",
    ]);
    expect(selection.kept.map((c) => c.path)).toEqual(["a.txt"]);
    // The returned tree was judged with node_modules/x left out: the commit leaves it out too,
    // even once the rules no longer ignore it (they are not read a second time).
    fs.writeFileSync(path.join(repo, ".gitignore"), "");
    const report = await commitChanges({
      ...input,
      selection,
      runId: "0123456789ab",
      message: "sandbox-run: changes of run test\n",
      what: "the workspace",
    });
    const committed = committedTree(repo, report.commit!);
    expect(Object.keys(committed).sort()).toEqual([".gitignore", "a.txt", "b.txt", "keep.log", "run.sh"]);
    expect(committed["a.txt"]).toBe("100644 a, changed\n");
    expect(report.leftOut.map((l) => l.path).sort()).toEqual([
      ".git/description",
      "node_modules/x",
      "vendor/lib/code.js",
    ]);
  });

  it("the caches the check leaves out of the returned tree (a commit-graph of a bare repository in the worktree) stay out of the branch (review, session 45: the selection was chosen before the check)", async () => {
    const { repo } = hostRepo();
    const fixture = dir("sandbox-run-hand-back-fixture-");
    git(fixture, "init", "-q", "-b", "main");
    fs.writeFileSync(path.join(fixture, "run.sh"), "echo honest\n");
    git(fixture, "add", "-A");
    git(fixture, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixture");
    git(repo, "clone", "-q", "--bare", fixture, path.join(repo, "tests/fixtures/repo.git"));
    git(repo, "add", "-A");
    // Past the traps hostRepo set (signing, hooks): this commit is the test's own.
    git(repo, "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "commit", "-qm", "the fixture");
    const graph = "tests/fixtures/repo.git/objects/info/commit-graph";
    const trip = await judged(repo, (copy) => {
      git(path.join(copy, "tests/fixtures/repo.git"), "commit-graph", "write", "--reachable");
      fs.writeFileSync(path.join(copy, "a.txt"), "a, changed\n");
    });
    const input = await selectionInput(repo, trip);
    const chosen = await branchSelection(input);
    expect(chosen.kept.map((c) => c.path)).toContain(graph);
    const leftOut = new Set(chosen.leftOut.map((l) => l.path));
    const check = workspaceRulesCheck({
      lentRoots: [repo],
      handsBackGitFolders: false,
      scratch: dir("sandbox-run-hand-back-scratch-"),
    });
    const { violations } = await check(
      trip.before.entries,
      trip.returned.after,
      { hostPath: repo, kind: "workspace" },
      trip.returned,
      undefined,
      (p) => leftOut.has(p),
    );
    expect(violations).toEqual([]);
    expect(trip.returned.after.map((e) => e.path)).not.toContain(graph);
    const selection = selectionAfterCheck(chosen, trip.returned);
    expect(selection.kept.map((c) => c.path).sort()).toEqual(["a.txt"]);
    const report = await commitChanges({
      ...input,
      selection,
      runId: "0123456789ab",
      message: "sandbox-run: changes of run test\n",
      what: "the workspace",
    });
    const committed = committedTree(repo, report.commit!);
    expect(Object.keys(committed)).not.toContain(graph);
    expect(committed["a.txt"]).toBe("100644 a, changed\n");
  });

  it("a workspace below the repository's top: paths carry its prefix, the rest of the tree stays", async () => {
    const repo = tree({ "top.txt": "top\n", "app/src/main.txt": "main\n" });
    const base = commitAll(repo);
    const workspace = path.join(repo, "app");
    const trip = await judged(workspace, (copy) => fs.writeFileSync(path.join(copy, "src/main.txt"), "changed\n"));
    const report = await branchOf(workspace, trip);
    expect(report.base).toBe(base);
    expect(committedTree(repo, report.commit!)).toEqual({
      "app/src/main.txt": "100644 changed\n",
      "top.txt": "100644 top\n",
    });
    expect(report.files).toEqual([{ path: "src/main.txt", insertions: 1, deletions: 1 }]);
  });

  it("a directory where the host has a symlink: its files go in (git cannot judge ignore rules below a link of the working tree)", async () => {
    const repo = tree({ "real/keep.c": "keep\n", ".gitignore": "*.o\n" });
    fs.symlinkSync("real", path.join(repo, "lib"));
    commitAll(repo);
    const trip = await judged(repo, (copy) => {
      fs.rmSync(path.join(copy, "lib"));
      fs.mkdirSync(path.join(copy, "lib"));
      fs.writeFileSync(path.join(copy, "lib/x.c"), "x\n");
      fs.writeFileSync(path.join(copy, "lib/y.o"), "object\n");
      fs.writeFileSync(path.join(copy, "top.o"), "object\n");
    });
    const report = await branchOf(repo, trip);
    expect(committedTree(repo, report.commit!)).toEqual({
      ".gitignore": "100644 *.o\n",
      "lib/x.c": "100644 x\n",
      "lib/y.o": "100644 object\n",
      "real/keep.c": "100644 keep\n",
    });
    expect(report.leftOut).toEqual([
      { path: "top.o", reason: "not tracked, and the repository's ignore rules exclude it" },
    ]);
  });

  it("changes nothing that goes into a commit: no commit, no branch", async () => {
    const repo = tree({ "a.txt": "a\n", ".gitignore": "*.log\n" });
    commitAll(repo);
    const trip = await judged(repo, (copy) => fs.writeFileSync(path.join(copy, "x.log"), "ignored\n"));
    const report = await branchOf(repo, trip);
    expect(report.branch).toBeUndefined();
    expect(report.commit).toBeUndefined();
    expect(git(repo, "for-each-ref", "--format=%(refname)")).toBe("refs/heads/main\n");
  });

  it("line counts past their deadline: the branch stays, the report says why there are none, and the done line does not imply no binary files (review, round 3, session 39)", async () => {
    const repo = tree({ "a.txt": "a\n" });
    commitAll(repo);
    const trip = await judged(repo, (copy) => fs.writeFileSync(path.join(copy, "a.txt"), "b\n"));
    const report = await branchOf(repo, trip, "0123456789ab", { lineCountTimeoutMs: 1 });
    expect(report.uncounted).toMatch(/^git diff-tree took longer than/);
    expect(report.diffStat).toEqual({ files: 1, insertions: 0, deletions: 0 });
    expect(git(repo, "rev-parse", "sandbox-run/0123456789ab").trim()).toBe(report.commit);
    const line = handBackLine({ handBack: report } as RunDetails, undefined);
    expect(line).toMatch(
      /lines not counted \(git diff-tree took longer than .*\), so which are binary to git is not known either/,
    );
  });

  it("a run stopped by its caller makes no branch (review, round 3, session 39: Ctrl-C was not heard during the hand-back)", async () => {
    const repo = tree({ "a.txt": "a\n" });
    commitAll(repo);
    const trip = await judged(repo, (copy) => fs.writeFileSync(path.join(copy, "a.txt"), "b\n"));
    const stop = new AbortController();
    stop.abort(new Error("stopped by the caller"));
    await expect(branchOf(repo, trip, "0123456789ab", { signal: stop.signal })).rejects.toThrow(
      "stopped by the caller",
    );
    expect(git(repo, "for-each-ref", "--format=%(refname)")).toBe("refs/heads/main\n");
  });

  it("never overwrites a branch: an existing sandbox-run/<id> is refused and stays", async () => {
    const repo = tree({ "a.txt": "a\n" });
    const base = commitAll(repo);
    git(repo, "branch", "sandbox-run/feedfeedfeed");
    const trip = await judged(repo, (copy) => fs.writeFileSync(path.join(copy, "a.txt"), "b\n"));
    const error = await notHandedBackOf(branchOf(repo, trip, "feedfeedfeed"));
    expect(error.message).toMatch(/the branch sandbox-run\/feedfeedfeed could not be created/);
    expect(git(repo, "rev-parse", "sandbox-run/feedfeedfeed").trim()).toBe(base);
  });

  it("a branch named sandbox-run, which blocks every sandbox-run/<id>, is refused before the run", async () => {
    const repo = tree({ "a.txt": "a\n" });
    commitAll(repo);
    git(repo, "branch", "sandbox-run");
    expect((await usageErrorOf(findHandBackBase(repo, dir()))).message).toMatch(
      /a branch named sandbox-run exists there, and git cannot have both/,
    );
    git(repo, "branch", "-m", "sandbox-run", "other");
    expect((await findHandBackBase(repo, dir())).top).toBe(fs.realpathSync(repo));
  });

  it("a workspace that is not a repository, or one without a commit, is a usage error", async () => {
    const plain = tree({ "a.txt": "a\n" });
    expect((await usageErrorOf(findHandBackBase(plain, dir()))).message).toMatch(/is not inside one/);
    const unborn = tree({ "a.txt": "a\n" });
    git(unborn, "init", "-q");
    expect((await usageErrorOf(findHandBackBase(unborn, dir()))).message).toMatch(/HEAD names no commit yet/);
  });

  it("a mode-only change whose host file changed during the run is refused, nothing committed", async () => {
    const repo = tree({ "run.sh": "echo\n" });
    commitAll(repo);
    const trip = await judged(repo, (copy) => fs.chmodSync(path.join(copy, "run.sh"), 0o755));
    fs.writeFileSync(path.join(repo, "run.sh"), "echo pwned\n");
    const error = await notHandedBackOf(branchOf(repo, trip));
    expect(error.message).toMatch(/run\.sh changed on the host during the run/);
    expect(git(repo, "for-each-ref", "--format=%(refname)")).toBe("refs/heads/main\n");
  });
});

describe("patch hand-back", () => {
  it("is a git-style patch of exactly the judged changes (text, binary, link, mode, deletion), without git metadata; git apply turns the host tree into the returned one", async () => {
    const { repo } = hostRepo();
    const pristine = dir("sandbox-run-hand-back-pristine-");
    execFileSync("cp", ["-a", `${repo}/.`, pristine]);
    const trip = await judged(repo, sandboxChanges);
    const before = repoFingerprint(repo);
    const privateDir = dir("sandbox-run-hand-back-private-");
    const report = await patchOfChanges({
      changes: judgedChanges(trip.before, trip.returned),
      sent: trip.before,
      privateDir,
      what: "the workspace",
    });
    expect(report.notes).toEqual([]);
    expect(report.patch).toContain("diff --git a/a.txt b/a.txt");
    expect(report.patch).toContain("deleted file mode 100644");
    expect(report.patch).toContain("old mode 100644\nnew mode 100755");
    expect(report.patch).toContain("GIT binary patch");
    // Named, for the done line: a reader of the patch sees none of its content (review, session 35).
    expect(report.binaryFiles).toEqual(["image.bin"]);
    expect(report.patch).not.toMatch(/\.git\//);
    expect(fs.readdirSync(privateDir)).toEqual([]);
    expect(repoFingerprint(repo)).toEqual(before);

    // Applied to the host tree as it was, the patch gives the judged tree (git metadata aside).
    const patchFile = path.join(dir(), "changes.patch");
    fs.writeFileSync(patchFile, report.patch);
    git(pristine, "apply", "--binary", patchFile);
    expect(fs.readFileSync(path.join(pristine, "a.txt"), "utf8")).toBe("a, changed by the sandbox\n");
    expect(fs.existsSync(path.join(pristine, "b.txt"))).toBe(false);
    expect(fs.readlinkSync(path.join(pristine, "link"))).toBe("a.txt");
    expect(fs.statSync(path.join(pristine, "run.sh")).mode & 0o111).not.toBe(0);
    expect([...fs.readFileSync(path.join(pristine, "image.bin"))]).toEqual([0, 1, 2, 255, 0, 7]);
    expect(fs.readFileSync(path.join(pristine, "vendor/lib/code.js"), "utf8")).toBe("nested\n");
    expect(fs.readFileSync(path.join(pristine, ".git/config"), "utf8")).not.toContain("pwned");
  });

  it("a host link the run changed or removed is shown as a link: what it names on the host keeps its mode (review, session 45: a 0600 file it named became 0755)", async () => {
    const outside = dir("sandbox-run-hand-back-outside-");
    const secret = path.join(outside, "creds");
    fs.writeFileSync(secret, "secret\n", { mode: 0o600 });
    fs.mkdirSync(path.join(outside, "tools"), { mode: 0o700 });
    fs.writeFileSync(path.join(outside, "tool-1.2"), "");
    const repo = tree({ "README.md": "r\n" });
    fs.symlinkSync(secret, path.join(repo, "creds"));
    fs.symlinkSync(path.join(outside, "tools"), path.join(repo, "tools"));
    fs.mkdirSync(path.join(repo, "bin"));
    fs.writeFileSync(path.join(repo, "bin/tool-1.2"), "v1.2\n");
    fs.writeFileSync(path.join(repo, "bin/tool-1.3"), "v1.3\n");
    fs.symlinkSync("tool-1.2", path.join(repo, "bin/tool"));
    commitAll(repo);
    const trip = await judged(repo, (copy) => {
      fs.rmSync(path.join(copy, "creds"));
      fs.rmSync(path.join(copy, "tools"));
      fs.symlinkSync("/elsewhere", path.join(copy, "tools"));
      fs.rmSync(path.join(copy, "bin/tool"));
      fs.symlinkSync("tool-1.3", path.join(copy, "bin/tool"));
    });
    const report = await patchOfChanges({
      changes: judgedChanges(trip.before, trip.returned),
      sent: trip.before,
      privateDir: dir("sandbox-run-hand-back-private-"),
      what: "the workspace",
    });
    expect(fs.statSync(secret).mode & 0o7777).toBe(0o600);
    expect(fs.statSync(path.join(outside, "tools")).mode & 0o7777).toBe(0o700);
    expect(fs.statSync(path.join(repo, "bin/tool-1.2")).mode & 0o7777).toBe(0o644);
    expect(report.patch).toContain("diff --git a/creds b/creds\ndeleted file mode 120000");
    expect(report.patch).toContain(`-${secret}`);
    expect(report.patch).toContain("-tool-1.2\n\\ No newline at end of file\n+tool-1.3");
    expect(report.patch).toContain("+/elsewhere");
  });

  it("a run stopped by its caller makes no patch", async () => {
    const { repo } = hostRepo();
    const trip = await judged(repo, sandboxChanges);
    const stop = new AbortController();
    stop.abort(new Error("stopped by the caller"));
    const privateDir = dir("sandbox-run-hand-back-private-");
    const made = patchOfChanges({
      changes: judgedChanges(trip.before, trip.returned),
      sent: trip.before,
      privateDir,
      what: "the workspace",
      signal: stop.signal,
    });
    await expect(made).rejects.toThrow("stopped by the caller");
    expect(fs.readdirSync(privateDir)).toEqual([]);
  });

  it("leaves out names a patch cannot carry, with a note: a line break (git apply refused the whole patch) and a trailing space (patch -p1 wrote the protected name)", async () => {
    const repo = tree({ "README.md": "r\n" });
    commitAll(repo);
    const trip = await judged(repo, (copy) => {
      fs.writeFileSync(path.join(copy, "README.md"), "r\nchanged\n");
      fs.writeFileSync(path.join(copy, ".pre-commit-config.yaml "), "repos: [{repo: local}]\n");
      fs.writeFileSync(path.join(copy, "nl\n+++ b\\.git\\hooks"), "n\n");
    });
    const report = await patchOfChanges({
      changes: judgedChanges(trip.before, trip.returned),
      sent: trip.before,
      privateDir: dir("sandbox-run-hand-back-private-"),
      what: "the workspace",
    });
    expect([...report.notes].sort()).toEqual(
      [
        '"nl\\n+++ b\\\\.git\\\\hooks" skipped: a name with a line break or control character (git apply may refuse the whole patch)',
        ".pre-commit-config.yaml  skipped: a name ending in a space or tab (patch -p1 would write it without them)",
      ].sort(),
    );
    for (const [tool, args] of [
      ["git", ["apply", "-"]],
      ["patch", ["-p1", "-s"]],
    ] as const) {
      const target = tree({ "README.md": "r\n" });
      execFileSync(tool, [...args], { cwd: target, input: report.patch });
      expect(fs.readdirSync(target).sort(), tool).toEqual(["README.md"]);
      expect(fs.readFileSync(path.join(target, "README.md"), "utf8"), tool).toBe("r\nchanged\n");
    }
  });
});
