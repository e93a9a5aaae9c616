import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { mountPointsInside } from "../../src/util/mount-table.js";
import {
  decodeLentRoots,
  encodeLentRoots,
  handBack,
  handBackOrphanedTree,
  handedBackWhole,
  OwnershipLease,
} from "../../src/workspace/ownership-lease.js";
import { owner, tempTrees } from "../support/temp-trees.js";

const SANDBOX = { uid: 65532, gid: 65532 };
const CALLER = { uid: 0, gid: 0 };
const { tree } = tempTrees("sandbox-run-lease-");

describe.runIf(process.getuid?.() === 0)("OwnershipLease (as root)", () => {
  it("lends everything, hands lent inodes back to their original owners and created ones to the caller", async () => {
    const ws = tree({ "mine.txt": "m", "theirs.txt": "t", "sub/x": "x" });
    fs.chownSync(path.join(ws, "theirs.txt"), 1234, 4321);
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    for (const p of ["", "mine.txt", "theirs.txt", "sub", "sub/x"])
      expect(owner(path.join(ws, p)), p).toBe("65532:65532");
    expect(lease.originalOwner(fs.lstatSync(path.join(ws, "theirs.txt")))).toEqual({ uid: 1234, gid: 4321 });
    // The sandbox renames a lent file and creates one.
    fs.renameSync(path.join(ws, "theirs.txt"), path.join(ws, "sub/moved.txt"));
    fs.writeFileSync(path.join(ws, "new.txt"), "n");
    fs.chownSync(path.join(ws, "new.txt"), SANDBOX.uid, SANDBOX.gid);
    const report = await lease.restore(CALLER);
    expect(owner(path.join(ws, "sub/moved.txt"))).toBe("1234:4321"); // by identity, not by path
    expect(owner(path.join(ws, "new.txt"))).toBe("0:0");
    expect(owner(path.join(ws, "mine.txt"))).toBe("0:0");
    expect(report).toMatchObject({ created: 1, failed: [] });
  });

  it("a read-only tree is lent only where the sandbox could not read it, and handed back without a walk when nothing was (review, session 27)", async () => {
    const ws = tree({ "open.txt": "o", "closed.txt": "c", "shut/inner.txt": "i", "sub/x.txt": "x" });
    fs.chmodSync(ws, 0o755); // mkdtemp's 0700 would be lent
    fs.chmodSync(path.join(ws, "closed.txt"), 0o600);
    fs.chmodSync(path.join(ws, "shut"), 0o700);
    fs.chownSync(path.join(ws, "sub/x.txt"), 1234, 4321);
    const ctimes = () => ["open.txt", "sub", "sub/x.txt"].map((p) => fs.lstatSync(path.join(ws, p)).ctimeMs);
    const before = ctimes();
    const lease = await OwnershipLease.lend([ws], SANDBOX, { readOnly: [ws] });
    const owners = () =>
      ["", "open.txt", "closed.txt", "shut", "shut/inner.txt", "sub/x.txt"].map((p) => owner(path.join(ws, p)));
    expect(owners()).toEqual(["0:0", "0:0", "65532:65532", "65532:65532", "0:0", "1234:4321"]);
    expect(ctimes()).toEqual(before);
    await lease.restore(CALLER);
    expect(owners()).toEqual(["0:0", "0:0", "0:0", "0:0", "0:0", "1234:4321"]);

    const readable = tree({ "a.txt": "a", "b/c.txt": "c" });
    fs.chmodSync(readable, 0o755);
    const untouched = ["a.txt", "b", "b/c.txt"].map((p) => fs.lstatSync(path.join(readable, p)).ctimeMs);
    const walks = vi.spyOn(fs, "lchownSync");
    const quiet = await OwnershipLease.lend([readable], SANDBOX, { readOnly: [readable] });
    await quiet.restore(CALLER);
    expect(walks).not.toHaveBeenCalled();
    walks.mockRestore();
    expect(["a.txt", "b", "b/c.txt"].map((p) => fs.lstatSync(path.join(readable, p)).ctimeMs)).toEqual(untouched);
  });

  it("a lent file deleted and its inode number reused by a file the sandbox made: the new file goes to the caller, not the lent file's owner", async () => {
    // Many lent files, so that other processes allocating inodes at the same time (the suite runs
    // in parallel) cannot take every freed number before the sandbox's new files do.
    const lentNames = Array.from({ length: 64 }, (_, i) => `theirs-${i}.txt`);
    const ws = tree({ ...Object.fromEntries(lentNames.map((n) => [n, "t"])), "sub/x": "x" });
    for (const n of lentNames) fs.chownSync(path.join(ws, n), 1234, 4321);
    fs.chownSync(path.join(ws, "sub"), 1234, 4321);
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    const lentInodes = new Set<number>();
    for (const n of lentNames) {
      const lent = fs.lstatSync(path.join(ws, n));
      expect(lent.birthtimeMs, "this test needs a file system that keeps birth times").toBeGreaterThan(0);
      lentInodes.add(lent.ino);
    }
    // The sandbox deletes the lent files and makes new ones until one gets a lent inode number.
    for (const n of lentNames) fs.unlinkSync(path.join(ws, n));
    let reused: string | undefined;
    for (let i = 0; i < 5000 && !reused; i++) {
      const p = path.join(ws, `new-${i}`);
      fs.writeFileSync(p, "planted");
      fs.chownSync(p, SANDBOX.uid, SANDBOX.gid);
      if (lentInodes.has(fs.lstatSync(p).ino)) reused = p;
    }
    expect(reused, "no new file reused a lent inode number").toBeDefined();
    expect(lease.originalOwner(fs.lstatSync(reused!))).toEqual({ uid: SANDBOX.uid, gid: SANDBOX.gid });
    await lease.restore(CALLER);
    expect(owner(reused!)).toBe("0:0");
    expect(owner(path.join(ws, "sub"))).toBe("1234:4321"); // the lent folder still goes back by identity
  });

  it("where stat reports ctime as the birth time (no statx: libuv's fallback), lent files still go back to their owners", async () => {
    const ws = tree({ "theirs.txt": "t", "sub/x": "x" });
    fs.chownSync(path.join(ws, "theirs.txt"), 1234, 4321);
    fs.chownSync(path.join(ws, "sub"), 1234, 4321);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the lend's chown then moves ctime
    const asWithoutStatx = (stat: unknown) =>
      stat instanceof fs.Stats
        ? Object.assign(Object.create(Object.getPrototypeOf(stat)), stat, { birthtimeMs: stat.ctimeMs })
        : stat;
    const lstat = fs.lstatSync;
    const fstat = fs.fstatSync;
    const spies = [
      vi
        .spyOn(fs, "lstatSync")
        .mockImplementation(((...args: Parameters<typeof lstat>) => asWithoutStatx(lstat(...args))) as typeof lstat),
      vi
        .spyOn(fs, "fstatSync")
        .mockImplementation(((...args: Parameters<typeof fstat>) => asWithoutStatx(fstat(...args))) as typeof fstat),
    ];
    try {
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      // The sandbox writes both (ctime moves again).
      fs.appendFileSync(path.join(ws, "theirs.txt"), "more");
      fs.chmodSync(path.join(ws, "sub"), 0o700);
      await lease.restore(CALLER);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    expect(owner(path.join(ws, "theirs.txt"))).toBe("1234:4321");
    expect(owner(path.join(ws, "sub"))).toBe("1234:4321");
  });

  it("never lends what is mounted inside the tree: a bind mount of a root-only folder stays root's (the engine's recursive bind shows it to the sandbox)", async () => {
    const secret = tree({ "key.txt": "root only" });
    fs.chmodSync(path.join(secret, "key.txt"), 0o600);
    const ws = tree({ "lent.txt": "l", "cache/.keep": "" });
    execFileSync("mount", ["--bind", secret, path.join(ws, "cache")]);
    try {
      expect(mountPointsInside(ws)).toEqual(["cache"]);
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      expect(owner(path.join(ws, "lent.txt"))).toBe(`${SANDBOX.uid}:${SANDBOX.gid}`);
      expect(owner(path.join(ws, "cache/key.txt"))).toBe("0:0");
      expect(owner(path.join(ws, "cache"))).toBe(owner(secret));
      await lease.restore(CALLER);
    } finally {
      execFileSync("umount", [path.join(ws, "cache")]);
    }
    expect(owner(path.join(secret, "key.txt"))).toBe("0:0");
  });

  it("hands back nothing of a mounted volume: files the sandbox's uid or gid owned before the run stay theirs", async () => {
    const volume = tree({ "data/db.sqlite": "d", "shared.txt": "s", "plain.txt": "p" });
    execFileSync("chown", ["-R", `${SANDBOX.uid}:${SANDBOX.gid}`, volume]);
    fs.chownSync(path.join(volume, "shared.txt"), 1000, SANDBOX.gid);
    fs.chownSync(path.join(volume, "plain.txt"), 1000, 1000);
    const ws = tree({ "lent.txt": "l", "cache/.keep": "" });
    execFileSync("mount", ["--bind", volume, path.join(ws, "cache")]);
    try {
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      await lease.restore(CALLER);
      await handBackOrphanedTree(ws, SANDBOX, CALLER);
    } finally {
      execFileSync("umount", [path.join(ws, "cache")]);
    }
    const owners = ["", "data", "data/db.sqlite", "shared.txt", "plain.txt"].map((p) => owner(path.join(volume, p)));
    const sandbox = `${SANDBOX.uid}:${SANDBOX.gid}`;
    expect(owners).toEqual([sandbox, sandbox, sandbox, `1000:${SANDBOX.gid}`, "1000:1000"]);
    expect(owner(path.join(ws, "lent.txt"))).toBe(owner(ws));
  });

  it("hands back nothing of a mounted volume whose parent folder the sandbox renamed during the run", async () => {
    const volume = tree({ "db.sqlite": "d" });
    execFileSync("chown", ["-R", `${SANDBOX.uid}:${SANDBOX.gid}`, volume]);
    const ws = tree({ "lent.txt": "l", "sub/cache/.keep": "" });
    execFileSync("mount", ["--bind", volume, path.join(ws, "sub/cache")]);
    try {
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      fs.renameSync(path.join(ws, "sub"), path.join(ws, "moved"));
      // A plain folder at the mount's old path, holding a lent file (review, session 27: skipped by that path, it stayed the sandbox's).
      fs.mkdirSync(path.join(ws, "sub/cache"), { recursive: true });
      fs.renameSync(path.join(ws, "lent.txt"), path.join(ws, "sub/cache/lent.txt"));
      await lease.restore(CALLER);
    } finally {
      execFileSync("umount", [path.join(ws, "moved/cache")]);
    }
    const sandbox = `${SANDBOX.uid}:${SANDBOX.gid}`;
    expect([owner(volume), owner(path.join(volume, "db.sqlite"))]).toEqual([sandbox, sandbox]);
    expect(owner(path.join(ws, "sub/cache/lent.txt"))).toBe(owner(ws));
  });

  it("a mount whose source is in the same tree (its inodes seen twice): every lent file goes back to its owner", async () => {
    const ws = tree({ "b/.keep": "" });
    fs.mkdirSync(path.join(ws, "a"));
    for (let i = 0; i < 50; i++) fs.writeFileSync(path.join(ws, `a/f${i}`), "x");
    execFileSync("chown", ["-R", "1234:1234", path.join(ws, "a")]);
    execFileSync("mount", ["--bind", path.join(ws, "a"), path.join(ws, "b")]);
    try {
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      await lease.restore(CALLER);
    } finally {
      execFileSync("umount", [path.join(ws, "b")]);
    }
    const owners = new Set(
      ["a", ...fs.readdirSync(path.join(ws, "a")).map((n) => `a/${n}`)].map((p) => owner(path.join(ws, p))),
    );
    expect([...owners]).toEqual(["1234:1234"]);
  });

  it("the hard-link rename: a file linked in from outside is never lent, and after it is renamed over a lent file nothing outside changes owner", async () => {
    const outside = tree({ "victim.txt": "v" });
    fs.chownSync(path.join(outside, "victim.txt"), 4242, 4242);
    const ws = tree({ "lent.txt": "l" });
    fs.chownSync(path.join(ws, "lent.txt"), 1234, 1234);
    fs.linkSync(path.join(outside, "victim.txt"), path.join(ws, "linked.txt"));
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    expect(owner(path.join(ws, "linked.txt"))).toBe("4242:4242");
    // What the sandbox did in issue 9: rename the outside inode over a lent file.
    fs.renameSync(path.join(ws, "linked.txt"), path.join(ws, "lent.txt"));
    await lease.restore(CALLER);
    expect(owner(path.join(outside, "victim.txt"))).toBe("4242:4242");
  });

  it("clears setuid/setgid at any depth, never follows a symlink, and reaches paths longer than PATH_MAX", async () => {
    const outside = tree({ "target.txt": "t" });
    fs.chownSync(path.join(outside, "target.txt"), 4242, 4242);
    const ws = tree();
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    let fd = fs.openSync(ws, "r");
    for (let i = 0; i < 300; i++) {
      fs.mkdirSync(`/proc/self/fd/${fd}/${"d".repeat(100)}`);
      const next = fs.openSync(`/proc/self/fd/${fd}/${"d".repeat(100)}`, "r");
      fs.closeSync(fd);
      fd = next;
    }
    const deep = `/proc/self/fd/${fd}/suid`;
    fs.copyFileSync("/bin/true", deep);
    fs.chownSync(deep, SANDBOX.uid, SANDBOX.gid);
    fs.chmodSync(deep, 0o6755);
    fs.symlinkSync(path.join(outside, "target.txt"), `/proc/self/fd/${fd}/link`);
    fs.lchownSync(`/proc/self/fd/${fd}/link`, SANDBOX.uid, SANDBOX.gid);
    const report = await lease.restore(CALLER);
    const st = fs.statSync(deep);
    expect(`${st.uid}:${(st.mode & 0o7777).toString(8)}`).toBe("0:755");
    expect(owner(`/proc/self/fd/${fd}/link`)).toBe("0:0");
    fs.closeSync(fd);
    expect(owner(path.join(outside, "target.txt"))).toBe("4242:4242");
    expect(report.setuidCleared).toBe(1);
  });

  it("a setuid file swapped for a symlink after the walk judged it: the symlink's target keeps its mode and owner", () => {
    // The hand-back goes folder by folder, so the owner of a folder already handed back (another
    // local user, when the controller is root) can swap names in it while the walk goes on below.
    const outside = tree({ "victim.txt": "root only" });
    const victim = path.join(outside, "victim.txt");
    fs.chmodSync(victim, 0o600);
    const ws = tree({ suid: "x" });
    const file = path.join(ws, "suid");
    fs.chownSync(file, SANDBOX.uid, SANDBOX.gid);
    fs.chmodSync(file, 0o4777);
    const judged = fs.lstatSync(file);
    fs.rmSync(file);
    fs.symlinkSync(victim, file);
    const report = {
      restored: 0,
      created: 0,
      setuidCleared: 0,
      failed: [] as Array<{ path: string; why: string }>,
      unreached: [],
      leftCount: 0,
    };
    handBack({ at: file, kind: "file", path: "suid" }, judged, { uid: 1500, gid: 1500 }, report);
    const st = fs.statSync(victim);
    expect(`${st.uid}:${(st.mode & 0o7777).toString(8)}`).toBe("0:600");
    expect(report).toMatchObject({ setuidCleared: 0, failed: [{ path: "suid", why: "ELOOP" }] });
  });

  it("never lends a unix socket or a FIFO: a root-only service's socket in a lent tree stays root's", async () => {
    const ws = tree({ "file.txt": "f" });
    const socket = path.join(ws, "ctl.sock");
    const server = net.createServer((c) => c.end());
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      fs.chmodSync(socket, 0o600);
      expect(spawnSync("mkfifo", ["-m", "0600", path.join(ws, "pipe")]).status).toBe(0);
      const lease = await OwnershipLease.lend([ws], SANDBOX);
      expect([owner(socket), owner(path.join(ws, "pipe")), owner(path.join(ws, "file.txt"))]).toEqual([
        "0:0",
        "0:0",
        "65532:65532",
      ]);
      const report = await lease.restore(CALLER);
      expect([owner(socket), owner(path.join(ws, "pipe")), owner(path.join(ws, "file.txt"))]).toEqual([
        "0:0",
        "0:0",
        "0:0",
      ]);
      expect(report.failed).toEqual([]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("hands back every entry whatever the tree's shape: a folder past the walk's name budget, then a chain of 300 folders below it (review, session 38: past 256 streamed folders the rest stayed 65532's, unreported)", async () => {
    const ws = tree({ "README.md": "hi\n", t0: "t", t1: "t" });
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    // The walk holds 65,536 names at once: `big` takes nearly all of them (hard links, quick to
    // make; ext4 allows 65,000 per inode), so every folder below it is read as a stream.
    fs.mkdirSync(path.join(ws, "big"));
    for (let i = 0; i < 65_530; i++) fs.linkSync(path.join(ws, `t${i % 2}`), path.join(ws, "big", `f${i}`));
    let chain = path.join(ws, "big");
    const made = [chain];
    for (let i = 0; i < 300; i++) {
      chain = path.join(chain, "d");
      fs.mkdirSync(chain);
      fs.writeFileSync(path.join(chain, "x"), "x");
      made.push(chain, path.join(chain, "x"));
    }
    for (const p of made) fs.lchownSync(p, SANDBOX.uid, SANDBOX.gid);
    const report = await lease.restore(CALLER);
    const left = made.filter((p) => owner(p) !== "0:0").map((p) => path.relative(ws, p).split("/").length);
    expect(left, "depths of entries still the sandbox's").toEqual([]);
    expect(report).toMatchObject({ created: made.length, failed: [], unreached: [], leftCount: 0 });
  });

  it("a folder the hand-back cannot open (EIO, EMFILE) is reported, with what it could not reach, and the rest is handed back", async () => {
    const ws = tree({ "a.txt": "a" });
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    for (const p of ["sub/stuck/inside", "sub/fine"]) fs.mkdirSync(path.join(ws, p), { recursive: true });
    fs.writeFileSync(path.join(ws, "sub/stuck/inside/x"), "x");
    fs.writeFileSync(path.join(ws, "sub/fine/y"), "y");
    for (const p of ["sub", "sub/stuck", "sub/stuck/inside", "sub/stuck/inside/x", "sub/fine", "sub/fine/y"])
      fs.lchownSync(path.join(ws, p), SANDBOX.uid, SANDBOX.gid);
    const open = fs.openSync;
    const failing = vi.spyOn(fs, "openSync").mockImplementation(((...args: Parameters<typeof open>) => {
      if (String(args[0]).endsWith("/stuck")) throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
      return open(...args);
    }) as typeof open);
    let report: Awaited<ReturnType<typeof lease.restore>>;
    try {
      report = await lease.restore(CALLER);
    } finally {
      failing.mockRestore();
    }
    expect(report.unreached).toEqual([{ path: path.join(ws, "sub/stuck"), why: "cannot open the directory: EIO" }]);
    expect(report.leftCount).toBe(1);
    expect(handedBackWhole(report)).toBe(false);
    // The folder itself was reached (its parent listed it); what is inside is still the sandbox's.
    expect(["sub", "sub/stuck", "sub/fine/y", "a.txt"].map((p) => owner(path.join(ws, p)))).toEqual(
      Array(4).fill("0:0"),
    );
    expect(owner(path.join(ws, "sub/stuck/inside/x"))).toBe("65532:65532");
  });

  it("handBackOrphanedTree (a crashed controller's reaper): everything the sandbox uid owns goes to the caller", async () => {
    const ws = tree({ "a/b.txt": "b", "keep.txt": "k" });
    fs.chownSync(path.join(ws, "keep.txt"), 1234, 1234);
    for (const p of ["", "a", "a/b.txt"]) fs.lchownSync(path.join(ws, p), SANDBOX.uid, SANDBOX.gid);
    fs.chmodSync(path.join(ws, "a/b.txt"), 0o4755);
    await handBackOrphanedTree(ws, SANDBOX, CALLER);
    expect([
      owner(ws),
      owner(path.join(ws, "a")),
      owner(path.join(ws, "a/b.txt")),
      owner(path.join(ws, "keep.txt")),
    ]).toEqual(["0:0", "0:0", "0:0", "1234:1234"]);
    expect(fs.statSync(path.join(ws, "a/b.txt")).mode & 0o7777).toBe(0o755);
  });
});

describe("lent-roots label", () => {
  it("round-trips absolute paths and drops anything else", () => {
    expect(decodeLentRoots(encodeLentRoots(["/w s", "/r"]))).toEqual(["/w s", "/r"]);
    expect(decodeLentRoots('["relative", "/ok", 3]')).toEqual(["/ok"]);
    expect(decodeLentRoots("not json")).toEqual([]);
    expect(decodeLentRoots(undefined)).toEqual([]);
  });
});
