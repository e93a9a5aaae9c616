// Copy mode's apply, its controller SIGKILLed half way (review, session 35: `lib/` of 20,000 files
// renamed to `src/`, the CLI killed mid-apply, left `lib/` gone and `src/` with 121 files; gc then
// deleted the staged rest and kept the originals as `1`, `2`, … with nothing saying where they
// belong). The apply runs in a child process (fixtures/dead-apply-child.ts) killed at a step of
// the test's choosing; the reaper (removeListedStagingDirs, what gc and the next run's start-up
// call) must then put the tree back exactly as it was before the apply.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { deadApplyOver, reapRunDirs } from "../../src/run/reap-run-dirs.js";
import { createRunDir, HOLD_FILE_PREFIX, RUN_DIR_MARKER, runDirsParent } from "../../src/run/run-dirs.js";
import type { RunEvent } from "../../src/run/run-events.js";
import { holdForReaper, holdTreesOnHost } from "../../src/run/tree-hold-files.js";
import { pidnsField } from "../../src/util/own-pid-namespace.js";
import { JournalWriter } from "../../src/workspace-transfer/apply-journal-file.js";
import { type DeadApply, deadApplySentence } from "../../src/workspace-transfer/dead-apply.js";
import { STAGING_RECORD } from "../../src/workspace-transfer/staging-dir.js";
import { removeListedStagingDirs } from "../../src/workspace-transfer/staging-reap.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir: tempDir } = tempTrees("sandbox-run-dead-apply-");
/** The reaper's hold of a tree, always given (the tests of the hold itself are below). */
const noHold = () => ({ release() {} });
const CHILD = fileURLToPath(new URL("./fixtures/dead-apply-child.ts", import.meta.url));

/** The workspace before the run: `lib/` (300 files, some executable, a subfolder) and one of each change. */
function makeTree(): { parent: string; root: string } {
  const parent = tempDir();
  const root = path.join(parent, "ws");
  fs.mkdirSync(path.join(root, "lib", "sub"), { recursive: true });
  for (let i = 0; i < 300; i++)
    fs.writeFileSync(path.join(root, "lib", `m${i}.js`), `module ${i}\n`, { mode: i % 7 === 0 ? 0o755 : 0o644 });
  fs.writeFileSync(path.join(root, "lib", "sub", "deep.txt"), "deep\n");
  fs.writeFileSync(path.join(root, "README"), "readme\n");
  fs.writeFileSync(path.join(root, "gone.txt"), "gone\n");
  fs.writeFileSync(path.join(root, "tool.sh"), "echo\n");
  fs.mkdirSync(path.join(root, "beside-me"));
  fs.writeFileSync(path.join(root, "beside-me", "f.txt"), "f\n");
  fs.writeFileSync(path.join(root, "kind"), "a file\n");
  fs.symlinkSync("README", path.join(root, "link"));
  fs.mkdirSync(path.join(root, "data"));
  fs.writeFileSync(path.join(root, "data", "d.txt"), "d\n");
  // Older than the apply, so a time it moves and does not set back shows.
  const old = new Date(Date.now() - 3600_000);
  for (const dir of ["lib/sub", "lib", "beside-me", "data", ""]) fs.utimesSync(path.join(root, dir), old, old);
  return { parent, root };
}

/** Every entry: kind, mode, inode, content or target, a file's mtime; and each directory's mtime apart. */
function snapshot(root: string): { entries: Record<string, string>; dirTimes: Record<string, number> } {
  const entries: Record<string, string> = {};
  const dirTimes: Record<string, number> = {};
  const visit = (rel: string) => {
    const file = path.join(root, rel);
    const st = fs.lstatSync(file);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      entries[rel] = `dir:${mode}:${st.ino}`;
      dirTimes[rel] = st.mtimeMs;
      for (const name of fs.readdirSync(file).sort()) visit(rel ? `${rel}/${name}` : name);
    } else if (st.isSymbolicLink()) entries[rel] = `link:${st.ino}:${fs.readlinkSync(file)}`;
    else entries[rel] = `file:${mode}:${st.ino}:${st.mtimeMs}:${fs.readFileSync(file, "utf8")}`;
  };
  visit("");
  return { entries, dirTimes };
}

/** Kind, mode and content of every entry (what a finished apply must leave, whatever the inodes). */
function listing(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [rel, text] of Object.entries(snapshot(root).entries)) {
    if (rel === "") continue;
    const [kind, mode, , , ...content] = text.split(":");
    out[rel] =
      kind === "link"
        ? `link:${text.split(":").slice(2).join(":")}`
        : kind === "dir"
          ? `dir:${mode}`
          : `file:${mode}:${content.join(":")}`;
  }
  return out;
}

/**
 * Runs the apply in a child, killed (SIGKILL) where `pause` says (see the child); returns the run
 * folder's staging list and the sandbox's copy (what the apply was to make the tree).
 */
async function killedAt(
  root: string,
  pause: string,
  record = path.join(tempDir(), "staging.json"),
): Promise<{ record: string; copy: string; pid: number }> {
  const copy = tempDir();
  const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
    env: { ...process.env, ROOT: root, COPY: copy, RECORD: record, PAUSE: pause, BESIDE: "beside-me" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  await new Promise<void>((resolve) => {
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (/paused|finished/.test(out)) resolve();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    void exited.then(() => resolve());
  });
  child.kill("SIGKILL");
  await exited;
  expect(out, "the apply reached the step the test stops it at").toContain("paused");
  return { record, copy, pid: child.pid! };
}

describe("an apply whose controller was killed half way", () => {
  it.each([
    ["logged:5", "moving lib/'s files aside, a step journaled but not taken"],
    ["done:313", "just after a folder went next to its place (beside)"],
    ["write:150", "half of src/ written (beforeWrite: the hook the apply had before journals)"],
    ["logged:450", "more of src/ written, a file journaled but not put"],
    ["done:619", "setting the new folders' modes"],
  ])(
    "killed at %s (%s): the reaper undoes it, the tree byte for byte, mode for mode and inode for inode as before",
    async (pause) => {
      const { parent, root } = makeTree();
      const before = snapshot(root);
      const { record } = await killedAt(root, pause);
      expect(snapshot(root).entries, "the apply had changed the tree").not.toEqual(before.entries);
      const applies = removeListedStagingDirs(record, noHold);
      expect(applies).toEqual([{ tree: root, undone: true, unrestored: [] }]);
      const after = snapshot(root);
      expect(after.entries).toEqual(before.entries);
      expect(Object.keys(after.dirTimes)).toEqual(Object.keys(before.dirTimes));
      for (const [rel, mtimeMs] of Object.entries(before.dirTimes))
        expect(after.dirTimes[rel], rel).toBeCloseTo(mtimeMs, 2);
      // The staging directory is gone, and nothing was kept: everything is back in its place.
      expect(fs.readdirSync(parent)).toEqual(["ws"]);
    },
  );

  it("reaped as gc and the next run's start-up reap (reapRunDirs): the run folder goes, the apply is undone and reported", async () => {
    const { parent, root } = makeTree();
    const before = snapshot(root);
    const base = tempDir();
    const runDir = createRunDir("deadapply1", base);
    const { pid } = await killedAt(root, "write:100", path.join(runDir, STAGING_RECORD));
    fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${pid}\n${os.hostname()}\n`);
    // A dry run says what it would undo, and changes nothing.
    const changed = snapshot(root).entries;
    const previewed: DeadApply[] = [];
    expect(reapRunDirs(base, true, previewed)).toEqual([runDir]);
    expect(previewed).toEqual([{ tree: root, undone: false, unrestored: [], wouldUndo: true }]);
    expect(snapshot(root).entries).toEqual(changed);
    const applies: DeadApply[] = [];
    expect(reapRunDirs(base, false, applies)).toEqual([runDir]);
    expect(applies).toEqual([{ tree: root, undone: true, unrestored: [] }]);
    expect(snapshot(root).entries).toEqual(before.entries);
    expect(fs.readdirSync(parent)).toEqual(["ws"]);
  });

  it("killed at the commit point: the apply stands, the reaper removes what waited aside (next to its place too) and undoes nothing", async () => {
    const { parent, root } = makeTree();
    const { record, copy } = await killedAt(root, "committed");
    expect(fs.readdirSync(root).some((name) => name.startsWith(".sandbox-run-aside-"))).toBe(true);
    expect(removeListedStagingDirs(record, noHold)).toEqual([]);
    expect(listing(root)).toEqual(listing(copy));
    expect(fs.readdirSync(parent)).toEqual(["ws"]);
  });

  it("an original whose place was taken since is kept, with a manifest saying where it belongs; gc is told", async () => {
    const { parent, root } = makeTree();
    const { record } = await killedAt(root, "write:150");
    // The user put something of their own where gone.txt was (the run deleted it: it waits aside).
    expect(fs.existsSync(path.join(root, "gone.txt"))).toBe(false);
    fs.writeFileSync(path.join(root, "gone.txt"), "the user's\n");
    const applies = removeListedStagingDirs(record, noHold);
    expect(applies).toEqual([
      {
        tree: root,
        undone: false,
        unrestored: [{ path: "gone.txt", problem: expect.stringMatching(/its place is taken; it waits at /) }],
        kept: expect.stringMatching(new RegExp(`^${parent}/\\.sandbox-run-kept-[0-9a-f]{12}$`)),
      },
    ]);
    expect(fs.readFileSync(path.join(root, "gone.txt"), "utf8")).toBe("the user's\n");
    const kept = applies[0]!.kept!;
    const manifest = JSON.parse(fs.readFileSync(path.join(kept, "manifest.json"), "utf8"));
    expect(manifest.tree).toBe(root);
    expect(manifest.entries).toHaveLength(1);
    expect(manifest.entries[0].path).toBe("gone.txt");
    expect(fs.readFileSync(path.join(kept, manifest.entries[0].name), "utf8")).toBe("gone\n");
    // Everything else is back.
    expect(fs.readdirSync(path.join(root, "lib"))).toHaveLength(301);
    expect(fs.existsSync(path.join(root, "src"))).toBe(false);
    expect(fs.readdirSync(parent).sort()).toEqual([path.basename(kept), "ws"].sort());
  });
});

describe("a journal that is not what the apply writes", () => {
  it.each([
    ["a path out of the tree", (p: { dev: number; ino: number }) => ["a", "../victim", "1", 0, p.dev, p.ino]],
    [
      "an absolute path",
      (p: { dev: number; ino: number }) => ["b", "/victim", ".sandbox-run-aside-0123456789abcdef", 0, p.dev, p.ino],
    ],
    [
      "an aside name out of the aside folder",
      (p: { dev: number; ino: number }) => ["a", "victim", "../../victim", 0, p.dev, p.ino],
    ],
    [
      "a new file out of the tree",
      (p: { dev: number; ino: number }) => ["f", "sub/../../victim", ".sandbox-run-0123456789ab", p.dev, p.ino],
    ],
  ])("%s: refused whole; nothing is undone or removed, nothing outside is touched", (_what, tampered) => {
    const parent = tempDir();
    const root = path.join(parent, "ws");
    fs.mkdirSync(path.join(root, "sub"), { recursive: true });
    fs.writeFileSync(path.join(root, "sub", "new.txt"), "made by the apply\n");
    const outside = path.join(parent, "outside");
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, "keep.txt"), "outside\n");
    const staging = path.join(parent, ".sandbox-run-staging-ws-tamper");
    fs.mkdirSync(path.join(staging, "aside"), { recursive: true, mode: 0o700 });
    fs.chmodSync(staging, 0o700);
    fs.writeFileSync(path.join(staging, "aside", "1"), "an original\n");
    const rootStat = fs.statSync(root);
    const sub = fs.statSync(path.join(root, "sub"));
    const made = fs.statSync(path.join(root, "sub", "new.txt"));
    const journal = new JournalWriter(staging, root, { dev: rootStat.dev, ino: rootStat.ino });
    journal.append(["f", "sub/new.txt", ".sandbox-run-0123456789ab", sub.dev, sub.ino]);
    journal.append(["F", "sub/new.txt", made.dev, made.ino, made.size, made.mtimeMs]);
    journal.append(tampered(rootStat) as never);
    journal.close();
    const record = path.join(tempDir(), "staging.json");
    fs.writeFileSync(record, JSON.stringify([staging]));
    const tree = snapshot(parent);
    expect(removeListedStagingDirs(record, noHold)).toEqual([
      {
        tree: root,
        undone: false,
        unrestored: [],
        kept: staging,
        refused: expect.stringMatching(/line 4 of its journal: a path or name outside the tree or the aside folder/),
      },
    ]);
    // Not even the valid step before it was undone, and the staging directory stays whole.
    expect(snapshot(parent)).toEqual(tree);
    expect(fs.existsSync(path.join(parent, "victim"))).toBe(false);
    expect(fs.existsSync(path.join(staging, "aside", "1"))).toBe(true);
  });
});

it("a dead run's journal is never trusted with set-uid or set-gid: a file's mode goes back without them, and the report says so; a directory's set-gid goes back (round 3, session 42, defence in depth after session 41's R1)", () => {
  const parent = tempDir();
  const root = path.join(parent, "ws");
  fs.mkdirSync(path.join(root, "shared"), { recursive: true });
  fs.writeFileSync(path.join(root, "bash"), "#!/bin/sh\n", { mode: 0o755 });
  fs.chmodSync(path.join(root, "shared"), 0o755);
  const staging = path.join(parent, ".sandbox-run-staging-ws-setid");
  fs.mkdirSync(staging, { mode: 0o700 });
  const rootStat = fs.statSync(root);
  const file = fs.statSync(path.join(root, "bash"));
  const dir = fs.statSync(path.join(root, "shared"));
  const journal = new JournalWriter(staging, root, { dev: rootStat.dev, ino: rootStat.ino });
  // As the apply logs a chmod: the mode it had, the mode it set, the entry's inode.
  journal.append(["m", "bash", 0, 0o4755, 0o755, file.dev, file.ino]);
  journal.append(["m", "shared", 1, 0o2775, 0o755, dir.dev, dir.ino]);
  journal.close();
  const record = path.join(tempDir(), "staging.json");
  fs.writeFileSync(record, JSON.stringify([staging]));
  const [dead] = removeListedStagingDirs(record, noHold);
  expect(dead).toMatchObject({ tree: root, undone: false });
  expect(dead!.unrestored).toEqual([
    {
      path: "bash",
      problem: expect.stringMatching(/^its mode was put back as 755, without the set-uid or set-gid bit of 4755/),
    },
  ]);
  expect(fs.statSync(path.join(root, "bash")).mode & 0o7777).toBe(0o755);
  expect(fs.statSync(path.join(root, "shared")).mode & 0o7777).toBe(0o2775);
});

describe("a dead run's apply over a tree a run in progress holds (review, session 36)", () => {
  /** A dead run's folder listing an apply killed half way over `root`. */
  async function deadApplyIn(base: string, runId: string, root: string): Promise<string> {
    const runDir = createRunDir(runId, base);
    const { pid } = await killedAt(root, "write:100", path.join(runDir, STAGING_RECORD));
    fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${pid}\n${os.hostname()}\n`);
    return runDir;
  }

  it.each([
    ["of this process (the start-up reaper of the agent whose run holds it)", "here"],
    ["of another process of this user", "there"],
  ])(
    "a run %s: the reaper leaves the apply and its run folder to the next reaper, and undoes it once the tree is free",
    async (_what, where) => {
      const { root } = makeTree();
      const before = snapshot(root);
      const base = tempDir();
      const runDir = await deadApplyIn(base, "deadapply-held", root);
      const halfApplied = snapshot(root).entries;
      let release: () => void;
      let sleeper: ReturnType<typeof spawn> | undefined;
      if (where === "here") {
        const hold = await holdTreesOnHost({ runId: "live", writable: [root], readOnly: [] }, { tmpDir: base });
        release = () => hold.release();
      } else {
        // Another controller's hold file, its process alive (the file is what a process publishes).
        sleeper = spawn("sleep", ["600"], { stdio: "ignore" });
        const file = path.join(runDirsParent(base), `${HOLD_FILE_PREFIX}live`);
        const hold = {
          runId: "live",
          writable: [root],
          readOnly: [],
          pid: sleeper.pid,
          host: os.hostname(),
          ticket: 1,
          ...pidnsField(),
        };
        fs.writeFileSync(file, JSON.stringify(hold), { mode: 0o600 });
        release = () => {
          fs.rmSync(file);
          sleeper!.kill("SIGKILL");
        };
      }
      try {
        expect(deadApplyOver([path.join(root, "lib")], base)).toEqual({ runId: "deadapply-held", tree: root });
        const applies: DeadApply[] = [];
        expect(reapRunDirs(base, false, applies)).toEqual([]);
        expect(applies).toEqual([
          { tree: root, undone: false, unrestored: [], waiting: "run live, in progress, holds it" },
        ]);
        expect(deadApplySentence(applies[0]!)).toContain("run gc again once it ends");
        // Nothing was touched under the run, and the journal is still listed for the next reaper.
        expect(snapshot(root).entries).toEqual(halfApplied);
        expect(fs.existsSync(runDir)).toBe(true);
        // The reaper's own hold is gone: the run it gave way to is not kept waiting by it.
        expect(fs.readdirSync(runDirsParent(base)).filter((n) => n.startsWith(HOLD_FILE_PREFIX))).toEqual([
          "hold-live",
        ]);
      } finally {
        release();
      }
      const applies: DeadApply[] = [];
      expect(reapRunDirs(base, false, applies)).toEqual([runDir]);
      expect(applies).toEqual([{ tree: root, undone: true, unrestored: [] }]);
      expect(snapshot(root).entries).toEqual(before.entries);
      expect(deadApplyOver([root], base)).toBeUndefined();
    },
  );

  it("a reaper that cannot write its hold leaves the apply and its run folder waiting, and says why (review of session 36's fixes: the folder went, and the journal's only pointer with it)", async () => {
    const { root } = makeTree();
    const base = tempDir();
    const runDir = await deadApplyIn(base, "deadapply-nohold", root);
    const halfApplied = snapshot(root).entries;
    // The next version of the reaper's hold file is already there: its write fails (EEXIST), as on a full disk.
    const stale = path.join(runDirsParent(base), `${HOLD_FILE_PREFIX}run-deadapply-nohold-reap-${process.pid}.next`);
    fs.writeFileSync(stale, "");
    const applies: DeadApply[] = [];
    expect(reapRunDirs(base, false, applies)).toEqual([]);
    expect(applies).toEqual([
      { tree: root, undone: false, unrestored: [], waiting: expect.stringContaining("could not hold the tree") },
    ]);
    expect(fs.existsSync(runDir)).toBe(true);
    expect(snapshot(root).entries).toEqual(halfApplied);
    expect(deadApplyOver([root], base)).toEqual({ runId: "deadapply-nohold", tree: root });
    fs.rmSync(stale, { force: true });
    expect(reapRunDirs(base, false, [])).toEqual([runDir]);
  });

  it("a run held by the reaper makes a run that comes after it wait until the undo is done", async () => {
    const { root } = makeTree();
    const base = tempDir();
    const reaper = holdForReaper("deadapply-x", [root], base);
    expect(typeof reaper).toBe("object");
    let started = false;
    const later = holdTreesOnHost({ runId: "later", writable: [root], readOnly: [] }, { tmpDir: base }).then((h) => {
      started = true;
      return h;
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(started).toBe(false);
    (reaper as { release(): void }).release();
    (await later).release();
    expect(started).toBe(true);
  });

  it("a new run over such a tree is refused, naming gc, before it holds or copies anything; with its reaping on, the apply is undone first and said", async () => {
    const { root } = makeTree();
    const before = snapshot(root);
    const base = tempDir();
    await deadApplyIn(base, "deadapply-agent", root);
    const halfApplied = snapshot(root).entries;
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = base;
    try {
      await refusedThenReaped(root, before.entries, halfApplied);
    } finally {
      // Restored whatever failed: the unit step's files share this process (--no-isolate).
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
    }
  });
});

/** The two agents of the test above: one refusing the run, one whose reaping undoes the apply first. */
async function refusedThenReaped(
  root: string,
  before: Record<string, string>,
  halfApplied: Record<string, string>,
): Promise<void> {
  const base = process.env.TMPDIR!;
  const models = {
    providers: {
      scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "x" }] },
    },
  };
  // An engine that is down: nothing of the run reaches one (the refusal, the reaping of run folders).
  const down = () => ({ name: "down", ping: () => Promise.reject(new Error("down")) }) as unknown as Engine;
  const refusing = new ContainerPiAgent({ model: "scripted/x", models, engine: down(), reapOrphans: false });
  try {
    await expect(refusing.run("go", { cwd: root, workspaceMode: "copy" })).rejects.toMatchObject({
      code: "usage",
      message: expect.stringContaining(
        `Run deadapply-agent was copying its sandbox's changes into ${root} when its controller died`,
      ),
      hint: expect.stringContaining("sandbox-run gc"),
    });
    expect(snapshot(root).entries).toEqual(halfApplied);
    expect(fs.readdirSync(runDirsParent(base)).filter((n) => n.startsWith(HOLD_FILE_PREFIX))).toEqual([]);
  } finally {
    await refusing.close();
  }
  const events: RunEvent[] = [];
  const reaping = new ContainerPiAgent({
    model: "scripted/x",
    models,
    engine: down(),
    onEvent: (e) => events.push(e),
  });
  try {
    // The run itself fails at the engine, after the apply was undone and said.
    await expect(reaping.run("go", { cwd: root, workspaceMode: "copy" })).rejects.toBeDefined();
    expect(snapshot(root).entries).toEqual(before);
    const said = events.filter((e) => e.type === "workspace.dead-apply");
    expect(said).toHaveLength(1);
    expect(said[0]!.data).toMatchObject({ tree: root, undone: true });
    expect(String(said[0]!.data.warning)).toContain(`undid the unfinished apply of ${root}`);
  } finally {
    await reaping.close();
  }
}

describe("a dead run's staging folder inside a tree a later run lends (red-team review, round 3, session 41)", () => {
  /**
   * A dead copy-mode run over `parent/proj` that listed its staging folder next to it, inside
   * `parent`, with no journal yet (killed during its copy-out): a later run over `parent` would lend
   * the folder to its sandbox, which could write a journal and aside entries the next reaper replays.
   */
  async function deadStagingBeside(base: string, runId: string): Promise<{ parent: string; staging: string }> {
    const parent = tempDir();
    fs.mkdirSync(path.join(parent, "proj"));
    fs.writeFileSync(path.join(parent, "proj", "a.txt"), "a\n");
    const staging = fs.mkdtempSync(path.join(parent, ".sandbox-run-staging-proj-"));
    const runDir = createRunDir(runId, base);
    fs.writeFileSync(path.join(runDir, STAGING_RECORD), JSON.stringify([staging]), { mode: 0o600 });
    const gone = spawn("true");
    await new Promise((resolve) => gone.on("exit", resolve));
    fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${gone.pid}\n${os.hostname()}\n`);
    return { parent, staging };
  }

  it("counts as a dead apply over every tree that holds it, journal or not; not over a tree beside it", async () => {
    const base = tempDir();
    const { parent, staging } = await deadStagingBeside(base, "deadstaging-over");
    expect(deadApplyOver([parent], base)).toEqual({ runId: "deadstaging-over", tree: parent, staging });
    expect(deadApplyOver([path.join(parent, "proj")], base)).toBeUndefined();
    expect(reapRunDirs(base, false, [])).toHaveLength(1);
    expect(fs.existsSync(staging)).toBe(false);
    expect(deadApplyOver([parent], base)).toBeUndefined();
  });

  it("a run over such a tree is refused, naming gc; an agent that already reaped once at start-up reaps it again before lending the tree", async () => {
    const base = tempDir();
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = base;
    const models = {
      providers: {
        scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "x" }] },
      },
    };
    const down = () => ({ name: "down", ping: () => Promise.reject(new Error("down")) }) as unknown as Engine;
    const refusing = new ContainerPiAgent({ model: "scripted/x", models, engine: down(), reapOrphans: false });
    const reaping = new ContainerPiAgent({ model: "scripted/x", models, engine: down() });
    try {
      // The reaping agent's one start-up reaping happens now, before the run below dies.
      const early = tempDir();
      await expect(reaping.run("go", { cwd: early })).rejects.toMatchObject({ code: "docker-unavailable" });
      const { parent, staging } = await deadStagingBeside(base, "deadstaging-agent");
      await expect(refusing.run("go", { cwd: parent })).rejects.toMatchObject({
        code: "usage",
        message: expect.stringContaining(`left its staging folder ${staging} inside ${parent}`),
        hint: expect.stringContaining("sandbox-run gc"),
      });
      expect(fs.existsSync(staging)).toBe(true);
      // Refused or reaped before any engine is asked: the run fails at the engine only once the folder is gone.
      await expect(reaping.run("go", { cwd: parent })).rejects.toMatchObject({ code: "docker-unavailable" });
      expect(fs.existsSync(staging)).toBe(false);
    } finally {
      await refusing.close();
      await reaping.close();
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
    }
  });
});

describe("a dead apply's new files and its journal's reading (review, session 36)", () => {
  /** Everything but `rel` as `snapshot` has it. */
  const without = (entries: Record<string, string>, rel: string) =>
    Object.fromEntries(Object.entries(entries).filter(([k]) => k !== rel));

  it.each([
    ["put:new.txt", "new.txt", "a new file journaled, not made"],
    ["rename:new.txt", "new.txt", "a new file made, not yet in its place"],
    ["put:README", "README", "a replacing file journaled, not made: the original waits aside"],
    ["rename:README", "README", "a replacing file made, not yet in its place"],
  ])(
    "killed at %s (%s, %s), the user then writes that path: the reaper never removes what it did not put there",
    async (pause, rel) => {
      const { parent, root } = makeTree();
      const before = snapshot(root);
      const { record } = await killedAt(root, pause);
      expect(fs.existsSync(path.join(root, rel)), "the new file is not in its place").toBe(false);
      fs.writeFileSync(path.join(root, rel), "the user's, written after the crash\n");
      const applies = removeListedStagingDirs(record, noHold);
      // The user's file stays (the version 1 journal had no inode for it: it was removed, the
      // reaper said it undid everything).
      expect(fs.readFileSync(path.join(root, rel), "utf8")).toBe("the user's, written after the crash\n");
      expect(without(snapshot(root).entries, rel)).toEqual(without(before.entries, rel));
      expect(fs.readdirSync(root).filter((name) => name.startsWith(".sandbox-run-"))).toEqual([]);
      if (rel === "new.txt") {
        // Nothing was there before the apply: the tree is as it was, with the user's file.
        expect(applies).toEqual([{ tree: root, undone: true, unrestored: [] }]);
        expect(fs.readdirSync(parent)).toEqual(["ws"]);
      } else {
        // The original README cannot go back (its place is taken): kept, and said where.
        const kept = applies[0]?.kept ?? "(none)";
        expect(applies).toEqual([
          {
            tree: root,
            undone: false,
            unrestored: [{ path: "README", problem: expect.stringMatching(/^its place is taken; it waits at /) }],
            kept: expect.stringMatching(new RegExp(`^${parent}/\\.sandbox-run-kept-[0-9a-f]{12}$`)),
          },
        ]);
        const waits = applies[0]!.unrestored[0]!.problem.replace("its place is taken; it waits at ", "");
        expect(path.dirname(waits)).toBe(kept);
        expect(fs.readFileSync(waits, "utf8")).toBe("readme\n");
      }
    },
  );

  it.each([
    ["a new file", "notes.md", false],
    ["a file replacing one the apply moved aside", "README", true],
  ])(
    "a version 1 journal whose controller was killed as it put %s (a `f` line, no `F`): what is at the path stays, and is reported",
    (_what, rel, replacing) => {
      const parent = tempDir();
      const root = path.join(parent, "ws");
      fs.mkdirSync(root);
      // What is there now: the run's file, or one the user wrote since; nothing tells which.
      fs.writeFileSync(path.join(root, rel), "there now\n");
      const temporary = ".sandbox-run-0123456789ab";
      fs.writeFileSync(path.join(root, temporary), "half written\n");
      const staging = path.join(parent, ".sandbox-run-staging-ws-v1");
      fs.mkdirSync(path.join(staging, "aside"), { recursive: true, mode: 0o700 });
      fs.chmodSync(staging, 0o700);
      if (replacing) fs.writeFileSync(path.join(staging, "aside", "1"), "the original\n");
      const r = fs.statSync(root);
      const lines = [
        { v: 1, root, dev: r.dev, ino: r.ino },
        ["t", "", r.atimeMs / 1000, r.mtimeMs / 1000, r.dev, r.ino],
        ...(replacing ? [["a", rel, "1", 0, r.dev, r.ino]] : []),
        ["f", rel, temporary, r.dev, r.ino],
      ];
      fs.writeFileSync(path.join(staging, "journal"), lines.map((l) => `${JSON.stringify(l)}\n`).join(""), {
        mode: 0o600,
      });
      const record = path.join(tempDir(), "staging.json");
      fs.writeFileSync(record, JSON.stringify([staging]));
      const applies = removeListedStagingDirs(record, noHold);
      const killed = { path: rel, problem: expect.stringMatching(/^the apply was killed while it put a file there/) };
      expect(applies).toEqual([
        {
          tree: root,
          undone: false,
          unrestored: replacing
            ? [killed, { path: rel, problem: expect.stringMatching(/^its place is taken; it waits at /) }]
            : [killed],
          ...(replacing ? { kept: expect.stringMatching(/\.sandbox-run-kept-[0-9a-f]{12}$/) } : {}),
        },
      ]);
      expect(fs.readFileSync(path.join(root, rel), "utf8")).toBe("there now\n");
      // Its temporary name is the apply's own: gone.
      expect(fs.readdirSync(root)).toEqual([rel]);
      if (replacing) expect(fs.readFileSync(path.join(applies[0]!.kept!, "1"), "utf8")).toBe("the original\n");
      expect(deadApplySentence(applies[0]!)).toContain(`${rel} (the apply was killed while it put a file there`);
    },
  );

  /** Reaps the staging directories `record` lists in a child (fixtures/dead-apply-child.ts, REAP); killed after `ms`. */
  async function reapInChild(record: string, ms: number): Promise<{ out: string; killed: boolean }> {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
      env: { ...process.env, REAP: record },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, ms);
    await new Promise<void>((resolve) => child.on("exit", () => resolve()));
    clearTimeout(timer);
    return { out, killed };
  }

  it("a FIFO named `journal` in a staging directory: refused at once (the reaper does not wait on it)", async () => {
    const parent = tempDir();
    fs.mkdirSync(path.join(parent, "ws"));
    const staging = path.join(parent, ".sandbox-run-staging-ws-fifo");
    fs.mkdirSync(staging, { mode: 0o700 });
    await new Promise<void>((resolve, reject) =>
      spawn("mkfifo", ["-m", "600", path.join(staging, "journal")]).on("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`mkfifo: ${code}`)),
      ),
    );
    const record = path.join(tempDir(), "staging.json");
    fs.writeFileSync(record, JSON.stringify([staging]));
    const { out, killed } = await reapInChild(record, 20_000);
    expect(killed, "the reaper hung on the FIFO").toBe(false);
    expect(JSON.parse(out)).toEqual([
      {
        tree: "(unknown)",
        undone: false,
        unrestored: [],
        kept: staging,
        refused: "its journal is not a private file of this user's",
      },
    ]);
    expect(fs.existsSync(path.join(staging, "journal"))).toBe(true);
  });

  it("a journal of 600 MiB (more than a string holds): refused by its size, naming its tree, nothing read past its header or undone", () => {
    const parent = tempDir();
    const root = path.join(parent, "ws");
    fs.mkdirSync(root);
    const staging = path.join(parent, ".sandbox-run-staging-ws-big");
    fs.mkdirSync(path.join(staging, "aside"), { recursive: true, mode: 0o700 });
    fs.chmodSync(staging, 0o700);
    fs.writeFileSync(path.join(staging, "aside", "1"), "an original\n");
    const r = fs.statSync(root);
    const file = path.join(staging, "journal");
    fs.writeFileSync(
      file,
      `${JSON.stringify({ v: 1, root, dev: r.dev, ino: r.ino })}\n${JSON.stringify(["a", "x", "1", 0, r.dev, r.ino])}\n`,
      { mode: 0o600 },
    );
    fs.truncateSync(file, 600 * 1024 * 1024); // sparse: no disk used
    const record = path.join(tempDir(), "staging.json");
    fs.writeFileSync(record, JSON.stringify([staging]));
    expect(removeListedStagingDirs(record, noHold)).toEqual([
      {
        tree: root,
        undone: false,
        unrestored: [],
        kept: staging,
        refused: "its journal is larger than any apply writes",
      },
    ]);
    expect(fs.readdirSync(root)).toEqual([]);
    expect(fs.readFileSync(path.join(staging, "aside", "1"), "utf8")).toBe("an original\n");
  });

  it("a journal read a chunk at a time: a line across a chunk's end (a name of multi-byte characters) is read whole, a last line cut short left out", () => {
    const parent = tempDir();
    const root = path.join(parent, "ws");
    fs.mkdirSync(root);
    const name = "é漢字-ü".repeat(20); // 220 bytes: the 1 MiB chunk ends inside its 9th 字
    const staging = path.join(parent, ".sandbox-run-staging-ws-chunks");
    fs.mkdirSync(path.join(staging, "aside"), { recursive: true, mode: 0o700 });
    fs.chmodSync(staging, 0o700);
    fs.writeFileSync(path.join(staging, "aside", "1"), "the original\n");
    const r = fs.statSync(root);
    const header = `${JSON.stringify({ v: 2, root, dev: r.dev, ino: r.ino })}\n`;
    const times = `${JSON.stringify(["t", "", r.atimeMs / 1000, r.mtimeMs / 1000, r.dev, r.ino])}\n`;
    const step = `${JSON.stringify(["a", name, "1", 0, r.dev, r.ino])}\n`;
    // The step's line starts 100 bytes before the first 1 MiB ends: its name crosses it.
    const fill = 1024 * 1024 - 100 - Buffer.byteLength(header) - Buffer.byteLength(times);
    const pad = `${JSON.stringify(["t", "x".repeat(fill - 17), 1, 1, 1, 1])}\n`;
    expect(Buffer.byteLength(header + times + pad)).toBe(1024 * 1024 - 100);
    fs.writeFileSync(path.join(staging, "journal"), `${header}${times}${pad}${step}["b","cut sh`, { mode: 0o600 });
    const record = path.join(tempDir(), "staging.json");
    fs.writeFileSync(record, JSON.stringify([staging]));
    expect(removeListedStagingDirs(record, noHold)).toEqual([{ tree: root, undone: true, unrestored: [] }]);
    expect(fs.readdirSync(root)).toEqual([name]);
    expect(fs.readFileSync(path.join(root, name), "utf8")).toBe("the original\n");
  });

  it("an original kept because its place was taken is named where it waits after the kept folder moved (not /proc/self/fd/…)", async () => {
    const { parent, root } = makeTree();
    const { record } = await killedAt(root, "write:150");
    fs.writeFileSync(path.join(root, "gone.txt"), "the user's\n");
    const applies = removeListedStagingDirs(record, noHold);
    const kept = applies[0]!.kept!;
    expect(kept.startsWith(`${parent}/.sandbox-run-kept-`)).toBe(true);
    const [unrestored] = applies[0]!.unrestored;
    expect(unrestored!.problem).toMatch(new RegExp(`^its place is taken; it waits at ${kept}/[0-9]+$`));
    const waits = unrestored!.problem.replace("its place is taken; it waits at ", "");
    expect(fs.readFileSync(waits, "utf8")).toBe("gone\n");
    expect(deadApplySentence(applies[0]!)).not.toContain("/proc/self/fd/");
  });
});
