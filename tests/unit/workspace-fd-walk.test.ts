// The fd walk on real trees: its order, that it never follows a symlink (also one swapped in
// while it walks), that it reaches paths far longer than PATH_MAX with a bounded number of fds,
// and that what it cannot read or name is reported, not skipped.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { chmodDirectory, comparePaths, type WalkEntry, WalkError, walkTree } from "../../src/workspace/fd-walk.js";
import { tempTrees } from "../support/temp-trees.js";

/** Under the host's temp dir (the test run's own is 0700 root: another uid could not reach in). */
const hostTmp = () => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir();
const { tree } = tempTrees("sandbox-run-walk-", hostTmp);

const paths = (root: string) =>
  [...walkTree(root)].map((e) => `${e.kind}:${e.path}${e.problem ? ` !${e.problem}` : ""}`);

describe("walkTree", () => {
  it("yields the root, then every entry pre-order with children sorted: the order comparePaths defines", () => {
    const root = tree({ "a/b": "1", "a-c": "2", "a/z/y": "3", B: "4" });
    const walked = [...walkTree(root)].map((e) => e.path);
    expect(walked).toEqual(["", "B", "a", "a/b", "a/z", "a/z/y", "a-c"]);
    expect([...walked].sort(comparePaths)).toEqual(walked);
  });

  it("never follows a symlink, to a file or to a directory, and refuses a symlink as the root", () => {
    const outside = tree({ "secret/key": "k" });
    const root = tree({ "own.txt": "x" });
    fs.symlinkSync(path.join(outside, "secret"), path.join(root, "dir-link"));
    fs.symlinkSync(path.join(outside, "secret/key"), path.join(root, "file-link"));
    expect(paths(root)).toEqual(["directory:", "symlink:dir-link", "symlink:file-link", "file:own.txt"]);
    const linkRoot = path.join(tree(), "root-link");
    fs.symlinkSync(root, linkRoot);
    expect(() => [...walkTree(linkRoot)]).toThrow(WalkError);
  });

  it("a directory swapped for a symlink while the walk is in it: the walk stays in the directory it opened", () => {
    const outside = tree({ "secret-1": "s", "secret-2": "s" });
    const root = tree({ "sub/one": "1", "sub/two": "2" });
    const seen: string[] = [];
    for (const entry of walkTree(root)) {
      seen.push(entry.path);
      if (entry.path === "sub") {
        // What a racing sandbox would do: move the directory away and put a link in its place.
        fs.renameSync(path.join(root, "sub"), path.join(root, "moved"));
        fs.symlinkSync(outside, path.join(root, "sub"));
      }
    }
    expect(seen).toEqual(["", "sub", "sub/one", "sub/two"]);
    expect(seen.join()).not.toContain("secret");
  });

  it("walks a 300-level tree whose paths are far longer than PATH_MAX, and climbs back out of it", () => {
    const root = tree();
    const segment = "d".repeat(200);
    let fd = fs.openSync(root, "r");
    for (let i = 0; i < 300; i++) {
      fs.mkdirSync(`/proc/self/fd/${fd}/${segment}`);
      const next = fs.openSync(`/proc/self/fd/${fd}/${segment}`, "r");
      fs.closeSync(fd);
      fd = next;
    }
    fs.writeFileSync(`/proc/self/fd/${fd}/bottom.txt`, "deep");
    fs.closeSync(fd);
    fs.writeFileSync(path.join(root, "zz-after.txt"), "after");
    const entries = [...walkTree(root)];
    const bottom = entries.find((e) => e.name === "bottom.txt");
    expect(bottom?.depth).toBe(301);
    expect(bottom!.path.length).toBeGreaterThan(60_000);
    expect(bottom?.problem).toBeUndefined();
    // After the deepest entry the walk climbed 300 levels back (reopening through "..").
    expect(entries[entries.length - 1]?.path).toBe("zz-after.txt");
    expect(entries).toHaveLength(1 + 300 + 1 + 1);
  });

  it("reports a tree deeper than maxDepth instead of walking it", () => {
    const root = tree({ "a/b/c/d.txt": "x" });
    expect(paths(root).slice(0, 4)).toEqual(["directory:", "directory:a", "directory:a/b", "directory:a/b/c"]);
    expect([...walkTree(root, { maxDepth: 2 })].map((e) => `${e.path}${e.problem ? ` !${e.problem}` : ""}`)).toEqual([
      "",
      "a",
      "a/b",
      "a/b/c !deeper than 2 levels",
    ]);
  });

  it("reports a name that is not UTF-8 (and still walks it on request)", () => {
    const root = tree();
    const raw = Buffer.concat([Buffer.from(`${root}/bad-`), Buffer.from([0xff, 0xfe])]);
    fs.mkdirSync(raw);
    fs.writeFileSync(Buffer.concat([raw, Buffer.from("/inner")]), "x");
    // Each bad byte escaped (a lone surrogate), so no real name, U+FFFD included, reads the same.
    expect(paths(root)).toEqual(["directory:", "directory:bad-\uDCFF\uDCFE !its name is not valid UTF-8"]);
    const all = [...walkTree(root, { descend: () => true })].map((e) => e.path);
    expect(all).toEqual(["", "bad-\uDCFF\uDCFE", "bad-\uDCFF\uDCFE/inner"]);
  });

  it("reports directories it cannot open or list (chmod 311, 000) instead of skipping them", () => {
    const root = tree({ ".github/workflows/ci.yml": "x", "locked/inner.txt": "y", "ok/a": "z" });
    fs.chmodSync(path.join(root, ".github"), 0o311);
    fs.chmodSync(path.join(root, "locked"), 0o000);
    for (const d of [root, ...fs.readdirSync(root).map((n) => path.join(root, n))]) fs.chownSync(d, 1500, 1500);
    // Root reads everything, so the walk runs as an unprivileged uid here, as a non-root caller would.
    const script = fileURLToPath(new URL("../support/walk-as-user.ts", import.meta.url));
    const userTmp = tree();
    fs.chownSync(userTmp, 1500, 1500);
    const env = { ...process.env, TMPDIR: userTmp, HOME: userTmp };
    const asUser =
      process.getuid?.() === 0
        ? spawnSync(
            "setpriv",
            ["--reuid=1500", "--regid=1500", "--clear-groups", process.execPath, "--import", "tsx", script, root],
            {
              encoding: "utf8",
              env,
              cwd: fileURLToPath(new URL("../..", import.meta.url)),
            },
          )
        : spawnSync(process.execPath, ["--import", "tsx", script, root], { encoding: "utf8" });
    expect(asUser.status, asUser.stderr).toBe(0);
    expect(JSON.parse(asUser.stdout)).toEqual([
      "directory:",
      "directory:.github !cannot open the directory: EACCES",
      "directory:locked !cannot open the directory: EACCES",
      "directory:ok",
      "file:ok/a",
    ]);
  });

  it("removes what it is asked to on the way back up (leave), including unreadable directories with repairAccess", () => {
    const root = tree({ "x/y/z.txt": "1", "x/w.txt": "2" });
    fs.chmodSync(path.join(root, "x/y"), 0o000);
    const removed: string[] = [];
    for (const entry of walkTree(root, {
      repairAccess: true,
      leave: ({ path: p, at }) => {
        fs.rmdirSync(at);
        removed.push(p);
      },
    })) {
      if (entry.kind !== "directory") fs.unlinkSync(entry.at);
    }
    expect(removed).toEqual(["x/y", "x"]);
    expect(fs.readdirSync(root)).toEqual([]);
  });
});

describe("walkTree: folders of more names than the walk holds (hard links cost the sandbox no inode)", () => {
  /** `count` hard links of one file in `dir`, with names of `width` characters. */
  const links = (dir: string, count: number, width = 20) => {
    fs.mkdirSync(dir, { recursive: true });
    const target = path.join(dir, "..", `target-${path.basename(dir)}`);
    fs.writeFileSync(target, "x");
    for (let i = 0; i < count; i++) fs.linkSync(target, path.join(dir, String(i).padStart(width, "0")));
  };

  it("sorted: a folder past maxHeldNames is yielded overfull with a problem and not walked; the rest is walked, and the stats say what was held", () => {
    const root = tree({ "a/one": "1", "z/two": "2" });
    links(path.join(root, "m/big"), 300);
    const stats = { peakHeldNames: 0 };
    const entries = [...walkTree(root, { maxHeldNames: 100, stats })];
    const big = entries.find((e) => e.path === "m/big")!;
    // The root and m hold 5 names when m/big is read: it may add 95, and the 96th stops the read.
    expect(big.overfull).toBe(96);
    expect(big.problem).toMatch(
      /holds more entries than the walk can read \(over 95, more than a walk holds at once\)/,
    );
    expect(entries.filter((e) => e.path.startsWith("m/big/"))).toEqual([]);
    expect(entries.map((e) => e.path).filter((p) => !p.startsWith("m/big"))).toEqual([
      "",
      "a",
      "a/one",
      "m",
      "m/target-big",
      "z",
      "z/two",
    ]);
    expect(stats.peakHeldNames).toBeLessThanOrEqual(100);
    // Without the bound the folder is walked whole, and the stats say how many names that held.
    const whole = { peakHeldNames: 0 };
    expect([...walkTree(root, { stats: whole })].filter((e) => e.path.startsWith("m/big/"))).toHaveLength(300);
    expect(whole.peakHeldNames).toBe(3 + 2 + 300);
  });

  it("any order: every entry of an overfull folder is visited as a stream (nested ones too), none held, and leave sees each folder", () => {
    const root = tree({ "a/one": "1" });
    links(path.join(root, "big"), 250);
    links(path.join(root, "big2/inner"), 250);
    const left: string[] = [];
    const entries = [...walkTree(root, { maxHeldNames: 50, order: "any", leave: ({ path: p }) => void left.push(p) })];
    expect(
      entries
        .filter((e) => e.path.startsWith("big/"))
        .map((e) => e.name)
        .sort(),
    ).toEqual(Array.from({ length: 250 }, (_, i) => String(i).padStart(20, "0")));
    expect(entries.filter((e) => e.path.startsWith("big2/inner/"))).toHaveLength(250);
    expect(entries.find((e) => e.path === "big")).toMatchObject({ overfull: expect.any(Number) });
    expect(entries.every((e) => !e.problem)).toBe(true);
    expect(left.sort()).toEqual(["a", "big", "big2", "big2/inner"]);
  });
});

describe("walkTree in any order: chains of streamed folders deeper than the streams a walk keeps open (review, session 38)", () => {
  /** `a/` holding `z1`, `z2` and a chain of `levels` folders `d`, each holding a file `x`. */
  const chainTree = (levels: number) => {
    const root = tree({ "a/z1": "1", "a/z2": "2" });
    let at = path.join(root, "a");
    for (let i = 0; i < levels; i++) {
      at = path.join(at, "d");
      fs.mkdirSync(at);
      fs.writeFileSync(path.join(at, "x"), "x");
    }
    return root;
  };
  const openFds = () => fs.readdirSync("/proc/self/fd").length;

  it("walks every level (the shallowest stream is paused and resumed), with a bounded number of fds", () => {
    const root = chainTree(30);
    const before = openFds();
    let peak = 0;
    const entries: WalkEntry[] = [];
    // One name held: every folder below the root is read as a stream.
    for (const entry of walkTree(root, { maxHeldNames: 1, maxStreams: 4, order: "any" })) {
      entries.push(entry);
      peak = Math.max(peak, openFds() - before);
    }
    expect(
      entries
        .filter((e) => e.name === "x")
        .map((e) => e.depth)
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 30 }, (_, i) => i + 3));
    expect(entries.filter((e) => e.problem || e.unwalked)).toEqual([]);
    expect(entries.filter((e) => e.path.startsWith("a/z"))).toHaveLength(2);
    // 4 open streams (two fds each) and one fd per folder on the path (the window is 64), whatever the depth.
    expect(peak).toBeLessThanOrEqual(2 * 4 + 32 + 2);
    expect(openFds()).toBe(before);
  });

  it("a paused folder that changed meanwhile is yielded again with a problem, unwalked; a walk that removes what it reads starts it over", () => {
    const root = chainTree(30);
    const seen: WalkEntry[] = [];
    for (const entry of walkTree(root, { maxHeldNames: 1, maxStreams: 4, order: "any" })) {
      seen.push(entry);
      // `a` is paused by now: a name made in it moves its mtime.
      if (entry.depth === 25 && entry.name === "x") fs.writeFileSync(path.join(root, "a/new"), "n");
    }
    expect(seen.filter((e) => e.unwalked).map((e) => [e.path, e.kind, e.problem])).toEqual([
      ["a", "directory", "it changed while the walk was paused in it: the rest of it was not walked"],
    ]);
    expect(seen.filter((e) => e.name === "x")).toHaveLength(30);

    // Removal: everything read is gone, so the paused folder is read again from its start.
    const doomed = chainTree(30);
    for (const entry of walkTree(path.join(doomed, "a"), {
      maxHeldNames: 1,
      maxStreams: 4,
      order: "any",
      removes: true,
      maxDepth: Number.POSITIVE_INFINITY,
      leave: ({ at }) => fs.rmdirSync(at),
    })) {
      expect(entry.problem).toBeUndefined();
      if (entry.path !== "" && entry.kind !== "directory") fs.unlinkSync(entry.at);
    }
    expect(fs.readdirSync(path.join(doomed, "a"))).toEqual([]);
  });
});

describe("chmodDirectory", () => {
  it("changes a real directory's mode, also one its owner cannot read, and never a symlink's target", () => {
    const root = tree({ "d/a.txt": "a", "outside/x.txt": "x" });
    const dir = path.join(root, "d");
    fs.chmodSync(dir, 0o000);
    chmodDirectory(dir, 0o700);
    expect(fs.statSync(dir).mode & 0o7777).toBe(0o700);
    // A name swapped for a link since the walk's lstat (another user's folder in a root caller's tree).
    const outside = path.join(root, "outside");
    fs.chmodSync(outside, 0o755);
    fs.symlinkSync(outside, path.join(root, "link"));
    expect(() => chmodDirectory(path.join(root, "link"), 0o700)).toThrow(/ENOTDIR|ELOOP/);
    expect(fs.statSync(outside).mode & 0o7777).toBe(0o755);
  });
});
