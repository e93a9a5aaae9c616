// The fd walk on real trees: its order, that it never follows a symlink (also one swapped in
// while it walks), that it reaches paths far longer than PATH_MAX with a bounded number of fds,
// and that what it cannot read or name is reported, not skipped.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { comparePaths, walkTree, WalkError } from "../../src/workspace/fd-walk.js";
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
    expect(paths(root)).toEqual(["directory:", "directory:bad-\uFFFD\uFFFD !its name is not valid UTF-8"]);
    const all = [...walkTree(root, { descend: () => true })].map((e) => e.path);
    expect(all).toEqual(["", "bad-\uFFFD\uFFFD", "bad-\uFFFD\uFFFD/inner"]);
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
