// Run folders live in one private parent per user; the reaper looks only there and removes only the
// names a run creates, never recursively and never through a symlink.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { unjudgedRunOver } from "../../src/run/judge-dead-run.js";
import { reapRunDirs } from "../../src/run/reap-run-dirs.js";
import {
  createRunDir,
  keptPackFolders,
  privateRunDirsParent,
  RECORD_SCRATCH_DIR,
  RECORD_STAGING_DIR,
  RUN_DIR_MARKER,
  readRunDirOwner,
  removeRunDir,
  runDirsParent,
} from "../../src/run/run-dirs.js";
import { UNCHECKED_PACKS_DIR, WATCH_STATE_FILE } from "../../src/workspace/watch-state-file.js";

const scratch: string[] = [];
function tmp(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-dirs-test-"));
  scratch.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of scratch.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** The pid of a process that has exited. */
function deadPid(): number {
  let pid = 999_999;
  while (fs.existsSync(`/proc/${pid}`)) pid--;
  return pid;
}

describe("run folders", () => {
  it("are made in a 0700 parent owned by this user, with an owner marker", () => {
    const base = tmp();
    const dir = createRunDir("abc123", base);
    const parent = fs.lstatSync(runDirsParent(base));
    expect(parent.mode & 0o777).toBe(0o700);
    expect(parent.uid).toBe(process.geteuid?.());
    expect(path.dirname(dir)).toBe(runDirsParent(base));
    expect(fs.readFileSync(path.join(dir, RUN_DIR_MARKER), "utf8")).toBe(
      `${process.pid}\n${os.hostname()}\n${fs.readlinkSync("/proc/self/ns/pid")}\n`,
    );
  });

  it("refuse a parent that others may write, or that is a symlink", () => {
    const base = tmp();
    fs.mkdirSync(runDirsParent(base), { mode: 0o777 });
    fs.chmodSync(runDirsParent(base), 0o777);
    const open = (() => {
      try {
        privateRunDirsParent(base);
      } catch (error) {
        return error;
      }
    })();
    expect(isSandboxRunError(open) && open.code).toBe("usage");
    expect((open as Error).message).toMatch(/its mode is 777, not 700/);
    expect((open as Error).message).toMatch(/Another user may have created it/);

    const linked = tmp();
    fs.symlinkSync(tmp(), runDirsParent(linked));
    expect(() => privateRunDirsParent(linked)).toThrow(/it is a symbolic link/);
  });

  it("a TMPDIR that is missing says so and where to point it, not that another user interfered (review, session 32)", () => {
    const base = path.join(tmp(), "gone");
    const failure = (() => {
      try {
        privateRunDirsParent(base);
      } catch (error) {
        return error;
      }
    })() as SandboxRunError;
    expect(failure.code).toBe("usage");
    expect(failure.shortMessage).toMatch(/^The folder for run sockets .* cannot be made: ENOENT/);
    expect(failure.hint).toBe(
      `TMPDIR (${base}) must be an existing folder you can write, with room: point TMPDIR at one, then run again.`,
    );
  });

  it("are removed name by known name: an unknown name keeps the folder, a symlink is removed, not followed", () => {
    const base = tmp();
    const dir = createRunDir("def456", base);
    const outside = tmp();
    fs.writeFileSync(path.join(outside, "keep.txt"), "outside\n");
    fs.writeFileSync(path.join(dir, "gateway.sock"), "");
    fs.symlinkSync(outside, path.join(dir, "proxy.sock"));
    fs.mkdirSync(path.join(dir, "workspace/kept-0"), { recursive: true });
    fs.symlinkSync(outside, path.join(dir, "workspace/kept-0/link"));
    fs.mkdirSync(path.join(dir, "gateway.sock.d"));
    expect(removeRunDir(dir)).toBe(false);
    expect(fs.readdirSync(dir).sort()).toEqual(["gateway.sock.d"]);
    expect(fs.readFileSync(path.join(outside, "keep.txt"), "utf8")).toBe("outside\n");
    fs.rmdirSync(path.join(dir, "gateway.sock.d"));
    expect(removeRunDir(dir)).toBe(true);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("copy mode's git-check scratch goes with the folder (every copy-mode run over a repository left its run folder behind)", () => {
    const dir = createRunDir("0a1b2c", tmp());
    fs.mkdirSync(path.join(dir, "git-checks/git-checks-AbCdEf/new-packs-GhIjKl/pack"), { recursive: true });
    fs.symlinkSync(tmp(), path.join(dir, "git-checks/git-checks-AbCdEf/new-packs-GhIjKl/pack/pack-1.pack"));
    expect(removeRunDir(dir)).toBe(true);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("keep a watch's state that was never judged, with the marker, when a sandbox ran (its container could not be removed); otherwise it goes", () => {
    const base = tmp();
    const ran = createRunDir("ran001", base);
    const never = createRunDir("never1", base);
    for (const dir of [ran, never]) {
      fs.mkdirSync(path.join(dir, "workspace/kept-0"), { recursive: true });
      fs.writeFileSync(path.join(dir, "workspace", WATCH_STATE_FILE), "{}");
      fs.writeFileSync(path.join(dir, "gateway.sock"), "");
    }
    expect(removeRunDir(ran, { keepUnjudged: true })).toBe(false);
    expect(fs.readdirSync(ran).sort()).toEqual([RUN_DIR_MARKER, "workspace"].sort());
    // No sandbox ran (the run failed before its container was made): nothing to judge.
    expect(removeRunDir(never, { keepUnjudged: false })).toBe(true);
    // Judged (the state is gone): the folder goes whatever the caller says.
    fs.rmSync(path.join(ran, "workspace", WATCH_STATE_FILE));
    expect(removeRunDir(ran, { keepUnjudged: true })).toBe(true);
  });

  it("a folder removed while it is read (another run ending as this one scans them) has no owner, and no scan throws (CI, session 33: ENOENT failed a run)", () => {
    const tmpDir = tmp();
    const dir = createRunDir("vanishing", tmpDir);
    expect(readRunDirOwner(dir)).toMatchObject({ pid: process.pid });
    // Gone between the marker's lstat and its read.
    const read = fs.readFileSync;
    const spy = vi.spyOn(fs, "readFileSync").mockImplementation(((
      file: fs.PathOrFileDescriptor,
      ...rest: unknown[]
    ) => {
      if (String(file).endsWith(RUN_DIR_MARKER)) throw Object.assign(new Error("ENOENT: gone"), { code: "ENOENT" });
      return (read as (...a: unknown[]) => unknown)(file, ...rest);
    }) as typeof fs.readFileSync);
    try {
      expect(readRunDirOwner(dir)).toBeUndefined();
      expect(unjudgedRunOver(["/some/tree"], tmpDir)).toBeUndefined();
    } finally {
      spy.mockRestore();
    }
  });

  it("are reaped only when their owner process on this host is gone, and only inside the private parent", () => {
    const base = tmp();
    const live = createRunDir("live01", base);
    const dead = createRunDir("dead01", base);
    fs.writeFileSync(path.join(dead, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n`);
    const otherHost = createRunDir("else01", base);
    fs.writeFileSync(path.join(otherHost, RUN_DIR_MARKER), `${deadPid()}\nsome-other-host\n`);
    // An old-style folder beside the parent is never looked at.
    const planted = fs.mkdtempSync(path.join(base, "sandbox-run-"));
    fs.writeFileSync(path.join(planted, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n`);

    expect(reapRunDirs(base)).toEqual([dead]);
    expect(fs.existsSync(live)).toBe(true);
    expect(fs.existsSync(otherHost)).toBe(true);
    expect(fs.existsSync(planted)).toBe(true);
  });

  // Review, session 34: two controllers in containers with the same host name and a shared TMPDIR
  // each took the other's live run (a pid of another PID namespace) for dead, and removed its folder
  // and its hold on the workspace.
  it("a folder or hold of another PID namespace is never taken for gone; one of this namespace, or of none recorded, is", () => {
    const base = tmp();
    const here = fs.readlinkSync("/proc/self/ns/pid");
    expect(fs.readFileSync(path.join(createRunDir("mine01", base), RUN_DIR_MARKER), "utf8")).toBe(
      `${process.pid}\n${os.hostname()}\n${here}\n`,
    );
    const elsewhere = createRunDir("else02", base);
    fs.writeFileSync(path.join(elsewhere, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\npid:[1]\n`);
    const deadHere = createRunDir("dead02", base);
    fs.writeFileSync(path.join(deadHere, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n${here}\n`);
    const older = createRunDir("dead03", base);
    fs.writeFileSync(path.join(older, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n`);
    const parent = privateRunDirsParent(base);
    const hold = (name: string, pidns?: string) => {
      const file = path.join(parent, `hold-${name}`);
      fs.writeFileSync(
        file,
        JSON.stringify({ runId: name, pid: deadPid(), host: os.hostname(), ...(pidns ? { pidns } : {}) }),
      );
      return file;
    };
    const holdElsewhere = hold("else04", "pid:[1]");
    const holdHere = hold("dead04", here);
    expect(readRunDirOwner(elsewhere)).toEqual({ pid: expect.any(Number), host: os.hostname(), pidns: "pid:[1]" });
    expect(reapRunDirs(base).sort()).toEqual([deadHere, older, holdHere].sort());
    expect(fs.existsSync(elsewhere)).toBe(true);
    expect(fs.existsSync(holdElsewhere)).toBe(true);
  });

  it("a dead controller's record staging folder (run-<id>-record) is reaped with what it staged; a kept record is not", () => {
    const base = tmp();
    const staging = createRunDir("dead02-record", base);
    fs.writeFileSync(path.join(staging, RUN_DIR_MARKER), `${deadPid()}\n${os.hostname()}\n`);
    const outside = tmp();
    fs.writeFileSync(path.join(outside, "keep.txt"), "outside\n");
    fs.mkdirSync(path.join(staging, RECORD_STAGING_DIR));
    fs.writeFileSync(path.join(staging, RECORD_STAGING_DIR, "events.jsonl"), "{}\n");
    fs.mkdirSync(path.join(staging, RECORD_SCRATCH_DIR, "baseline-x", "a"), { recursive: true });
    fs.symlinkSync(outside, path.join(staging, RECORD_SCRATCH_DIR, "baseline-x", "a", "link"));
    const kept = path.join(runDirsParent(base), "record-dead02");
    fs.mkdirSync(kept);
    expect(reapRunDirs(base)).toEqual([staging]);
    expect(fs.existsSync(staging)).toBe(false);
    expect(fs.existsSync(kept)).toBe(true);
    expect(fs.readFileSync(path.join(outside, "keep.txt"), "utf8")).toBe("outside\n");
  });

  it("a folder of packs set aside unchecked outlives its run and gc's reaping, and is listed with what it holds (session 35: gc did not list it)", () => {
    const base = tmp();
    const ended = createRunDir("ended1", base);
    const packs = path.join(ended, UNCHECKED_PACKS_DIR);
    fs.mkdirSync(packs);
    fs.writeFileSync(path.join(packs, "pack-1.pack"), Buffer.alloc(3000));
    fs.writeFileSync(path.join(packs, "pack-1.idx"), Buffer.alloc(100));
    fs.symlinkSync("/etc/passwd", path.join(packs, "link")); // not counted: only plain files, by lstat
    // The run's end removes what it knows, marker included; the packs keep the folder.
    expect(removeRunDir(ended)).toBe(false);
    expect(fs.existsSync(path.join(ended, RUN_DIR_MARKER))).toBe(false);
    // A live run's folder is not listed, even with the same folder in it.
    const live = createRunDir("live1", base);
    fs.mkdirSync(path.join(live, UNCHECKED_PACKS_DIR));
    expect(reapRunDirs(base)).toEqual([]);
    expect(keptPackFolders(base)).toEqual([{ dir: packs, files: 2, bytes: 3100 }]);
    expect(fs.existsSync(path.join(packs, "pack-1.pack"))).toBe(true);
  });
});
