// A pack the host could not check (its git could not be started: not installed, EAGAIN under a
// process limit, ENOMEM, EMFILE; or its scratch folder could not be written) is not a pack the host
// refused (review, session 34): an honest `git gc` in the sandbox packs the history into a new pack
// and prunes the loose objects, and removing that pack lost the repository's history on the host
// (`git log`: fatal: bad object HEAD). Such a pack is set aside (moved into the run's folder), the
// run fails as host trouble, and the commands the error prints put the history back.
import { execFileSync, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { uncheckedPacks } from "../../src/run/run-workspace.js";
import { NOT_CHECKED_HERE } from "../../src/workspace/git-object-check.js";
import { checkPack, isPackNotCheckedHere } from "../../src/workspace/git-object-verify.js";
import { UNCHECKED_PACKS_DIR, WorkspaceWatch } from "../../src/workspace/workspace-watch.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-unchecked-");
// Workspaces on another filesystem than the run's folder, where there is one: the set-aside is a copy then.
const shm = tempTrees("sandbox-run-unchecked-", () => (fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir()));

const callerPath = process.env.PATH;
afterEach(() => {
  process.env.PATH = callerPath;
});

const env = { PATH: callerPath, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" };
const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, env, encoding: "utf8" });
const gitStatus = (cwd: string, ...args: string[]) => spawnSync("git", args, { cwd, env, encoding: "utf8" });

/** A repository of three commits, all loose objects. */
function repo(root: string): string {
  git(root, "init", "-q", "-b", "master");
  for (const c of [1, 2, 3]) {
    for (let f = 1; f <= 5; f++) fs.writeFileSync(path.join(root, `f${f}.txt`), `${c} ${f}\n`);
    git(root, "add", "-A");
    git(root, "commit", "-qm", `c${c}`);
  }
  return root;
}

const packFiles = (ws: string) =>
  fs
    .readdirSync(path.join(ws, ".git/objects/pack"))
    .filter((n) => /\.(pack|idx)$/.test(n))
    .sort();

/**
 * A bind-mode run whose sandbox runs an honest `git gc`, judged on a host whose PATH has no git
 * (the sandbox's own git is the caller's here, run before the judgement).
 */
async function gcJudgedWithoutGit(ws: string, runDir: string) {
  const w = await WorkspaceWatch.start({
    workspace: ws,
    workspaceWritable: true,
    writableRoots: [],
    protectedPaths: [],
    stateDir: path.join(runDir, "workspace"),
  });
  git(ws, "gc", "-q");
  const packed = packFiles(ws);
  expect(packed.length).toBe(2);
  process.env.PATH = dir(); // an absolute folder without git: the host's git cannot be found
  try {
    return { report: await w.finish(), packed };
  } finally {
    process.env.PATH = callerPath;
  }
}

/** Runs the hint's commands (after "from outside the workspace: ", up to ". A pack git refuses") in a shell. */
function runPrintedCommands(hint: string): void {
  const commands = /from outside the workspace: (.*)\. A pack git refuses/.exec(hint)?.[1];
  expect(commands, hint).toBeDefined();
  const r = spawnSync("bash", ["-c", `set -e; ${commands}`], { cwd: "/", env, encoding: "utf8" });
  expect(r.status, `${commands}\n${r.stderr}`).toBe(0);
}

describe("a pack the host could not check is set aside, not removed", { timeout: 60_000 }, () => {
  it("checkPack says the host could not check (git not on PATH, scratch not writable); a lying .idx is still refused", async () => {
    const ws = repo(dir());
    git(ws, "gc", "-q");
    const stem = path.join(ws, ".git/objects/pack", packFiles(ws)[0]!.replace(/\.idx$/, ""));
    const open = (ext: string) => fs.openSync(`${stem}.${ext}`, "r");
    const options = { format: "sha1" as const, scratch: dir(), timeoutMs: 60_000 };
    process.env.PATH = dir();
    const noGit = await checkPack({ pack: open("pack"), idx: open("idx") }, options);
    process.env.PATH = callerPath;
    expect(isPackNotCheckedHere(noGit)).toBe(true);
    expect(noGit).toEqual({ hostReason: "the host's git is not installed: not found on PATH" });
    // A scratch folder that cannot be written (here: a file where the folder should be).
    const notAFolder = path.join(dir(), "file");
    fs.writeFileSync(notAFolder, "");
    const noScratch = await checkPack({ pack: open("pack"), idx: open("idx") }, { ...options, scratch: notAFolder });
    expect(noScratch).toEqual({ hostReason: `its scratch folder ${notAFolder} could not be written (ENOTDIR)` });
    // The host's git runs: git's own pack passes, an .idx of another pack is refused (a string).
    expect(await checkPack({ pack: open("pack"), idx: open("idx") }, options)).toBeUndefined();
    const other = dir();
    fs.writeFileSync(path.join(other, "x"), "x\n");
    git(other, "init", "-q");
    git(other, "add", "x");
    git(other, "commit", "-qm", "x");
    git(other, "gc", "-q");
    const otherIdx = path.join(other, ".git/objects/pack", packFiles(other).find((n) => n.endsWith(".idx"))!);
    const refused = await checkPack({ pack: open("pack"), idx: fs.openSync(otherIdx, "r") }, options);
    expect(typeof refused).toBe("string");
    // A pack whose object header claims 2^60 bytes makes git say "Out of memory": the pack's doing,
    // refused, never "this host could not check it" (review of this session's change, fix34b).
    let size = 2n ** 60n;
    const header: number[] = [];
    let byte = Number((1n << 4n) | (size & 15n));
    size >>= 4n;
    while (size) {
      header.push(byte | 128);
      byte = Number(size & 127n);
      size >>= 7n;
    }
    header.push(byte);
    const body = Buffer.concat([
      Buffer.from("PACK"),
      Buffer.from([0, 0, 0, 2, 0, 0, 0, 1]),
      Buffer.from(header),
      zlib.deflateSync("tree x\n"),
    ]);
    const hostile = path.join(dir(), "p.pack");
    fs.writeFileSync(hostile, Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]));
    const claimsHuge = await checkPack({ pack: fs.openSync(hostile, "r"), idx: open("idx") }, options);
    expect(isPackNotCheckedHere(claimsHuge)).toBe(false);
    expect(claimsHuge).toMatch(/^the host's git index-pack --verify refused it/);
  });

  it("bind mode, host without git, an honest git gc: the pack and .idx are moved to the run's folder, the run fails as host trouble, and the printed commands bring the history back", async () => {
    for (const [where, ws] of [
      ["same filesystem", repo(dir())],
      ["another filesystem", repo(shm.dir())],
    ] as const) {
      const runDir = dir();
      const { report, packed } = await gcJudgedWithoutGit(ws, runDir);
      // Refused-unchecked before: "not checked: the host's git is needed ...", both files removed.
      expect(
        report.violations.map((v) => `${v.rule} ${v.path} ${v.detail}`),
        where,
      ).toEqual([
        `git-objects .git/objects/pack/${packed[1]} ${NOT_CHECKED_HERE}the host's git is not installed: not found on PATH`,
      ]);
      const restore = report.restore!;
      expect(restore.objects, where).toEqual([]); // nothing deleted
      const folder = path.join(runDir, UNCHECKED_PACKS_DIR);
      expect(restore.setAside.map((a) => a.path).sort(), where).toEqual(packed.map((n) => `.git/objects/pack/${n}`));
      for (const entry of restore.setAside) {
        expect(entry.keptAt?.startsWith(`${folder}/`), where).toBe(true);
        expect(fs.readFileSync(entry.keptAt!).length, where).toBeGreaterThan(0);
      }
      // Not where the user's git reads it, unchecked.
      expect(packFiles(ws), where).toEqual([]);
      expect(gitStatus(ws, "log", "--oneline").status, where).not.toBe(0);

      const error = uncheckedPacks({ ...report, applied: true }, runDir, ws, "default")!;
      expect(error.code, where).toBe("usage");
      expect(error.shortMessage, where).toContain("This host could not check a git pack the run wrote");
      expect(error.shortMessage, where).toContain("the host's git is not installed");
      expect(error.shortMessage, where).toContain(folder);
      expect(error.shortMessage, where).not.toMatch(/not what (its|their) names? says?|nothing to undo/);
      const pack = restore.setAside.find((a) => a.path.endsWith(".pack"))!.keptAt!;
      const idx = restore.setAside.find((a) => a.path.endsWith(".idx"))!.keptAt!;
      expect(error.hint, where).toContain(
        `git index-pack --verify ${pack} && mv ${pack} ${idx} ${path.join(ws, ".git/objects/pack")}/`,
      );
      runPrintedCommands(error.hint!);
      expect(packFiles(ws), where).toEqual(packed);
      expect(git(ws, "log", "--format=%s"), where).toBe("c3\nc2\nc1\n");
      expect(gitStatus(ws, "fsck", "--strict").status, where).toBe(0);
    }
  });

  it("a run folder that cannot take the pack: the .pack stays without its .idx (git does not read it), and git index-pack makes it again", async () => {
    const ws = repo(dir());
    const runDir = dir();
    fs.writeFileSync(path.join(runDir, UNCHECKED_PACKS_DIR), ""); // a file where the folder goes
    const { report, packed } = await gcJudgedWithoutGit(ws, runDir);
    const restore = report.restore!;
    expect(restore.objects).toEqual([]);
    expect(restore.setAside.every((a) => a.keptAt === undefined)).toBe(true);
    expect(packFiles(ws)).toEqual(packed.filter((n) => n.endsWith(".pack")));
    const error = uncheckedPacks({ ...report, applied: true }, runDir, ws, "default")!;
    expect(error.code).toBe("usage");
    expect(error.hint).toContain(`git index-pack ${path.join(ws, ".git/objects/pack", packed[1]!)}`);
    runPrintedCommands(error.hint!);
    expect(packFiles(ws)).toEqual(packed);
    expect(git(ws, "log", "--format=%s")).toBe("c3\nc2\nc1\n");
  });

  it("a run over a git repository on a host without git is refused before it starts; one without a repository starts", async () => {
    const start = (ws: string) =>
      WorkspaceWatch.start({
        workspace: ws,
        workspaceWritable: true,
        writableRoots: [],
        protectedPaths: [],
        stateDir: path.join(dir(), "workspace"),
      });
    const ws = repo(dir());
    process.env.PATH = dir();
    const refused = await start(ws).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: "usage" });
    expect((refused as Error).message).toContain(`${ws} holds a git repository, and this host has no git on PATH`);
    expect((refused as { hint: string }).hint).toContain("Install git on the host");
    const plain = dir();
    fs.writeFileSync(path.join(plain, "a.txt"), "a\n");
    await expect(start(plain)).resolves.toBeDefined();
  });
});
