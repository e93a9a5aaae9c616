// Disk accounting on real trees: allocated bytes (sparse files count what they use, hard links
// once) and entries, and a watch that trips while a tree grows past a limit and stays quiet below it.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type DiskTrip, DiskWatch, measureTree, measureTreeBytes } from "../../src/workspace/disk-watch.js";

const dirs: string[] = [];
function tree(): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-disk-")));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const MB = 1024 * 1024;

describe("measureTreeBytes", () => {
  it("counts allocated bytes: a sparse file by what it uses, a hard-linked file once, never through a symlink", async () => {
    const root = tree();
    fs.writeFileSync(path.join(root, "full.bin"), Buffer.alloc(2 * MB, 1));
    const sparse = fs.openSync(path.join(root, "sparse.bin"), "w");
    fs.ftruncateSync(sparse, 1024 * MB);
    fs.closeSync(sparse);
    fs.linkSync(path.join(root, "full.bin"), path.join(root, "link.bin"));
    const outside = tree();
    fs.writeFileSync(path.join(outside, "big.bin"), Buffer.alloc(4 * MB, 1));
    fs.symlinkSync(outside, path.join(root, "to-outside"));
    const bytes = await measureTreeBytes(root);
    expect(bytes).toBeGreaterThanOrEqual(2 * MB);
    expect(bytes).toBeLessThan(3 * MB);
  });
});

describe("DiskWatch", () => {
  it("trips once the trees grew past the limit while the run is live, with the bytes grown", async () => {
    const root = tree();
    let tripped: (trip: DiskTrip) => void = () => {};
    const trip = new Promise<DiskTrip>((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({ roots: [root], limitBytes: 4 * MB, intervalMs: 20, onExceeded: tripped });
    try {
      fs.writeFileSync(path.join(root, "small.bin"), Buffer.alloc(1 * MB, 1));
      expect(await watch.check()).toBeUndefined();
      fs.writeFileSync(path.join(root, "big.bin"), Buffer.alloc(6 * MB, 1));
      fs.fsyncSync(fs.openSync(path.join(root, "big.bin"), "r"));
      const seen = await trip;
      expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB });
      expect(seen.limit === "disk" && seen.grownBytes).toBeGreaterThan(6 * MB);
      expect(await watch.check()).toMatchObject({ limitBytes: 4 * MB });
    } finally {
      watch.stop();
    }
  });

  it("check() after the run uses the after-walk's figures when given", async () => {
    const root = tree();
    const watch = await DiskWatch.start({
      roots: [root],
      limitBytes: MB,
      limitEntries: 10,
      baselineBytes: 0,
      baselineEntries: 1,
      onExceeded: () => {},
    });
    watch.stop();
    expect(await watch.check({ bytes: 3 * MB, entries: 1 })).toEqual({
      limit: "disk",
      grownBytes: 3 * MB,
      limitBytes: MB,
    });
    expect(await watch.check({ bytes: MB, entries: 11 })).toBeUndefined();
    expect(await watch.check({ bytes: MB, entries: 12 })).toEqual({
      limit: "entries",
      grownEntries: 11,
      limitEntries: 10,
    });
  });

  it("trips on entries while the run is live: inode use grew past the limit, then an exact count", async () => {
    const root = tree();
    fs.mkdirSync(path.join(root, "old"));
    let tripped: (trip: DiskTrip) => void = () => {};
    const trip = new Promise<DiskTrip>((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({
      roots: [root],
      limitBytes: 1024 * MB,
      limitEntries: 500,
      intervalMs: 20,
      onExceeded: tripped,
    });
    try {
      // Empty files and folders: almost no blocks, so only the entry count can see them.
      fs.mkdirSync(path.join(root, "many"));
      for (let i = 0; i < 400; i++) fs.writeFileSync(path.join(root, "many", `f${i}`), "");
      expect(await watch.check()).toBeUndefined();
      for (let i = 0; i < 200; i++) fs.mkdirSync(path.join(root, "many", `d${i}`));
      const seen = await trip;
      // The count stops once past the limit: the trip is certain there.
      expect(seen).toEqual({ limit: "entries", grownEntries: 501, limitEntries: 500, atLeast: true });
    } finally {
      watch.stop();
    }
  });
});

describe("DiskWatch: hard links", () => {
  it("names without inodes (hard links) trip the entry limit while the run is live: the trees are counted now and then whatever statfs says", async () => {
    const root = tree();
    fs.writeFileSync(path.join(root, "target"), "x");
    let tripped: (trip: DiskTrip) => void = () => {};
    const trip = new Promise<DiskTrip>((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({
      roots: [root],
      limitBytes: 1024 * MB,
      limitEntries: 500,
      intervalMs: 20,
      onExceeded: tripped,
    });
    try {
      // Let the first count pass with nothing new; then links, which use no inode and hardly a block.
      await new Promise((resolve) => setTimeout(resolve, 100));
      fs.mkdirSync(path.join(root, "links"));
      for (let i = 0; i < 3_000; i++) fs.linkSync(path.join(root, "target"), path.join(root, "links", `l${i}`));
      const deadline = new Promise<"none">((resolve) => setTimeout(() => resolve("none"), 8_000).unref());
      const seen = await Promise.race([trip, deadline]);
      expect(seen).toEqual({ limit: "entries", grownEntries: 501, limitEntries: 500, atLeast: true });
    } finally {
      watch.stop();
    }
  }, 20_000);
});

describe("DiskWatch: files the sandbox removed but keeps open (review, round 3, session 39)", () => {
  const holders: ChildProcess[] = [];
  afterEach(() => {
    for (const child of holders.splice(0)) child.kill("SIGKILL");
  });

  /** A process that writes 8 MiB into a file of `root`, removes its name and keeps it open. */
  function holdNameless(root: string): { child: ChildProcess; ready: Promise<void> } {
    const script = `const fs = require("node:fs"); const fd = fs.openSync("held.bin", "w"); fs.unlinkSync("held.bin");
      for (let i = 0; i < 8; i++) fs.writeSync(fd, Buffer.alloc(${MB}, 1)); fs.fsyncSync(fd);
      console.log("ready"); setInterval(() => fd, 60_000);`;
    const child = spawn(process.execPath, ["-e", script], { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
    holders.push(child);
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
      child.once("exit", (code) => reject(new Error(`the holder exited ${code}`)));
    });
    return { child, ready };
  }

  /** The watch's trip, or "none" after `waitMs`; the holder starts once the watch has its baseline. */
  async function watched(root: string, askHolders: boolean, waitMs: number) {
    let tripped: (trip: DiskTrip | "none") => void = () => {};
    const seen = new Promise<DiskTrip | "none">((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({ roots: [root], limitBytes: 4 * MB, intervalMs: 20, onExceeded: tripped });
    const { child, ready } = holdNameless(root);
    if (askHolders) watch.watchHolders(() => Promise.resolve([child.pid!]));
    await ready;
    const timer = setTimeout(() => tripped("none"), waitMs);
    try {
      return await seen;
    } finally {
      clearTimeout(timer);
      watch.stop();
    }
  }

  it("what the container's processes hold with no name counts: the disk limit trips, saying how much was held", async () => {
    const root = tree();
    const seen = await watched(root, true, 15_000);
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, held: { files: 1 } });
    expect(seen !== "none" && seen.limit === "disk" && seen.held?.bytes).toBeGreaterThan(4 * MB);
  });

  /** A process whose leader exited while a thread runs on: its mappings cannot be read through it. */
  async function leaderExited(): Promise<ChildProcess> {
    const script = [
      "import ctypes, threading, time",
      "threading.Thread(target=lambda: time.sleep(60)).start()",
      "print('ready', flush=True)",
      "ctypes.CDLL(None).syscall(60, 0)",
    ].join("\n");
    const child = spawn("python3", ["-c", script], { stdio: ["ignore", "pipe", "inherit"] });
    holders.push(child);
    await new Promise<void>((resolve) =>
      child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve()),
    );
    while (!/^State:\s+Z/m.test(fs.readFileSync(`/proc/${child.pid}/status`, "utf8")))
      await new Promise((resolve) => setTimeout(resolve, 10));
    return child;
  }

  /** The watch's trip over a nameless holder and `ending`; `afterFirstScan` runs once the first scan has its pids. */
  async function watchedWith(
    ending: ChildProcess,
    afterFirstScan: (root: string, holder: ChildProcess) => void,
  ): Promise<DiskTrip | "none"> {
    const root = tree();
    let tripped: (trip: DiskTrip | "none") => void = () => {};
    const seen = new Promise<DiskTrip | "none">((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({ roots: [root], limitBytes: 4 * MB, intervalMs: 20, onExceeded: tripped });
    const { child, ready } = holdNameless(root);
    let scans = 0;
    watch.watchHolders(async () => {
      if (++scans === 1) setImmediate(() => afterFirstScan(root, child));
      return [ending.pid!, child.pid!];
    });
    // A test may end the holder on the first scan, before its "ready" was read.
    await ready.catch(() => {});
    const timer = setTimeout(() => tripped("none"), 15_000);
    try {
      return await seen;
    } finally {
      clearTimeout(timer);
      watch.stop();
    }
  }

  it("a process that could not be read as it ended is scanned again: gone by the next try, it blinds nothing (CI, session 44)", async () => {
    const ending = await leaderExited();
    const seen = await watchedWith(ending, () => ending.kill("SIGKILL"));
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, held: { files: 1 } });
    expect(seen).not.toHaveProperty("unseen");
  });

  it("one that stays unreadable at every try leaves the watch blind: the filesystem's growth trips it", async () => {
    const ending = await leaderExited();
    const seen = await watchedWith(ending, () => {});
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, blindTo: "held files" });
    expect(seen).not.toHaveProperty("held");
  });

  it("a scan tried again is judged with a walk taken after it: a held file given a name during the pause trips the watch (fix review, session 45)", async () => {
    const ending = await leaderExited();
    const seen = await watchedWith(ending, (root, holder) => {
      // The nameless file goes, and its bytes come back under a name, while the watch waits.
      holder.kill("SIGKILL");
      ending.kill("SIGKILL");
      fs.writeFileSync(path.join(root, "named.bin"), Buffer.alloc(8 * MB, 1));
    });
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB });
    expect(seen).not.toHaveProperty("held");
    expect(seen).not.toHaveProperty("unseen");
    expect(seen !== "none" && seen.limit === "disk" && seen.grownBytes).toBeGreaterThanOrEqual(8 * MB);
  });

  it("without the container's processes the walk sees nothing: the bypass the scan closes", async () => {
    const root = tree();
    expect(await watched(root, false, 3_000)).toBe("none");
  });
});

describe("DiskWatch: a known baseline", () => {
  it("is not counted again at the first polls (review, session 27: the snapshot had just counted it)", async () => {
    const root = tree();
    for (let i = 0; i < 600; i++) fs.writeFileSync(path.join(root, `f${i}`), "");
    let trips = 0;
    // A baseline that says 1 entry: a count would find 600 more and trip at once.
    const watch = await DiskWatch.start({
      roots: [root],
      limitBytes: 1024 * MB,
      limitEntries: 500,
      baselineBytes: 0,
      baselineEntries: 1,
      intervalMs: 20,
      onExceeded: () => trips++,
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(trips).toBe(0);
    } finally {
      watch.stop();
    }
  });
});

describe("measureTree", () => {
  it("counts every entry once, the root included, and never through a symlink", async () => {
    const root = tree();
    fs.mkdirSync(path.join(root, "a/b"), { recursive: true });
    fs.writeFileSync(path.join(root, "a/b/file"), "x");
    fs.linkSync(path.join(root, "a/b/file"), path.join(root, "a/hard"));
    fs.symlinkSync(tree(), path.join(root, "link"));
    expect((await measureTree(root)).entries).toBe(6);
  });
});
