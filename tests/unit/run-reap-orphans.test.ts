// Reaping hands lent trees back from the lease record this host wrote in the run's own folder,
// never from a container's labels: whoever answers on the engine's address (a local user on a
// loopback port) chooses those. The engine here is a real DockerEngine talking HTTP to a stand-in
// on a unix socket that answers like a hostile engine.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { judgeDeadRun, unjudgedRunOver } from "../../src/run/judge-dead-run.js";
import { deadLeaseOver, engineIdentity, writeLeaseRecord } from "../../src/run/lease-record.js";
import { handBackGoneRuns, reapContainers } from "../../src/run/reap-orphans.js";
import { reapRunDirs } from "../../src/run/reap-run-dirs.js";
import {
  createRunDir,
  LEASE_RECORD,
  RUN_DIR_MARKER,
  removeRunDir,
  runDirsParent,
  WORKSPACE_STATE_DIR,
} from "../../src/run/run-dirs.js";
import { holdTreesOnHost } from "../../src/run/tree-hold-files.js";
import {
  LABEL_DEADLINE,
  LABEL_HAND_BACK,
  LABEL_LENT_ROOTS,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_RUN_ID,
} from "../../src/sandbox-contract.js";
import { WATCH_STATE_CLAIM_PREFIX, WATCH_STATE_FILE } from "../../src/workspace/watch-state-file.js";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";
import { commitAll } from "../support/git-repo.js";
import { owner, tempTrees } from "../support/temp-trees.js";

const { dir, tree } = tempTrees("sandbox-run-reap-");
const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

/** The pid of a process that has exited. */
function deadPid(): number {
  let pid = 999_999;
  while (fs.existsSync(`/proc/${pid}`)) pid--;
  return pid;
}

/** An "engine" on a unix socket listing `containers` (labels) until one is deleted. */
async function hostileEngine(
  containers: Array<Record<string, string>>,
  options: { removedByAnother?: boolean; images?: Array<Record<string, string> | undefined> } = {},
): Promise<DockerEngine> {
  // The i-th container is made from image `img<i>`, whose own labels are options.images[i].
  const listed = containers.map((labels, i) => ({
    Id: `${i}`.padStart(64, "a"),
    State: "exited",
    Labels: labels,
    ImageID: `sha256:img${i}`,
  }));
  const server = http.createServer((req, res) => {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method === "GET" && req.url?.includes("/containers/json")) return json(200, listed);
    const image = /\/images\/sha256:img(\d+)\/json/.exec(req.url ?? "");
    if (req.method === "GET" && image)
      return json(200, {
        Config: { Labels: options.images?.[Number(image[1])] ?? { "sandbox-run.pi-version": "1.6.0" } },
        Os: "linux",
        Architecture: "amd64",
        Size: 1,
      });
    if (req.method === "DELETE") {
      const id = req.url?.split("/containers/")[1]?.split("?")[0];
      listed.splice(
        listed.findIndex((c) => c.Id === id),
        1,
      );
      // Another reaper removed it between this one's listing and its removal.
      if (options.removedByAnother) return json(404, { message: `No such container: ${id}` });
      res.writeHead(204);
      return res.end();
    }
    json(404, { message: "no such thing" });
  });
  servers.push(server);
  const socketPath = path.join(dir(), "engine.sock");
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return new DockerEngine({ name: "local", endpoint: { kind: "unix", socketPath } });
}

/** A dead controller's run folder (its marker names a gone pid) in `tmpDir`. */
function deadRunDir(runId: string, tmpDir: string): string {
  const runDir = createRunDir(runId, tmpDir);
  fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n`);
  return runDir;
}

const orphanLabels = (runId: string, extra: Record<string, string> = {}) => ({
  [LABEL_MANAGED]: "true",
  [LABEL_RUN_ID]: runId,
  [LABEL_OWNER_HOST]: os.hostname(),
  [LABEL_OWNER_PID]: String(deadPid()),
  ...extra,
});

/** A tree as the sandbox uid holds it while lent. */
function lentTree(): string {
  const root = tree({ "sub/file": "secret\n" });
  for (const p of ["", "sub", "sub/file"]) fs.chownSync(path.join(root, p), 65532, 65532);
  return root;
}

describe("a container whose image imitates ours", () => {
  // Review, session 34: a devcontainer made (by plain `docker create`) from an image declaring
  // sandbox-run.managed and a past deadline was "past its deadline" to gc, which removed it.
  it("is left alone by gc: the labels came from its image, not from sandbox-run", async () => {
    const tmpDir = dir();
    const past = { [LABEL_DEADLINE]: "2000-01-01T00:00:00.000Z" };
    const engine = await hostileEngine([orphanLabels("theirs", past), orphanLabels("ours", past)], {
      images: [{ [LABEL_MANAGED]: "true", ...past }, undefined],
    });
    const reaped = await reapContainers(engine, { tmpDir });
    expect(reaped.map((r) => r.runId)).toEqual(["ours"]);
    expect((await engine.listContainers([])).map((c) => c.labels[LABEL_RUN_ID])).toEqual(["theirs"]);
  });
});

describe.runIf(process.getuid?.() === 0)("reaping a dead run's lent trees (as root)", () => {
  it("labels alone hand nothing back: the container goes, the tree they name stays as it is, and gc says why", async () => {
    const tmpDir = dir();
    const victim = lentTree();
    const engine = await hostileEngine([
      orphanLabels("labelonly", {
        [LABEL_HAND_BACK]: "4242:4242",
        [LABEL_LENT_ROOTS]: JSON.stringify([victim]),
      }),
    ]);
    const reaped = await reapContainers(engine, { tmpDir });
    expect(reaped).toHaveLength(1);
    expect(await engine.listContainers([])).toEqual([]);
    expect(owner(path.join(victim, "sub/file"))).toBe("65532:65532");
    expect(reaped[0]!.notHandedBack).toEqual([expect.stringContaining(`${victim}: this host recorded no lease of it`)]);
  });

  it("a run folder's record decides what goes back and to whom, whatever the labels say; then the folder is reaped", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const victim = lentTree();
    const runDir = deadRunDir("recorded", tmpDir);
    const engine = await hostileEngine([
      orphanLabels("recorded", {
        [LABEL_HAND_BACK]: "4242:4242",
        [LABEL_LENT_ROOTS]: JSON.stringify([lent, victim]),
      }),
    ]);
    writeLeaseRecord(runDir, { roots: [lent], handBackTo: { uid: 1234, gid: 4321 }, engine: engine.address });
    // Before the containers, a run folder holding a record stays: it is what hands the trees back.
    expect(reapRunDirs(tmpDir)).toEqual([]);
    // A dry run names the trees the record would hand back, and its folder; it hands back nothing.
    expect(await reapContainers(engine, { tmpDir, dryRun: true })).toMatchObject([
      { runId: "recorded", wouldHandBack: [lent], runDir },
    ]);
    expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
    const reaped = await reapContainers(engine, { tmpDir });
    expect(owner(path.join(lent, "sub/file"))).toBe("1234:4321");
    expect(owner(path.join(victim, "sub/file"))).toBe("65532:65532");
    expect(reaped[0]!.notHandedBack).toEqual([expect.stringContaining(`${victim}: this host recorded no lease`)]);
    expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(false);
    expect(reapRunDirs(tmpDir)).toEqual([runDir]);
  });

  it("a record of a live controller, or of another engine, hands nothing back", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const live = createRunDir("live", tmpDir);
    const elsewhere = deadRunDir("elsewhere", tmpDir);
    const engine = await hostileEngine([orphanLabels("live"), orphanLabels("elsewhere")]);
    writeLeaseRecord(live, { roots: [lent], handBackTo: { uid: 1234, gid: 1234 }, engine: engine.address });
    writeLeaseRecord(elsewhere, { roots: [lent], handBackTo: { uid: 1234, gid: 1234 }, engine: "unix:///other.sock" });
    await reapContainers(engine, { tmpDir });
    expect(await handBackGoneRuns(engine, { tmpDir })).toEqual([]);
    expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
  });

  it("a container another reaper removed after this one listed it (two gc at once): not counted, no 'no lease recorded'; its run is handed back from the record once, by whoever finds it (review, session 33)", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const runDir = deadRunDir("raced", tmpDir);
    const engine = await hostileEngine([orphanLabels("raced", { [LABEL_LENT_ROOTS]: JSON.stringify([lent]) })], {
      removedByAnother: true,
    });
    writeLeaseRecord(runDir, { roots: [lent], handBackTo: { uid: 1234, gid: 4321 }, engine: engine.address });
    expect(await reapContainers(engine, { tmpDir, judge: true })).toEqual([]);
    // The other reaper may have died before handing back: the record does it here, once.
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true })).toEqual([{ runId: "raced", roots: [lent] }]);
    expect(owner(path.join(lent, "sub/file"))).toBe("1234:4321");
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true })).toEqual([]);
  });

  it("a dead run whose container is already gone from its engine: handed back from the record; still listed: not", async () => {
    const tmpDir = dir();
    const gone = lentTree();
    const listed = lentTree();
    const goneDir = deadRunDir("gone", tmpDir);
    const listedDir = deadRunDir("listed", tmpDir);
    // "listed" is a live controller's container as far as its labels go: not an orphan, so it stays.
    const engine = await hostileEngine([{ [LABEL_MANAGED]: "true", [LABEL_RUN_ID]: "listed" }]);
    writeLeaseRecord(goneDir, { roots: [gone], handBackTo: { uid: 1234, gid: 1234 }, engine: engine.address });
    writeLeaseRecord(listedDir, { roots: [listed], handBackTo: { uid: 1234, gid: 1234 }, engine: engine.address });
    expect(await reapContainers(engine, { tmpDir })).toEqual([]);
    expect(await handBackGoneRuns(engine, { tmpDir })).toEqual([{ runId: "gone", roots: [gone] }]);
    expect(owner(path.join(gone, "sub/file"))).toBe("1234:1234");
    expect(owner(path.join(listed, "sub/file"))).toBe("65532:65532");
    expect(reapRunDirs(tmpDir)).toEqual([goneDir]);
  });

  it("a folder gc cannot open in a dead run's tree: named, the lease record kept; the next gc hands it back (review, session 38: ignored, the record went)", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const runDir = deadRunDir("stuck", tmpDir);
    const engine = await hostileEngine([]);
    writeLeaseRecord(runDir, { roots: [lent], handBackTo: { uid: 1234, gid: 4321 }, engine: engine.address });
    const open = fs.openSync;
    const failing = vi.spyOn(fs, "openSync").mockImplementation(((...args: Parameters<typeof open>) => {
      if (String(args[0]).endsWith("/sub")) throw Object.assign(new Error("EIO"), { code: "EIO" });
      return open(...args);
    }) as typeof open);
    try {
      expect(await handBackGoneRuns(engine, { tmpDir })).toEqual([
        { runId: "stuck", roots: [lent], notHandedBack: [`${path.join(lent, "sub")}: cannot open the directory: EIO`] },
      ]);
    } finally {
      failing.mockRestore();
    }
    expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
    expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(true);
    expect(await handBackGoneRuns(engine, { tmpDir })).toEqual([{ runId: "stuck", roots: [lent] }]);
    expect(owner(path.join(lent, "sub/file"))).toBe("1234:4321");
    expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(false);
  });

  it("a dead run's lease over a tree a live run holds waits: nothing of the live run's sandbox is taken from it; handed back once the hold is gone (review, session 35)", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const runDir = deadRunDir("dead-lease", tmpDir);
    const engine = await hostileEngine([]);
    writeLeaseRecord(runDir, { roots: [lent], handBackTo: { uid: 1234, gid: 4321 }, engine: engine.address });
    // A new run over the same tree (another process's, or this one's) holds it, its sandbox at work there.
    const live = await holdTreesOnHost({ runId: "live-run", writable: [lent], readOnly: [] }, { tmpDir });
    try {
      expect(deadLeaseOver([path.join(lent, "sub")], tmpDir)).toEqual({ runId: "dead-lease", tree: lent });
      const waited = await handBackGoneRuns(engine, { tmpDir });
      expect(waited).toEqual([
        {
          runId: "dead-lease",
          roots: [lent],
          notHandedBack: [`${lent}: run live-run, in progress, holds it; run gc again once it ends`],
        },
      ]);
      expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
      expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(true);
    } finally {
      live.release();
    }
    expect(await handBackGoneRuns(engine, { tmpDir })).toEqual([{ runId: "dead-lease", roots: [lent] }]);
    expect(owner(path.join(lent, "sub/file"))).toBe("1234:4321");
    expect(deadLeaseOver([lent], tmpDir)).toBeUndefined();
  });

  it("a new run over a tree a dead run still lends is refused, naming gc, before it holds or lends anything (review, session 35)", async () => {
    const tmpDir = dir();
    const lent = lentTree();
    const runDir = deadRunDir("still-lent", tmpDir);
    writeLeaseRecord(runDir, {
      roots: [lent],
      handBackTo: { uid: 1234, gid: 4321 },
      engine: "unix:///nonexistent.sock",
    });
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = tmpDir;
    const agent = new ContainerPiAgent({
      model: "scripted/x",
      models: {
        providers: {
          scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "x" }] },
        },
      },
      reapOrphans: false,
    });
    try {
      await expect(agent.run("go", { cwd: lent })).rejects.toMatchObject({
        code: "usage",
        message: expect.stringContaining(
          `Run still-lent lent ${lent} to its sandbox, and its controller died before giving it back`,
        ),
        hint: expect.stringContaining("sandbox-run gc"),
      });
      expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
      expect(fs.readdirSync(runDirsParent(tmpDir)).filter((n) => n.startsWith("hold-"))).toEqual([]);
    } finally {
      await agent.close();
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
    }
  });
});

describe("a run that waited behind one whose controller died after its judgement", () => {
  it.runIf(process.getuid?.() === 0)(
    "is refused once it holds the trees, while that run's lease is still out (fix review, session 35: only unjudged runs were checked again)",
    async () => {
      const tmpDir = dir();
      const lent = lentTree();
      const savedTmp = process.env.TMPDIR;
      process.env.TMPDIR = tmpDir;
      // The run ahead holds the tree (its controller alive, for now).
      const ahead = await holdTreesOnHost({ runId: "ahead", writable: [lent], readOnly: [] }, { tmpDir });
      const agent = new ContainerPiAgent({
        model: "scripted/x",
        models: {
          providers: {
            scripted: {
              baseUrl: "http://127.0.0.1:9/v1",
              api: "openai-completions",
              apiKey: "k",
              models: [{ id: "x" }],
            },
          },
        },
        reapOrphans: false,
      });
      try {
        const running = agent.run("go", { cwd: lent }).then(
          () => undefined,
          (error: unknown) => error,
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        // Its controller dies after the judgement, before the give-back: the lease stays out.
        const runDir = deadRunDir("ahead", tmpDir);
        writeLeaseRecord(runDir, {
          roots: [lent],
          handBackTo: { uid: 1234, gid: 4321 },
          engine: "unix:///nonexistent.sock",
        });
        ahead.release();
        expect(await running).toMatchObject({
          code: "usage",
          message: expect.stringContaining(
            `Run ahead lent ${lent} to its sandbox, and its controller died before giving it back`,
          ),
        });
        expect(owner(path.join(lent, "sub/file"))).toBe("65532:65532");
      } finally {
        ahead.release();
        await agent.close();
        if (savedTmp === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = savedTmp;
      }
    },
  );
});

describe("the lease record", () => {
  it("names a local engine by its socket's real path, so /var/run/docker.sock and /run/docker.sock are one engine", () => {
    const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-engine-id-")));
    fs.mkdirSync(path.join(dir, "run"));
    fs.writeFileSync(path.join(dir, "run/docker.sock"), "");
    fs.symlinkSync("run", path.join(dir, "var-run"));
    try {
      const viaLink = engineIdentity({ name: "local", address: `unix://${dir}/var-run/docker.sock` });
      expect(viaLink).toBe(`unix://${dir}/run/docker.sock`);
      expect(engineIdentity({ name: "local", address: `unix://${dir}/run/docker.sock` })).toBe(viaLink);
      expect(engineIdentity({ name: "remote", address: "tcp://10.0.0.2:2376" })).toBe("tcp://10.0.0.2:2376");
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });

  it("is a new file in the run folder: a name already there (a planted link) is an error, never written through", () => {
    const tmpDir = dir();
    const runDir = createRunDir("planted", tmpDir);
    const target = path.join(dir(), "target");
    fs.symlinkSync(target, path.join(runDir, LEASE_RECORD));
    expect(() => writeLeaseRecord(runDir, { roots: ["/x"], handBackTo: { uid: 0, gid: 0 }, engine: "e" })).toThrow(
      /EEXIST/,
    );
    expect(fs.existsSync(target)).toBe(false);
  });

  it("keeps its run folder and the folder's owner marker when the run's own clean-up could not hand back", () => {
    const tmpDir = dir();
    const runDir = createRunDir("kept", tmpDir);
    writeLeaseRecord(runDir, { roots: ["/x"], handBackTo: { uid: 0, gid: 0 }, engine: "e" });
    fs.writeFileSync(path.join(runDir, "gateway.sock"), "");
    expect(removeRunDir(runDir)).toBe(false);
    expect(fs.readdirSync(runDir).sort()).toEqual([RUN_DIR_MARKER, LEASE_RECORD].sort());
  });
});

describe("a bind-mode run its controller died before judging", () => {
  /** A repository with a commit, watched as a dead controller's run left it: the state saved, then the "sandbox" writes. */
  async function abandonedRun(runId: string, tmpDir: string, engine: string) {
    // A package whose .envrc puts node_modules/.bin on PATH, where the host's command names are guarded.
    const ws = tree({ "src/a.ts": "a\n", "web/.envrc": "layout node\n" });
    commitAll(ws);
    const gitBefore = listing(path.join(ws, ".git"));
    const runDir = deadRunDir(runId, tmpDir);
    const watch = await WorkspaceWatch.start({
      workspace: ws,
      workspaceWritable: true,
      writableRoots: [],
      protectedPaths: [],
      stateDir: path.join(runDir, WORKSPACE_STATE_DIR),
    });
    watch.save({ engine });
    // What the sandbox leaves: a hook and an .envrc the host's git and shell would run, and ordinary work.
    fs.writeFileSync(path.join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\ntouch /tmp/pwned\n", { mode: 0o755 });
    fs.writeFileSync(path.join(ws, ".envrc"), "touch /tmp/pwned\n");
    fs.mkdirSync(path.join(ws, "web/node_modules/.bin"), { recursive: true });
    fs.writeFileSync(path.join(ws, "web/node_modules/.bin/git"), "#!/bin/sh\ntouch /tmp/pwned\n", { mode: 0o755 });
    fs.writeFileSync(path.join(ws, "web/node_modules/.bin/left-pad-cli"), "#!/bin/sh\n", { mode: 0o755 });
    fs.writeFileSync(path.join(ws, "src/a.ts"), "a2\n");
    return { ws, runDir, gitBefore, watch };
  }

  /** Every entry below `dir` with its content (objects left out: new ones are harmless and stay). */
  function listing(dir: string): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (p: string) => {
      const rel = path.relative(dir, p) || ".";
      if (/^objects\/[0-9a-f]{2}/.test(rel)) return;
      const st = fs.lstatSync(p);
      if (st.isDirectory()) {
        out[rel] = `dir:${(st.mode & 0o7777).toString(8)}`;
        for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name));
      } else out[rel] = `file:${(st.mode & 0o7777).toString(8)}:${fs.readFileSync(p, "base64")}`;
    };
    walk(dir);
    return out;
  }

  it("a controller that died while putting things back: gc says what it had found and the files a host tool reads the run changed, though the tree now looks cleaner (review, session 35: 'nothing it was not allowed to change')", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws, watch } = await abandonedRun("mid-restore", tmpDir, engineIdentity(engine));
    fs.writeFileSync(path.join(ws, ".npmrc"), "node-options=--require ./x.js\n");
    // Its controller judged and put everything back, then died before forgetting the state.
    const own = await watch.finish();
    expect(own.violationCount).toBeGreaterThan(0);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    const judged = await judgeDeadRun("mid-restore", engineIdentity(engine), tmpDir);
    expect(judged?.violationCount).toBe(0);
    expect(judged?.foundBefore?.violationCount).toBe(own.violationCount);
    expect(judged?.foundBefore?.violations).toEqual(
      expect.arrayContaining([expect.stringMatching(/^\.envrc: created \(/)]),
    );
    expect(judged?.hostRunFiles ?? judged?.foundBefore?.hostRunFiles).toEqual(
      expect.arrayContaining([expect.stringMatching(/^\.npmrc: created/)]),
    );
  });

  it("a judgement that threw waits for gc while its controller lives on (a library in a long-running process): runs over its trees are refused, gc judges it", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws, runDir } = await abandonedRun("threw", tmpDir, engineIdentity(engine));
    // The controller is this live process; its judgement threw (watch.failed beside the state).
    fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${process.pid}\n${os.hostname()}\n`);
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
    fs.writeFileSync(path.join(runDir, WORKSPACE_STATE_DIR, "watch.failed"), "");
    expect(unjudgedRunOver([ws], tmpDir)).toEqual({ runId: "threw", tree: ws });
    const judged = await judgeDeadRun("threw", engineIdentity(engine), tmpDir);
    expect(judged?.failed).toBeUndefined();
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
    expect(fs.readdirSync(path.join(runDir, WORKSPACE_STATE_DIR))).not.toContain("watch.failed");
  });

  it("a judgement by gc that fails keeps the run's state: runs over its trees stay refused, and the next gc judges it (review, session 38: the state went, the planted hook stayed unjudged)", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws, runDir } = await abandonedRun("unreadable", tmpDir, engineIdentity(engine));
    // What a non-root caller's sandbox can make happen: its `chmod 000 .` stops the walk.
    const resume = vi.spyOn(WorkspaceWatch, "resume").mockImplementationOnce(() => {
      throw Object.assign(new Error(`EACCES: permission denied, open '${ws}'`), { code: "EACCES" });
    });
    let failed: string | undefined;
    try {
      failed = (await judgeDeadRun("unreadable", engineIdentity(engine), tmpDir))?.failed;
    } finally {
      resume.mockRestore();
    }
    expect(failed).toMatch(
      /^EACCES: permission denied.*its state is kept and runs over its trees are refused until gc judges it/,
    );
    // And how to give up on it: the run's folder, named.
    expect(failed).toContain(`to give up judging it, remove ${runDir}:`);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
    expect(unjudgedRunOver([ws], tmpDir)).toEqual({ runId: "unreadable", tree: ws });
    const again = await judgeDeadRun("unreadable", engineIdentity(engine), tmpDir);
    expect(again?.failed).toBeUndefined();
    expect(again?.violationCount).toBeGreaterThan(0);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
  });

  it("gc removes its container, then judges the tree as the controller would have: what it planted goes, its work stays", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([orphanLabels("crashed")]);
    const { ws, runDir, gitBefore } = await abandonedRun("crashed", tmpDir, engineIdentity(engine));
    // Until it is judged, a run over the tree is refused, and the folder is not reaped with the others.
    expect(unjudgedRunOver([path.join(ws, "src")], tmpDir)).toEqual({ runId: "crashed", tree: ws });
    expect(reapRunDirs(tmpDir)).toEqual([]);

    const reaped = await reapContainers(engine, { tmpDir, judge: true });
    expect(reaped).toHaveLength(1);
    const judged = reaped[0]!.judged!;
    expect(judged).toMatchObject({ runId: "crashed", trees: [ws], gone: [], violationCount: 3, notRestored: [] });
    expect(judged.failed).toBeUndefined();
    // The saved state keeps the command folder and the host's names: gc judges node_modules/.bin/git as the controller would.
    expect(judged.violations.sort()).toEqual([
      ".envrc: created",
      ".git/hooks/pre-commit: created",
      "web/node_modules/.bin/git: created",
    ]);
    expect(fs.existsSync(path.join(ws, "web/node_modules/.bin/git"))).toBe(false);
    expect(fs.existsSync(path.join(ws, "web/node_modules/.bin/left-pad-cli"))).toBe(true);
    expect(listing(path.join(ws, ".git"))).toEqual(gitBefore);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe("a2\n");
    // Judged once: nothing is left to judge or refuse, and the folder goes.
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true })).toEqual([]);
    expect(reapRunDirs(tmpDir)).toEqual([runDir]);
  });

  it("gc --dry-run: says what would be removed, judged and handed back, and changes nothing (no container, state, tree or folder touched)", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([orphanLabels("crashed")]);
    const { ws, runDir } = await abandonedRun("crashed", tmpDir, engineIdentity(engine));
    // A dead run whose container is gone already, waiting to be judged; a dead run's plain folder.
    const { ws: ws2, runDir: goneDir } = await abandonedRun("gonebefore", tmpDir, engineIdentity(engine));
    const plainDir = deadRunDir("plain", tmpDir);
    const before = [listing(ws), listing(ws2), listing(tmpDir)];

    expect(await reapContainers(engine, { tmpDir, judge: true, dryRun: true })).toEqual([
      {
        id: "0".padStart(64, "a"),
        runId: "crashed",
        reason: expect.stringMatching(/owner process \d+ is gone/),
        wouldJudge: true,
        runDir,
      },
    ]);
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true, dryRun: true })).toEqual([
      { runId: "gonebefore", roots: [], wouldJudge: true },
    ]);
    expect(reapRunDirs(tmpDir, true)).toEqual([plainDir]);
    expect(await engine.listContainers([])).toHaveLength(1);
    expect([listing(ws), listing(ws2), listing(tmpDir)]).toEqual(before);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
    expect(unjudgedRunOver([ws], tmpDir)?.runId).toBe("crashed");

    // The real gc then does what the dry run said.
    expect(await reapContainers(engine, { tmpDir, judge: true })).toMatchObject([
      { runId: "crashed", judged: { violationCount: 3 } },
    ]);
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true })).toMatchObject([
      { runId: "gonebefore", judged: { violationCount: 3 } },
    ]);
    expect(reapRunDirs(tmpDir).sort()).toEqual([runDir, goneDir, plainDir].sort());
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
  });

  it("a reaper that does not judge (a run's start-up) removes the container and leaves the run to gc, which judges it once its container is gone", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([orphanLabels("later")]);
    const { ws, runDir } = await abandonedRun("later", tmpDir, engineIdentity(engine));
    const reaped = await reapContainers(engine, { tmpDir });
    expect(reaped.map((r) => r.judged)).toEqual([undefined]);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
    expect(reapRunDirs(tmpDir)).toEqual([]);
    expect(unjudgedRunOver([ws], tmpDir)?.runId).toBe("later");

    const handed = await handBackGoneRuns(engine, { tmpDir, judge: true });
    expect(handed).toMatchObject([{ runId: "later", roots: [], judged: { violationCount: 3, notRestored: [] } }]);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
    expect(fs.existsSync(path.join(ws, ".git/hooks/pre-commit"))).toBe(false);
    expect(reapRunDirs(tmpDir)).toEqual([runDir]);
  });

  it("is judged only on the engine it ran on, only once its container is gone there, and by one reaper at a time", async () => {
    const tmpDir = dir();
    // Still listed (a container of a live controller, as far as its labels go): not judged yet.
    const engine = await hostileEngine([{ [LABEL_MANAGED]: "true", [LABEL_RUN_ID]: "once" }]);
    const { ws } = await abandonedRun("once", tmpDir, engineIdentity(engine));
    expect(await handBackGoneRuns(engine, { tmpDir, judge: true })).toEqual([]);
    expect(await judgeDeadRun("once", "unix:///another/engine.sock", tmpDir)).toBeUndefined();
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
    // Two reapers at once: the one that claims the state judges; the other finds nothing to do.
    const [first, second] = await Promise.all([
      judgeDeadRun("once", engineIdentity(engine), tmpDir),
      judgeDeadRun("once", engineIdentity(engine), tmpDir),
    ]);
    expect([first?.violationCount, second?.violationCount].sort()).toEqual([3, undefined]);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
  });

  it("while another live gc judges a run, only runs over that run's trees are refused, and a second gc says so instead of passing over it (kill sweep, round 3, session 42)", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws, runDir } = await abandonedRun("judging", tmpDir, engineIdentity(engine));
    const other = dir();
    // Another gc's claim: the state renamed with that live process's pid.
    const gc = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
      const stateDir = path.join(runDir, WORKSPACE_STATE_DIR);
      fs.renameSync(path.join(stateDir, WATCH_STATE_FILE), path.join(stateDir, `${WATCH_STATE_CLAIM_PREFIX}${gc.pid}`));
      expect(unjudgedRunOver([other], tmpDir)).toBeUndefined();
      expect(unjudgedRunOver([path.join(ws, "src")], tmpDir)).toEqual({
        runId: "judging",
        tree: ws,
        judgingPid: gc.pid,
      });
      expect(await judgeDeadRun("judging", engineIdentity(engine), tmpDir)).toMatchObject({
        runId: "judging",
        trees: [ws],
        judgedBy: gc.pid,
        violationCount: 0,
      });
      // Nothing was done to the tree, nor to the claim.
      expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
      expect(fs.readdirSync(stateDir)).toContain(`${WATCH_STATE_CLAIM_PREFIX}${gc.pid}`);
    } finally {
      gc.kill("SIGKILL");
      await new Promise((resolve) => gc.once("exit", resolve));
    }
    // That gc died: its claim is the next reaper's to take, and the run is judged.
    expect((await judgeDeadRun("judging", engineIdentity(engine), tmpDir))?.violationCount).toBe(3);
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(false);
  });

  it("a tree removed and made again at its path since (a new checkout) is not judged against the old one's snapshot", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws } = await abandonedRun("replaced", tmpDir, engineIdentity(engine));
    const moved = `${ws}-old`;
    fs.renameSync(ws, moved);
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, ".envrc"), "the new checkout's own\n");
    const judged = await judgeDeadRun("replaced", engineIdentity(engine), tmpDir);
    expect(judged).toMatchObject({ gone: [`${ws} was removed and made again since`], violationCount: 0, restored: [] });
    expect(judged?.failed).toBeUndefined();
    expect(fs.readFileSync(path.join(ws, ".envrc"), "utf8")).toBe("the new checkout's own\n");
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
    fs.rmSync(moved, { recursive: true, force: true });
  });

  it("a state naming a tree no run may write (the host's configuration) is not judged there, whatever the folder says", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { runDir } = await abandonedRun("forged", tmpDir, engineIdentity(engine));
    const file = path.join(runDir, WORKSPACE_STATE_DIR, WATCH_STATE_FILE);
    const state = JSON.parse(fs.readFileSync(file, "utf8")) as { workspace: string; trees: Array<{ root: string }> };
    state.workspace = "/etc";
    state.trees[0]!.root = "/etc";
    fs.writeFileSync(file, JSON.stringify(state));
    const judged = await judgeDeadRun("forged", engineIdentity(engine), tmpDir);
    expect(judged?.failed).toMatch(/^its state names \/etc, which lies in \/etc, the host's configuration/);
    expect(judged?.restored).toEqual([]);
    // Kept, so every gc reports it again and runs over that tree stay refused.
    expect(fs.existsSync(file)).toBe(true);
    expect(unjudgedRunOver(["/etc"], tmpDir)).toEqual({ runId: "forged", tree: "/etc" });
  });

  it("a state that cannot be read still refuses runs over every tree, and gc says it could not judge", async () => {
    const tmpDir = dir();
    const engine = await hostileEngine([]);
    const { ws, runDir } = await abandonedRun("torn", tmpDir, engineIdentity(engine));
    fs.writeFileSync(path.join(runDir, WORKSPACE_STATE_DIR, WATCH_STATE_FILE), '{"version":1,"trees":');
    const elsewhere = tree();
    expect(unjudgedRunOver([elsewhere], tmpDir)).toEqual({ runId: "torn", tree: elsewhere, treesUnknown: true });
    // A reaper that died mid-judgement left its claim: the next one takes it over.
    fs.renameSync(
      path.join(runDir, WORKSPACE_STATE_DIR, WATCH_STATE_FILE),
      path.join(runDir, WORKSPACE_STATE_DIR, `${WATCH_STATE_FILE}.judging-${deadPid()}`),
    );
    const judged = await judgeDeadRun("torn", engineIdentity(engine), tmpDir);
    expect(judged?.failed).toBe("its saved state could not be read");
    expect(fs.existsSync(path.join(ws, ".envrc"))).toBe(true);
    expect(unjudgedRunOver([ws], tmpDir)).toBeUndefined();
  });
});
