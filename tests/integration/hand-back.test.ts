// Hand-back "branch" and "patch" with real Pi in the real image: the sandbox works on a copy; the
// host's working tree, index, HEAD, config and hooks stay byte for byte as they were; the judged
// changes come back as one commit written by the host's own git (fixed identity, no hooks, no
// fsmonitor, no filter, whatever the sandbox planted or the repository's config names), or as a
// patch file and nothing else. (Without an engine: tests/unit/hand-back.test.ts.)
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { HAND_BACK_IDENTITY } from "../../src/hand-back/branch-commit.js";
import { commitAll, committedTree, git, repoFingerprint, setTraps, sprungTraps } from "../support/git-repo.js";
import { containersOfRuns, dockerAvailable, modelsFor, runBuiltCli } from "../support/harness.js";
import {
  bash,
  DONE_SCHEMA,
  describeOutcome,
  fingerprint,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** What the model does in every test: ordinary edits, plus everything a hostile run plants for git. */
function sandboxWork(markers: string): string {
  return [
    "set -e",
    "echo 'a, changed by the sandbox' > a.txt",
    "rm b.txt",
    "mkdir -p new && echo 'new file' > new/d.txt",
    "chmod +x run.sh",
    "ln -s a.txt link",
    "mkdir -p build && echo built > build/out.js",
    // A filter the host's config defines (and one the sandbox defines), asked for by a new .gitattributes.
    "echo '* filter=probe' > .gitattributes",
    `git config filter.probe.clean "touch ${markers}/sandbox-filter; cat"`,
    `git config core.fsmonitor "touch ${markers}/sandbox-fsmonitor"`,
    `printf '#!/bin/sh\\ntouch ${markers}/sandbox-hook\\n' > .git/hooks/post-commit`,
    "cp .git/hooks/post-commit .git/hooks/reference-transaction && chmod +x .git/hooks/*",
    // The sandbox's own commit: objects and refs in its copy of .git, never handed back.
    "git -c user.name=agent -c user.email=agent@sandbox add -A && git -c user.name=agent -c user.email=agent@sandbox -c commit.gpgSign=false commit -qm 'agent commit' --no-verify",
    "echo done",
  ].join("\n");
}

const FILES = {
  "a.txt": "a\n",
  "b.txt": "b\n",
  "run.sh": "#!/bin/sh\necho hi\n",
  ".gitignore": "build/\n",
};

/** A repository in a host folder, committed, with traps the host's commit must not spring. */
function hostRepository(): { ws: string; base: string; markers: string } {
  const ws = hostileWorkspace(FILES, "sandbox-run-hand-back-");
  const base = commitAll(ws);
  const markers = hostileWorkspace({}, "sandbox-run-hand-back-markers-");
  setTraps(ws, markers);
  return { ws, base, markers };
}

/** The sandbox's work (sandboxWork) in a copy of a fresh host repository, handed back as a branch. */
async function branchRun(policy?: ReturnType<typeof hostilePolicy>) {
  const { ws, base, markers } = hostRepository();
  const before = repoFingerprint(ws);
  const outcome = await runHostile(server, [bash(sandboxWork(markers)), finish()], {
    cwd: ws,
    workspaceMode: "copy",
    handBack: "branch",
    ...(policy ? { policy } : {}),
  });
  return { ws, base, markers, before, outcome };
}

const EXPECTED_COMMIT = {
  ".gitattributes": "100644 * filter=probe\n",
  ".gitignore": "100644 build/\n",
  "a.txt": "100644 a, changed by the sandbox\n",
  link: "120000 a.txt",
  "new/d.txt": "100644 new file\n",
  "run.sh": "100755 #!/bin/sh\necho hi\n",
};

describe.skipIf(!dockerAvailable())("hand-back branch", () => {
  it("one commit of exactly the judged changes, by sandbox-run, on the HEAD the run started from; working tree, index, HEAD, config and hooks byte for byte as they were; nothing planted or configured ran", async () => {
    // The checks let the sandbox's .git changes through here, to show that the hand-back itself
    // never applies or obeys them (by default they are left out with a note: the next test).
    const { ws, base, markers, before, outcome } = await branchRun(
      hostilePolicy({ disableBuiltinProtections: ["git-metadata"] }),
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("done");
    const handBack = outcome.details!.handBack;
    expect(handBack).toMatchObject({
      mode: "branch",
      branch: `sandbox-run/${outcome.runId}`,
      base,
      repository: ws,
      diffStat: { files: 6, insertions: 4, deletions: 2 },
    });
    if (handBack?.mode !== "branch") throw new Error("expected a branch hand-back");
    expect(git(ws, "rev-parse", `refs/heads/sandbox-run/${outcome.runId}`).trim()).toBe(handBack.commit);
    expect(git(ws, "rev-list", "--parents", "-n", "1", handBack.commit!).trim()).toBe(`${handBack.commit} ${base}`);
    expect(git(ws, "log", "-1", "--format=%an <%ae>|%cn <%ce>", handBack.commit!).trim()).toBe(
      `${HAND_BACK_IDENTITY.name} <${HAND_BACK_IDENTITY.email}>|${HAND_BACK_IDENTITY.name} <${HAND_BACK_IDENTITY.email}>`,
    );
    expect(committedTree(ws, handBack.commit!)).toEqual(EXPECTED_COMMIT);
    expect(handBack.leftOut).toEqual(
      expect.arrayContaining([
        { path: "build/out.js", reason: "not tracked, and the repository's ignore rules exclude it" },
        { path: ".git/config", reason: "git metadata" },
        { path: ".git/hooks/post-commit", reason: "git metadata" },
      ]),
    );
    // The sandbox's own commit never reached the host: only main and the new branch exist.
    expect(git(ws, "for-each-ref", "--format=%(refname)").trim().split("\n")).toEqual([
      "refs/heads/main",
      `refs/heads/sandbox-run/${outcome.runId}`,
    ]);
    expect(repoFingerprint(ws)).toEqual(before);
    expect(sprungTraps(markers)).toEqual([]);
    const events = outcome.events.map((e) => e.type);
    expect(events).toContain("workspace.judged");
    expect(events).not.toContain("workspace.applied");
    expect(outcome.events.find((e) => e.type === "workspace.handed-back")?.data).toMatchObject({
      mode: "branch",
      branch: `sandbox-run/${outcome.runId}`,
      commit: handBack.commit,
      base,
    });
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("with the default rules, what the run did in .git (config, hooks, its own commit) fails no branch run: it is left out, named in workspace.judged, and the commit is the worktree's changes alone", async () => {
    const { ws, base, markers, before, outcome } = await branchRun();
    expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
    const handBack = outcome.details!.handBack;
    if (handBack?.mode !== "branch") throw new Error("expected a branch hand-back");
    expect(handBack.base).toBe(base);
    expect(committedTree(ws, handBack.commit!)).toEqual(EXPECTED_COMMIT);
    const judged = outcome.events.find((e) => e.type === "workspace.judged")?.data as
      | { gitLeftOut?: number; gitLeftOutPaths?: string[] }
      | undefined;
    expect(judged?.gitLeftOut).toBeGreaterThan(0);
    expect(judged?.gitLeftOutPaths).toEqual(
      expect.arrayContaining([expect.stringMatching(/^\.git\/config \(modified, /)]),
    );
    expect(repoFingerprint(ws)).toEqual(before);
    expect(sprungTraps(markers)).toEqual([]);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("links are judged through the host's own entries where the branch leaves the changes out: an ignored node_modules the sandbox swapped for a link cannot make a committed link to /etc/shadow look inside the tree (second fix review, round 3, session 41)", async () => {
    const ws = hostileWorkspace(
      { ".gitignore": "node_modules\n", "node_modules/x.js": "x\n", "d1/d2/keep.txt": "k\n" },
      "sandbox-run-hand-back-ignored-",
    );
    commitAll(ws);
    const outcome = await runHostile(
      server,
      [
        bash(
          "rm -rf node_modules && mkdir -p deep/a/b/c dist && ln -s deep/a/b/c node_modules" +
            " && ln -s ../../node_modules d1/d2/w && ln -s ../d1/d2/w/../../etc/shadow dist/notes.txt",
        ),
        finish(),
      ],
      { cwd: ws, workspaceMode: "copy", handBack: "branch" },
    );
    expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
    expect(outcome.details?.hostRunFiles?.map((h) => `${h.change} ${h.path}`)).toContain("created dist/notes.txt");
    expect(outcome.details?.hostRunFiles?.find((h) => h.path === "dist/notes.txt")?.why).toContain(
      "through other links",
    );
  });

  it("the CLI: copy mode without being asked, the branch in the --json envelope, the done line and the record; bind mode, or a folder that is no repository, is a usage error", async () => {
    const { ws, base } = hostRepository();
    const before = repoFingerprint(ws);
    const modelId = "hand-back-cli";
    server.setScript(modelId, [bash("echo 'a, changed by the sandbox' > a.txt && rm b.txt"), finish()]);
    const models = path.join(hostileWorkspace({}, "sandbox-run-hand-back-models-"), "models.json");
    fs.writeFileSync(models, JSON.stringify(modelsFor(server, [modelId])));
    const record = path.join(hostileWorkspace({}, "sandbox-run-hand-back-record-"), "record");
    const schema = path.join(path.dirname(models), "schema.json");
    fs.writeFileSync(schema, JSON.stringify({ type: "object", properties: { done: { type: "boolean" } } }));
    const args = ["--models", models, "--model", `scripted/${modelId}`, "--schema", schema];

    const run = await runBuiltCli([...args, "--cwd", ws, "--hand-back", "branch", "--json", "--record", record, "go"]);
    expect(run.status, run.stderr).toBe(0);
    const envelope = JSON.parse(run.stdout);
    const branch = `sandbox-run/${envelope.runId}`;
    expect(envelope.handBack).toMatchObject({ mode: "branch", branch, base, diffStat: { files: 2 } });
    expect(run.stderr).toMatch(
      new RegExp(
        `done in .*; committed to branch ${branch} \\(${envelope.handBack.commit.slice(0, 12)} on ${base.slice(0, 12)}\\): 2 file\\(s\\), \\+1 -2, workspace untouched`,
      ),
    );
    const events = fs.readFileSync(path.join(record, "events.jsonl"), "utf8");
    expect(events).toContain('"workspace.copied-in"');
    expect(JSON.parse(fs.readFileSync(path.join(record, "meta.json"), "utf8")).handBack).toMatchObject({ branch });
    expect(committedTree(ws, branch)).toEqual({
      ".gitignore": "100644 build/\n",
      "a.txt": "100644 a, changed by the sandbox\n",
      "run.sh": "100644 #!/bin/sh\necho hi\n",
    });
    expect(repoFingerprint(ws)).toEqual(before);

    const bind = await runBuiltCli([...args, "--cwd", ws, "--hand-back", "branch", "--workspace", "bind", "go"]);
    expect(bind.status).toBe(2);
    expect(bind.stderr).toContain('Hand-back "branch" cannot use the bind workspace mode');
    const plain = hostileWorkspace({ "a.txt": "a\n" }, "sandbox-run-hand-back-plain-");
    const notRepository = await runBuiltCli([...args, "--cwd", plain, "--hand-back", "branch", "go"]);
    expect(notRepository.status).toBe(2);
    expect(notRepository.stderr).toMatch(/is not inside one\.\n.*git init && git commit/);
    expect(server.requests.filter((r) => r.body.model === modelId)).toHaveLength(2); // only the first run's
  });
});

describe.skipIf(!dockerAvailable())("hand-back patch", () => {
  it("writes only the patch: the workspace is byte for byte as it was, the patch (and the record's changes.patch) turns a copy of it into the judged tree; a patch file inside the workspace is refused before the run", async () => {
    const { ws, markers } = hostRepository();
    const exact = fingerprint(ws);
    const modelId = "hand-back-patch";
    server.setScript(modelId, [bash(sandboxWork(markers)), finish()]);
    const out = hostileWorkspace({}, "sandbox-run-hand-back-out-");
    fs.writeFileSync(path.join(out, "models.json"), JSON.stringify(modelsFor(server, [modelId])));
    fs.writeFileSync(path.join(out, "schema.json"), JSON.stringify(DONE_SCHEMA));
    const args = [
      ...["--models", path.join(out, "models.json"), "--model", `scripted/${modelId}`],
      ...["--schema", path.join(out, "schema.json"), "--cwd", ws],
    ];
    const patchFile = path.join(out, "changes.patch");
    const record = path.join(out, "record");

    const inside = await runBuiltCli([...args, "--hand-back", "patch", "--patch-file", path.join(ws, "x.patch"), "go"]);
    expect(inside.status).toBe(2);
    expect(inside.stderr).toContain(`x.patch lies inside ${ws}, which the sandbox holds`);
    const nowhere = await runBuiltCli([...args, "--hand-back", "patch", "go"]);
    expect(nowhere.status).toBe(2);
    expect(nowhere.stderr).toContain("Pass --patch-file <file>");
    expect(server.requests.filter((r) => r.body.model === modelId)).toEqual([]);

    const run = await runBuiltCli([
      ...args,
      "--hand-back",
      "patch",
      "--patch-file",
      patchFile,
      "--record",
      record,
      "--policy",
      writePolicy(out, { disableBuiltinProtections: ["git-metadata"] }),
      "--json",
      "go",
    ]);
    expect(run.status, run.stderr).toBe(0);
    expect(bashOutputOf(modelId)).toContain("done");
    const envelope = JSON.parse(run.stdout);
    expect(envelope.handBack).toMatchObject({ mode: "patch", files: 7, notes: [], patchFile });
    expect(envelope.handBack.patch).toBeUndefined();
    expect(run.stderr).toContain(`patch of 7 file(s) written to ${patchFile}, workspace untouched`);
    expect(fingerprint(ws)).toEqual(exact);
    expect(sprungTraps(markers)).toEqual([]);

    const patch = fs.readFileSync(patchFile, "utf8");
    expect(fs.readFileSync(path.join(record, "changes.patch"), "utf8")).toBe(patch);
    expect(patch).not.toMatch(/ b\/\.git\//);
    const copy = hostileWorkspace({}, "sandbox-run-hand-back-copy-");
    fs.cpSync(ws, copy, { recursive: true, verbatimSymlinks: true });
    fs.rmSync(path.join(copy, ".git"), { recursive: true });
    git(copy, "apply", "--binary", patchFile);
    expect(fs.readFileSync(path.join(copy, "a.txt"), "utf8")).toBe("a, changed by the sandbox\n");
    expect(fs.existsSync(path.join(copy, "b.txt"))).toBe(false);
    expect(fs.readlinkSync(path.join(copy, "link"))).toBe("a.txt");
    expect(fs.statSync(path.join(copy, "run.sh")).mode & 0o100).toBe(0o100);
    expect(fs.readFileSync(path.join(copy, "build/out.js"), "utf8")).toBe("built\n");
    expect(fs.readFileSync(path.join(copy, ".gitattributes"), "utf8")).toBe("* filter=probe\n");
    expect(await containersOfRuns([envelope.runId])).toEqual([]);
  });
});

/** What the sandbox's bash printed in the run of `modelId` (its first tool result). */
function bashOutputOf(modelId: string): string {
  const requests = server.requests.filter((r) => r.body.model === modelId);
  const tool = requests.at(-1)?.body.messages.find((m) => m.role === "tool");
  return typeof tool?.content === "string" ? tool.content : JSON.stringify(tool?.content ?? "");
}

/** A policy file (workspace-write as the hostile tests use it, plus `extra`) outside the workspace. */
function writePolicy(dir: string, extra: Record<string, unknown>): string {
  const file = path.join(dir, "policy.json");
  fs.writeFileSync(file, JSON.stringify({ ...hostilePolicy(extra), name: "hand-back-test" }));
  return file;
}
