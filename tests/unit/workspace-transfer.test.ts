// Copy mode's host side without an engine: walk and pack a host tree, read a returned tar as hostile
// input (honest GNU tar output, and archives crafted to escape), and apply what came back.

import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import tar from "tar-stream";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import type { StepHook } from "../../src/workspace-transfer/apply-journal.js";
import { applyReturnedTree, applyReturnedTreeYielding } from "../../src/workspace-transfer/apply-tree.js";
import { type HostTree, walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packTree, readableByAll } from "../../src/workspace-transfer/pack-tree.js";
import { type ReturnedTreeLimits, readReturnedTar } from "../../src/workspace-transfer/returned-tar.js";
import {
  makeStagingDir,
  realStagingPath,
  removeStagingDir,
  removeStagingDirYielding,
} from "../../src/workspace-transfer/staging-dir.js";
import { END_OF_ARCHIVE, padding, tarHeader, UNCHANGED_PAX_KEY } from "../../src/workspace-transfer/tar-header.js";
import { diffTrees } from "../../src/workspace-transfer/tree-entry.js";
import { refuseTreeAway } from "../../src/workspace-transfer/tree-in-place.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir: tempDir, tree } = tempTrees("sandbox-run-transfer-");
const REPO = fileURLToPath(new URL("../..", import.meta.url));
/** Under the host's temp dir (the test run's own is 0700 root: another uid could not reach in). */
const asUserTrees = tempTrees(
  "sandbox-run-transfer-user-",
  () => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir(),
);

const LIMITS: ReturnedTreeLimits = {
  maxBytes: 64 * 1024 * 1024,
  maxEntries: 10_000,
  maxPathBytes: 4096,
  maxDepth: 512,
  maxLinkTargetBytes: 4096,
};

/** Walks `root` and packs it (which fills in the content hashes), as copy-in does; returns the tree and the tar. */
async function sendTree(root: string): Promise<{ before: HostTree; archive: Buffer }> {
  const before = await walkHostTree(root);
  const chunks: Buffer[] = [];
  for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
  return { before, archive: Buffer.concat(chunks) };
}

/** What the sandbox does: extract the tar with GNU tar, change the copy, return `tar -c` of it (pax, as the relay writes: GNU long-name headers are refused). */
function sandboxRoundTrip(archive: Buffer, change: (copy: string) => void): Buffer {
  const copy = tempDir("sandbox-run-transfer-copy-");
  const x = spawnSync("tar", ["-x", "-f", "-", "-C", copy, "--no-same-owner", "-p"], { input: archive });
  expect(x.status, x.stderr.toString()).toBe(0);
  change(copy);
  const c = spawnSync("tar", ["-c", "--format=posix", "-f", "-", "-C", copy, "--hard-dereference", "."], {
    maxBuffer: 1 << 30,
  });
  expect(c.status, c.stderr.toString()).toBe(0);
  return c.stdout;
}

function read(before: HostTree, archive: Readable | Buffer, limits: Partial<ReturnedTreeLimits> = {}) {
  const stagingDir = tempDir("sandbox-run-transfer-staging-");
  const stream = Buffer.isBuffer(archive) ? Readable.from([archive]) : archive;
  return readReturnedTar(stream, {
    before,
    stagingDir,
    limits: { ...LIMITS, ...limits },
    what: "the workspace",
  }).then((returned) => ({ returned, stagingDir }));
}

async function readError(before: HostTree, archive: Readable | Buffer, limits: Partial<ReturnedTreeLimits> = {}) {
  const error = await read(before, archive, limits).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isSandboxRunError(error), String(error)).toBe(true);
  return error as SandboxRunError;
}

type Crafted = Parameters<tar.Pack["entry"]>[0] & { content?: string };

/** A tar made entry by entry, as code in the sandbox could write it. */
async function crafted(entries: Crafted[]): Promise<Buffer> {
  const pack = tar.pack();
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) =>
      pack.entry(header, content ?? "", (error) => (error ? reject(error) : resolve())),
    );
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const ROOT: Crafted = { name: "./", type: "directory", mode: 0o755 };

function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const file = path.join(dir, rel);
    const st = fs.lstatSync(file);
    if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(file)}`;
    else if (st.isDirectory()) {
      if (rel) out[rel] = `dir:${(st.mode & 0o7777).toString(8)}`;
      for (const name of fs.readdirSync(file).sort()) walk(rel ? `${rel}/${name}` : name);
    } else out[rel] = `file:${(st.mode & 0o7777).toString(8)}:${fs.readFileSync(file, "utf8")}`;
  };
  walk("");
  return out;
}

describe("walk and pack", () => {
  it("walks in path order with hashes, skips what cannot travel, and never follows a symlink", async () => {
    const outside = tree({ "secret.txt": "s" });
    const root = tree({ "b.txt": "b", "a/x.txt": "x", "a-c.txt": "ac" });
    fs.symlinkSync(outside, path.join(root, "link-out"));
    spawnSync("mkfifo", [path.join(root, "fifo")]);
    const { before } = await sendTree(root);
    expect(before.entries.map((e) => e.path)).toEqual(["", "a", "a/x.txt", "a-c.txt", "b.txt", "link-out"]);
    expect(before.entries.find((e) => e.path === "b.txt")?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(before.entries.find((e) => e.path === "link-out")).toMatchObject({ kind: "symlink", target: outside });
    expect(before.skipped).toEqual([{ path: "fifo", reason: "it is not a file, directory or symbolic link" }]);
    expect(before.bytes).toBe(4);
  });

  it("read-only trees: everyone gets the owner's read and search bits, nobody else write", () => {
    const entry = { path: "f", kind: "file" as const, size: 0, mtimeMs: 0 };
    expect(readableByAll({ ...entry, mode: 0o600 }).toString(8)).toBe("644");
    expect(readableByAll({ ...entry, mode: 0o700 }).toString(8)).toBe("755");
    expect(readableByAll({ ...entry, mode: 0o777 }).toString(8)).toBe("755");
    expect(readableByAll({ ...entry, mode: 0o1777, kind: "directory" }).toString(8)).toBe("1755");
  });
});

/** Packs `before`; the bytes sent until the pack stopped, and the error it stopped with (if any). */
async function packUntilError(before: HostTree): Promise<{ sent: Buffer; error: unknown }> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
    return { sent: Buffer.concat(chunks), error: undefined };
  } catch (error) {
    return { sent: Buffer.concat(chunks), error };
  }
}

function expectChangedError(error: unknown, shown: string): void {
  expect(isSandboxRunError(error), String(error)).toBe(true);
  const e = error as SandboxRunError;
  expect(e.code).toBe("usage");
  expect(e.shortMessage).toBe(`${shown} changed while the workspace was being copied in.`);
  expect(e.hint).toMatch(
    /changed while it was being copied into the sandbox; run again when nothing else writes there/,
  );
}

describe("walk and pack while another process swaps a folder (never sends what is outside the tree)", () => {
  const SECRET = "HOST-SECRET-outside-the-tree";

  it("a folder swapped for a symlink after the walk looked at it, before its listing: not followed, the copy-in fails", async () => {
    const outside = tree({ id_rsa: SECRET });
    const files: Record<string, string> = { "a-sub/harmless": "ok" };
    // More entries than the walk handles between yields to the event loop: it yields with a-sub seen.
    for (let i = 0; i < 300; i++) files[`f${String(i).padStart(3, "0")}`] = "x";
    const root = tree(files);
    const moved = tempDir("sandbox-run-transfer-moved-");
    // The concurrent writer, at the walk's first yield to the event loop.
    let swapped = false;
    setImmediate(() => {
      fs.renameSync(path.join(root, "a-sub"), path.join(moved, "a-sub"));
      fs.symlinkSync(outside, path.join(root, "a-sub"));
      swapped = true;
    });
    const before = await walkHostTree(root);
    expect(swapped).toBe(true);
    // The walk listed the folder it looked at (through its fd), not the symlink's target.
    expect(before.entries.filter((e) => e.path.startsWith("a-sub")).map((e) => e.path)).toEqual([
      "a-sub",
      "a-sub/harmless",
    ]);
    const { sent, error } = await packUntilError(before);
    expect(sent.includes(SECRET)).toBe(false);
    expectChangedError(error, path.join(root, "a-sub"));
  });

  it("a file's folder swapped for a symlink between the walk and the pack: the copy-in fails, nothing of the target is sent", async () => {
    const outside = tree({ "key.pem": SECRET });
    const root = tree({ "a.txt": "a", "sub/key.pem": "the tree's own" });
    const before = await walkHostTree(root);
    fs.renameSync(path.join(root, "sub"), path.join(tempDir("sandbox-run-transfer-moved-"), "sub"));
    fs.symlinkSync(outside, path.join(root, "sub"));
    const { sent, error } = await packUntilError(before);
    expect(sent.includes(SECRET)).toBe(false);
    expectChangedError(error, path.join(root, "sub"));
  });

  it("a file's folder replaced by another folder (the same file hard-linked in it): refused, the folder is not the walk's", async () => {
    const root = tree({ "sub/a.txt": "the tree's own" });
    const before = await walkHostTree(root);
    const moved = tempDir("sandbox-run-transfer-moved-");
    fs.renameSync(path.join(root, "sub"), path.join(moved, "sub"));
    fs.mkdirSync(path.join(root, "sub"));
    fs.linkSync(path.join(moved, "sub", "a.txt"), path.join(root, "sub", "a.txt"));
    const { error } = await packUntilError(before);
    expectChangedError(error, path.join(root, "sub"));
  });

  it("a walked file replaced by a symlink: the copy-in fails with the same error", async () => {
    const outside = tree({ "key.pem": SECRET });
    const root = tree({ "sub/key.pem": "the tree's own" });
    const before = await walkHostTree(root);
    fs.rmSync(path.join(root, "sub", "key.pem"));
    fs.symlinkSync(path.join(outside, "key.pem"), path.join(root, "sub", "key.pem"));
    const { sent, error } = await packUntilError(before);
    expect(sent.includes(SECRET)).toBe(false);
    expectChangedError(error, path.join(root, "sub", "key.pem"));
  });
});

describe("honest round trips", () => {
  it("an untouched tree comes back unchanged: nothing staged, nothing applied", async () => {
    const root = tree({ "a.txt": "a", "dir/b.txt": "b".repeat(300_000), "empty.txt": "" });
    fs.symlinkSync("a.txt", path.join(root, "link"));
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, () => {}),
    );
    expect(returned.staged.size).toBe(0);
    expect(diffTrees(before.entries, returned.after)).toEqual({ created: [], modified: [], deleted: [] });
    expect(returned.after).toEqual(before.entries.map((e) => ({ ...e, mtimeMs: expect.any(Number) })));
  });

  it("applies created, modified, deleted, re-typed and re-moded entries, and only those", async () => {
    const root = tree({
      "keep.txt": "keep",
      "edit.txt": "old",
      "gone.txt": "gone",
      "dir/gone-too.txt": "x",
      "becomes-dir": "file",
      "chmod.sh": "echo",
    });
    fs.symlinkSync("keep.txt", path.join(root, "relink"));
    const keepIno = fs.statSync(path.join(root, "keep.txt")).ino;
    const { before, archive } = await sendTree(root);
    const returnedTar = sandboxRoundTrip(archive, (copy) => {
      fs.writeFileSync(path.join(copy, "edit.txt"), "new content");
      fs.rmSync(path.join(copy, "gone.txt"));
      fs.rmSync(path.join(copy, "dir"), { recursive: true });
      fs.rmSync(path.join(copy, "becomes-dir"));
      fs.mkdirSync(path.join(copy, "becomes-dir/sub"), { recursive: true });
      fs.writeFileSync(path.join(copy, "becomes-dir/sub/new.txt"), "new");
      fs.chmodSync(path.join(copy, "chmod.sh"), 0o755);
      fs.rmSync(path.join(copy, "relink"));
      fs.symlinkSync("/etc/passwd", path.join(copy, "relink"));
    });
    const { returned } = await read(before, returnedTar);
    expect(diffTrees(before.entries, returned.after)).toEqual({
      created: ["becomes-dir/sub/new.txt"],
      modified: ["chmod.sh", "edit.txt", "relink"],
      deleted: ["becomes-dir", "dir/gone-too.txt", "gone.txt"],
    });
    applyReturnedTree(before, returned, "the workspace");
    expect(listing(root)).toEqual({
      "becomes-dir": "dir:755",
      "becomes-dir/sub": "dir:755",
      "becomes-dir/sub/new.txt": "file:644:new",
      "chmod.sh": "file:755:echo",
      "edit.txt": "file:644:new content",
      "keep.txt": "file:644:keep",
      relink: "link:/etc/passwd",
    });
    // Untouched files are not rewritten.
    expect(fs.statSync(path.join(root, "keep.txt")).ino).toBe(keepIno);
  });

  it("a modified file hard-linked to a file outside the tree is replaced, never written through", async () => {
    const outside = tree({ "victim.txt": "original" });
    const root = tree({});
    fs.linkSync(path.join(outside, "victim.txt"), path.join(root, "linked.txt"));
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => fs.appendFileSync(path.join(copy, "linked.txt"), " pwned")),
    );
    applyReturnedTree(before, returned, "the workspace");
    expect(fs.readFileSync(path.join(root, "linked.txt"), "utf8")).toBe("original pwned");
    expect(fs.readFileSync(path.join(outside, "victim.txt"), "utf8")).toBe("original");
  });

  it("a root caller: replaced files keep their owner, new ones are the caller's", async () => {
    expect(process.geteuid?.(), "the unit tests run as root here and on CI").toBe(0);
    const root = tree({ "theirs.txt": "a" });
    fs.chownSync(path.join(root, "theirs.txt"), 4321, 4321);
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "theirs.txt"), "b");
        fs.writeFileSync(path.join(copy, "mine.txt"), "c");
      }),
    );
    applyReturnedTree(before, returned, "the workspace");
    expect(fs.statSync(path.join(root, "theirs.txt"))).toMatchObject({ uid: 4321, gid: 4321 });
    expect(fs.statSync(path.join(root, "mine.txt"))).toMatchObject({ uid: 0, gid: 0 });
  });

  it("a host change during the run is a conflict: nothing is applied", async () => {
    const root = tree({ "a.txt": "a", "b.txt": "b" });
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "a.txt"), "from the sandbox");
        fs.writeFileSync(path.join(copy, "c.txt"), "new");
      }),
    );
    fs.writeFileSync(path.join(root, "a.txt"), "edited on the host meanwhile");
    const snapshot = listing(root);
    expect(() => applyReturnedTree(before, returned, "the workspace")).toThrow(/a\.txt \(changed on the host\)/);
    expect(listing(root)).toEqual(snapshot);
    // The hint says what stood in the way, and how to keep the run's work (review, session 29).
    let error: SandboxRunError | undefined;
    try {
      applyReturnedTree(before, returned, "the workspace");
    } catch (e) {
      error = e as SandboxRunError;
    }
    expect(error?.hint).toBe(
      "Leave the workspace alone on the host while a copy-mode run works on it; then run again. --hand-back branch or patch keeps a run's work without writing into the working tree.",
    );
  });
});

describe("names that hold U+FFFD, and names that are not UTF-8 (review, session 29)", () => {
  it("a real name holding U+FFFD comes back as itself; a name the sandbox made that is not UTF-8 is left out, named, and takes nothing with it", async () => {
    // A real U+FFFD was taken for a bad byte: left out of the returned tree, which the apply read
    // as the sandbox deleting the user's file.
    const user = "notes_\uFFFD.txt";
    const root = tree({ "a.txt": "broken", [user]: "the user's" });
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "a.txt"), "fixed");
        fs.writeFileSync(Buffer.concat([Buffer.from(`${copy}/notes_`), Buffer.from([0xff]), Buffer.from(".txt")]), "x");
      }),
    );
    expect(diffTrees(before.entries, returned.after)).toEqual({ created: [], modified: ["a.txt"], deleted: [] });
    expect(returned.refused).toEqual([{ path: "notes_\uDCFF.txt", reason: "its name is not valid UTF-8" }]);
    applyReturnedTree(before, returned, "the workspace", { asideDir: tempDir() });
    expect(fs.readFileSync(path.join(root, "a.txt"), "utf8")).toBe("fixed");
    expect(fs.readFileSync(path.join(root, user), "utf8")).toBe("the user's");
    expect(fs.readdirSync(root).sort()).toEqual(["a.txt", user]);
  });
});

describe("hostile archives", () => {
  const cases: Array<[string, Crafted[], RegExp]> = [
    ["an absolute path", [ROOT, { name: "/tmp/sandbox-run-pwned", content: "x" }], /is an absolute path/],
    ["`..`", [ROOT, { name: "./../sandbox-run-pwned", content: "x" }], /climbs out with "\.\."/],
    [
      "a symlink, then a file written through it",
      [ROOT, { name: "./out", type: "symlink", linkname: "/tmp" }, { name: "./out/sandbox-run-pwned", content: "x" }],
      /written through the symbolic link "out"/,
    ],
    ["a hard link", [ROOT, { name: "./passwd", type: "link", linkname: "/etc/passwd" }], /"passwd" is a link/],
    ["an entry before its directory", [ROOT, { name: "./a/b.txt", content: "x" }], /comes before its directory/],
    ["a duplicate", [ROOT, { name: "./a.txt", content: "1" }, { name: "./a.txt", content: "2" }], /appears twice/],
    // A FIFO left out, then a directory of its name: the rules judged the directory's contents
    // outside its repository (review, session 45).
    [
      "a FIFO, then a directory of its name",
      [ROOT, { name: "./mirror.git", type: "fifo" }, { name: "./mirror.git/", type: "directory" }],
      /"mirror\.git" appears twice/,
    ],
    [
      "a device, then a file of its name",
      [ROOT, { name: "./dev", type: "character-device", devmajor: 1, devminor: 3 }, { name: "./dev", content: "x" }],
      /"dev" appears twice/,
    ],
    [
      "an entry below a FIFO",
      [ROOT, { name: "./f", type: "fifo" }, { name: "./f/x", content: "x" }],
      /comes before its directory/,
    ],
    ["no root first", [{ name: "./a.txt", content: "1" }, ROOT], /does not start with its root/],
    ["an empty component", [ROOT, { name: "./a//b", content: "1" }], /empty or "\." component/],
    // NAME_MAX: no Linux filesystem holds such a name, so the relay cannot have read one.
    ["a 256-byte name", [ROOT, { name: `./${"n".repeat(256)}`, content: "1" }], /name longer than 255 bytes/],
  ];
  for (const [what, entries, message] of cases) {
    it(`${what}: the copy fails and nothing lands anywhere`, async () => {
      const root = tree({ "a.txt": "a" });
      const { before } = await sendTree(root);
      const error = await readError(before, await crafted(entries));
      expect(error.code).toBe("policy-violation");
      expect(error.message).toMatch(message);
      expect(error.message).toContain("Nothing was applied");
      expect(fs.existsSync("/tmp/sandbox-run-pwned")).toBe(false);
      expect(fs.existsSync(path.join(path.dirname(root), "sandbox-run-pwned"))).toBe(false);
    });
  }

  it("FIFOs and devices are left out and reported; setuid and setgid are dropped", async () => {
    const root = tree({ "a.txt": "a" });
    const { before } = await sendTree(root);
    const { returned } = await read(
      before,
      await crafted([
        ROOT,
        { name: "./fifo", type: "fifo" },
        { name: "./null", type: "character-device", devmajor: 1, devminor: 3 },
        { name: "./disk", type: "block-device", devmajor: 8, devminor: 0 },
        { name: "./a.txt", mode: 0o6755, content: "a" },
        { name: "./sgid-dir/", type: "directory", mode: 0o2775 },
      ]),
    );
    expect(returned.refused.map((r) => r.path)).toEqual(["fifo", "null", "disk"]);
    expect(returned.after.map((e) => [e.path, e.mode.toString(8)])).toEqual([
      ["", "755"],
      ["a.txt", "755"],
      ["sgid-dir", "775"],
    ]);
    expect(returned.strippedModes).toEqual(["a.txt", "sgid-dir"]);
  });

  it("a 10 GB (sparse) file stops at the byte cap, and the staging copy holds no data", async () => {
    const root = tree({});
    const { before } = await sendTree(root);
    const stagingDir = tempDir("sandbox-run-transfer-staging-");
    const zeros = Buffer.alloc(1024 * 1024);
    async function* archive() {
      yield (await crafted([ROOT])).subarray(0, 512);
      yield fileHeader("./sparse", 10 * 1024 ** 3);
      for (;;) yield zeros;
    }
    const error = await readReturnedTar(Readable.from(archive()), {
      before,
      stagingDir,
      limits: { ...LIMITS, maxBytes: 32 * 1024 * 1024 },
      what: "the workspace",
    }).then(
      () => undefined,
      (e: unknown) => e as SandboxRunError,
    );
    expect(error?.code).toBe("limit");
    expect(error?.message).toMatch(/more than 32 MiB/);
    const used = fs
      .readdirSync(stagingDir)
      .reduce((sum, name) => sum + fs.statSync(path.join(stagingDir, name)).blocks * 512, 0);
    expect(used).toBeLessThan(1024 * 1024);
  });

  it("a million entries stop at the entry cap with bounded memory", async () => {
    const root = tree({});
    const { before } = await sendTree(root);
    let produced = 0;
    async function* archive() {
      yield (await crafted([ROOT])).subarray(0, 512);
      const batch: Buffer[] = [];
      for (let i = 0; i < 1_000_000; i++) {
        batch.push(fileHeader(`./f${i}`, 0));
        produced++;
        if (batch.length === 256) yield Buffer.concat(batch.splice(0));
      }
    }
    const rssBefore = process.memoryUsage().rss;
    const error = await readError(before, Readable.from(archive()), { maxEntries: 100_000, maxBytes: 1024 ** 3 });
    expect(error.code).toBe("limit");
    expect(error.message).toMatch(/more than 100000 entries/);
    expect(produced).toBeLessThan(200_000);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(150 * 1024 * 1024);
  }, 120_000);

  it("names and link targets past the metadata budget stop the copy-out, the controller's memory bounded", async () => {
    // What the host keeps of each entry is its path and link target: 4 KiB of each, 200,000
    // times, took the controller to 1.8 GB. Here the budget beyond what was sent in is 4 MiB.
    const root = tree({ "a.txt": "a" });
    const { before } = await sendTree(root);
    let produced = 0;
    async function* archive() {
      let dir = ".";
      const headers = [tarHeader({ name: "./", type: "directory", mode: 0o755 })];
      for (let i = 0; i < 14; i++) {
        dir += `/${"d".repeat(250)}${String(i).padStart(4, "0")}`;
        headers.push(tarHeader({ name: `${dir}/`, type: "directory", mode: 0o755 }));
      }
      yield Buffer.concat(headers.splice(0));
      for (let i = 0; i < 20_000; i++) {
        const name = `${dir}/${String(i).padStart(8, "0")}${"n".repeat(240)}`;
        headers.push(tarHeader({ name, type: "symlink", mode: 0o777, linkname: `${"t".repeat(3990)}${i}` }));
        produced++;
        if (headers.length === 64) yield Buffer.concat(headers.splice(0));
      }
      yield Buffer.concat([...headers, END_OF_ARCHIVE]);
    }
    const rssBefore = process.memoryUsage().rss;
    const error = await readError(before, Readable.from(archive()), {
      maxEntries: 100_000,
      maxBytes: 1024 ** 3,
      maxNewMetadataBytes: 4 * 1024 * 1024,
    });
    expect(error.code).toBe("limit");
    expect(error.limit).toBe("entries");
    expect(error.message).toMatch(/more than 4 MiB of names and link targets \(those copied in and 4 MiB more\)/);
    expect(error.hint).toMatch(/long paths/);
    // About 500 entries fit; the reader stops within a chunk of them.
    expect(produced).toBeLessThan(1_000);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(64 * 1024 * 1024);
  });

  it("a 255-byte name (NAME_MAX) is read", async () => {
    const root = tree({});
    const { before } = await sendTree(root);
    const name = "n".repeat(255);
    const { returned } = await read(before, await crafted([ROOT, { name: `./${name}`, content: "1" }]));
    expect(returned.after.map((e) => e.path)).toEqual(["", name]);
  });

  // tar-stream took these of up to 4 MiB and merged a global header's records into every later
  // entry, seconds of CPU each on the controller's one event loop; the relay writes none of them.
  const extensions: Array<[string, string, number, RegExp]> = [
    ["a pax global header", "g", 4 * 1024 * 1024 - 1024, /a pax global header \('g'\), which the relay never writes/],
    ["a GNU long name header", "L", 4 * 1024 * 1024 - 1024, /a GNU long name header \('L'\)/],
    ["a GNU long link name header", "K", 4 * 1024 * 1024 - 1024, /a GNU long link name header \('K'\)/],
    ["an old GNU long names header", "N", 1024, /an old GNU long names header \('N'\)/],
    ["a pax header over 64 KiB", "x", 64 * 1024 + 1, /a pax header of 655\d\d bytes \(at most 65536 are read\)/],
  ];
  for (const [what, flag, size, message] of extensions) {
    it(`${what} is refused before its body is read`, async () => {
      const root = tree({ "a.txt": "a" });
      const { before } = await sendTree(root);
      const body = Buffer.from(paxBody(size));
      const entries = Array.from({ length: 3 }, (_, i) =>
        tarHeader({ name: `./f${i}`, type: "file", mode: 0o644, size: 0, pax: { comment: "x" } }),
      );
      const archive = Buffer.concat([
        tarHeader({ name: "./", type: "directory", mode: 0o755 }),
        withType(fileHeader(`././@${flag}`, body.length), flag),
        body,
        padding(body.length),
        ...entries,
        END_OF_ARCHIVE,
      ]);
      const started = performance.now();
      const error = await readError(before, archive);
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(error.code).toBe("policy-violation");
      expect(error.message).toMatch(message);
      expect(error.message).toContain("Nothing was applied");
    });
  }

  it("a pax header of 64 KiB (unknown records and all) is read", async () => {
    const root = tree({});
    const { before } = await sendTree(root);
    const body = Buffer.from(`${paxBody(64 * 1024 - 24)}${paxRecord("path", "./long")}`);
    expect(body.length).toBeLessThanOrEqual(64 * 1024);
    const archive = Buffer.concat([
      tarHeader({ name: "./", type: "directory", mode: 0o755 }),
      withType(fileHeader("././@PaxHeader", body.length), "x"),
      body,
      padding(body.length),
      tarHeader({ name: "./short", type: "file", mode: 0o644, size: 0 }),
      END_OF_ARCHIVE,
    ]);
    const { returned } = await read(before, archive);
    expect(returned.after.map((e) => e.path)).toEqual(["", "long"]);
  });

  it("a link target the host cannot make (4096 bytes: ENAMETOOLONG) is the archive's doing, not the host's trouble (review, session 32)", async () => {
    const root = tree({ "a.txt": "a" });
    const { before } = await sendTree(root);
    const pack = tar.pack();
    pack.entry({ name: "./", type: "directory", mode: 0o755 });
    pack.entry({ name: "./l", type: "symlink", linkname: "a".repeat(4096), mode: 0o777 });
    pack.finalize();
    const chunks: Buffer[] = [];
    for await (const chunk of pack) chunks.push(chunk as Buffer);
    const error = await readError(before, Buffer.concat(chunks), { maxLinkTargetBytes: 4096 });
    expect(error.code).toBe("policy-violation");
    expect(error.message).toMatch(/ENAMETOOLONG/);
  });

  it("a truncated archive is refused", async () => {
    const root = tree({ "a.txt": "a" });
    const { before, archive } = await sendTree(root);
    const error = await readError(before, archive.subarray(0, 700));
    expect(error.code).toBe("policy-violation");
    expect(error.message).toMatch(/not a complete tar archive/);
  });

  it("a host disk too full to stage what came back is the host's trouble, said so, not a tampered archive (review, session 32)", async () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const root = tree({ "a.txt": "a" });
    const { before, archive } = await sendTree(root);
    const back = sandboxRoundTrip(archive, (copy) =>
      fs.writeFileSync(path.join(copy, "big.bin"), crypto.randomBytes(3 << 20)),
    );
    const small = tempDir("sandbox-run-transfer-full-");
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", small]).status).toBe(0);
    try {
      const stagingDir = path.join(small, "staging");
      fs.mkdirSync(stagingDir);
      const error = await readReturnedTar(Readable.from([back]), {
        before,
        stagingDir,
        limits: LIMITS,
        what: "the workspace",
      }).then(
        () => undefined,
        (e: unknown) => e as SandboxRunError,
      );
      expect(error?.code).toBe("not-applied");
      expect(error?.shortMessage).toBe(
        `The host could not stage the workspace the sandbox returned: ENOSPC writing in ${small}. Nothing was applied; this run's changes are not kept.`,
      );
      expect(error?.hint).toBe(
        `Free space (or raise the quota) on the filesystem holding ${small}, then run the task again.`,
      );
    } finally {
      spawnSync("umount", [small]);
    }
  });
});

/** `block` (a ustar header) with another type flag, its checksum made right again. */
function withType(block: Buffer, flag: string): Buffer {
  block.write(flag, 156, "latin1");
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return block;
}

/** "<length> <key>=<value>\n", where the length counts itself. */
function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  let length = rest.length + 1;
  while (String(length).length + rest.length !== length) length = String(length).length + rest.length;
  return `${length}${rest}`;
}

/** Tiny pax records (the cheapest way to make a big record set): `size` bytes, or up to 8 more. */
function paxBody(size: number): string {
  const records: string[] = [];
  for (let bytes = 0, i = 0; bytes < size; i++) {
    const record = paxRecord(i.toString(36), "");
    records.push(record);
    bytes += record.length;
  }
  return records.join("");
}

/** A ustar header for a regular file of `size` bytes (content not included). */
function fileHeader(name: string, size: number): Buffer {
  const block = Buffer.alloc(512);
  block.write(name, 0, 100, "utf8");
  block.write("0000644\0", 100);
  block.write("0000000\0", 108);
  block.write("0000000\0", 116);
  // Sizes past 8 GiB use the base-256 form: high bit set, big-endian value.
  if (size >= 8 * 1024 ** 3) {
    block[124] = 0x80;
    block.writeBigUInt64BE(BigInt(size), 124 + 4);
  } else block.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  block.write("00000000000\0", 136);
  block.write("0", 156);
  block.write("ustar\0", 257);
  block.write("00", 263);
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return block;
}

describe("apply, whatever the returned list says", () => {
  it("never writes below a symlink, even one the same list created (the reader refuses such lists first)", async () => {
    const outside = tree({});
    const root = tree({ "a.txt": "a" });
    const { before } = await sendTree(root);
    const staging = tempDir("sandbox-run-transfer-staging-");
    fs.symlinkSync(outside, path.join(staging, "1"));
    fs.writeFileSync(path.join(staging, "2"), "pwned");
    const entry = { mode: 0o644, size: 0, mtimeMs: 0 };
    const returned = {
      after: [
        { ...before.entries[0]!, path: "" },
        before.entries.find((e) => e.path === "a.txt")!,
        { ...entry, path: "escape", kind: "symlink" as const, target: outside, hash: outside },
        { ...entry, path: "escape/pwned.txt", kind: "file" as const, size: 5, hash: "x" },
      ],
      staged: new Map([
        ["escape", path.join(staging, "1")],
        ["escape/pwned.txt", path.join(staging, "2")],
      ]),
      refused: [],
      refusedKinds: new Map(),
      strippedModes: [],
      writeBitsCleared: [],
      bytes: 0,
      contentOf: () => undefined,
    };
    expect(() => applyReturnedTree(before, returned, "the workspace")).toThrow(/is not a directory; refusing/);
    expect(fs.readdirSync(outside)).toEqual([]);
  });
});

describe("the packer's own tar headers", () => {
  it("long and non-ASCII names and link targets survive GNU tar (pax records)", async () => {
    const long = `${"d".repeat(120)}/${"f".repeat(130)}-ünïcödé ✓.txt`;
    const root = tree({ [long]: "deep\n", "plain.txt": "p\n" });
    fs.symlinkSync(`${"t".repeat(140)}-✓`, path.join(root, "long-link"));
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, () => {}),
    );
    expect(returned.staged.size).toBe(0);
    expect(returned.after.map((e) => e.path)).toEqual(before.entries.map((e) => e.path));
    expect(returned.after.find((e) => e.path === "long-link")?.target).toBe(`${"t".repeat(140)}-✓`);
  });
});

describe("what the relay may claim", () => {
  it('"unchanged" keeps the host\'s copy of a file that was sent; for any other path it is refused', async () => {
    const root = tree({ "a.txt": "a\n" });
    const { before } = await sendTree(root);
    const sent = before.entries.find((e) => e.path === "a.txt")!;
    const unchanged = { pax: { [UNCHANGED_PAX_KEY]: "1" } };
    const { returned } = await read(before, await crafted([ROOT, { name: "./a.txt", ...unchanged }]));
    expect(returned.staged.size).toBe(0);
    expect(returned.after.find((e) => e.path === "a.txt")).toEqual(sent);
    const error = await readError(before, await crafted([ROOT, { name: "./new.txt", ...unchanged }]));
    expect(error.message).toMatch(/"new\.txt" is claimed unchanged but was never sent as a file/);
  });
});

describe("empty files", () => {
  it("a new empty file is created (without a staged copy), an emptied one is emptied", async () => {
    const root = tree({ "full.txt": "content\n" });
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "new-empty.txt"), "");
        fs.writeFileSync(path.join(copy, "full.txt"), "");
      }),
    );
    applyReturnedTree(before, returned, "the workspace");
    expect(listing(root)).toEqual({ "full.txt": "file:644:", "new-empty.txt": "file:644:" });
  });
});

/**
 * Every entry with its kind, owner, mode, size, inode, mtime and content: "byte for byte". Not the
 * ctime (renames move it); a directory's mtime separately, in `directoryTimes`.
 */
function exactly(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const file = path.join(dir, rel);
    const st = fs.lstatSync(file);
    const facts = `${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}:${st.size}:${st.ino}`;
    if (st.isSymbolicLink()) out[rel] = `link:${facts}:${st.mtimeMs}:${fs.readlinkSync(file)}`;
    else if (st.isDirectory()) {
      out[rel || "."] = `dir:${facts}`;
      for (const name of fs.readdirSync(file).sort()) walk(rel ? `${rel}/${name}` : name);
    } else out[rel] = `file:${facts}:${st.mtimeMs}:${fs.readFileSync(file, "base64")}`;
  };
  walk("");
  return out;
}

/** Each directory's mtime (ms): put back as precisely as Node sets times (a double, about a microsecond). */
function directoryTimes(dir: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const rel of ["", ...fs.readdirSync(dir, { recursive: true, encoding: "utf8" })]) {
    const st = fs.lstatSync(path.join(dir, rel));
    if (st.isDirectory()) out[rel || "."] = st.mtimeMs;
  }
  return out;
}

describe("apply is all or nothing", () => {
  const changeEverything = (copy: string) => {
    fs.writeFileSync(path.join(copy, "a.txt"), "a, changed");
    fs.rmSync(path.join(copy, "b.txt"));
    fs.rmSync(path.join(copy, "gone"), { recursive: true });
    fs.chmodSync(path.join(copy, "mode.sh"), 0o755);
    fs.chmodSync(path.join(copy, "dir"), 0o700);
    fs.mkdirSync(path.join(copy, "new"));
    fs.writeFileSync(path.join(copy, "new/n.txt"), "new");
    fs.rmSync(path.join(copy, "link"));
    fs.writeFileSync(path.join(copy, "link"), "a file now");
    fs.writeFileSync(path.join(copy, "z-locked.txt"), "changed too");
  };
  const files = {
    "a.txt": "a",
    "b.txt": "b",
    "gone/x.txt": "x",
    "mode.sh": "echo",
    "dir/keep.txt": "keep",
    "z-locked.txt": "locked",
  };

  it("a failure half way (an immutable file, written last) undoes every step: the tree is byte for byte as it was", async () => {
    expect(process.geteuid?.(), "chattr needs root (the unit tests run as root here and on CI)").toBe(0);
    const root = tree(files);
    fs.symlinkSync("a.txt", path.join(root, "link"));
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(before, sandboxRoundTrip(archive, changeEverything));
    const locked = path.join(root, "z-locked.txt");
    const chattr = spawnSync("chattr", ["+i", locked]);
    expect(chattr.status, `chattr +i on the test's temp folder: ${chattr.stderr}`).toBe(0);
    try {
      const snapshot = exactly(root);
      const times = directoryTimes(root);
      let error: unknown;
      try {
        applyReturnedTree(before, returned, "the workspace", { asideDir: stagingDir });
      } catch (e) {
        error = e;
      }
      expect(isSandboxRunError(error), String(error)).toBe(true);
      expect((error as SandboxRunError).message).toMatch(
        /could not be applied \(EPERM.*z-locked\.txt.*\); every change made so far was undone\. Nothing was changed\./,
      );
      expect(exactly(root)).toEqual(snapshot);
      const timesNow = directoryTimes(root);
      expect(Object.keys(timesNow)).toEqual(Object.keys(times));
      for (const [rel, mtimeMs] of Object.entries(times)) expect(timesNow[rel], rel).toBeCloseTo(mtimeMs, 2);
      // Everything that went aside came back: the aside folder is empty.
      expect(fs.readdirSync(path.join(stagingDir, "aside"))).toEqual([]);
    } finally {
      spawnSync("chattr", ["-i", locked]);
    }
  });

  it("succeeds as a whole: what went aside is gone, and a directory made read-only still got its new entries", async () => {
    const root = tree(files);
    fs.symlinkSync("a.txt", path.join(root, "link"));
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        changeEverything(copy);
        fs.writeFileSync(path.join(copy, "new/second.txt"), "2");
        fs.chmodSync(path.join(copy, "new"), 0o555);
      }),
    );
    applyReturnedTree(before, returned, "the workspace", { asideDir: stagingDir });
    expect(listing(root)).toEqual({
      "a.txt": "file:644:a, changed",
      dir: "dir:700",
      "dir/keep.txt": "file:644:keep",
      link: "file:644:a file now",
      "mode.sh": "file:755:echo",
      new: "dir:555",
      "new/n.txt": "file:644:new",
      "new/second.txt": "file:644:2",
      "z-locked.txt": "file:644:changed too",
    });
    expect(fs.existsSync(path.join(stagingDir, "aside"))).toBe(false);
    expect(fs.readdirSync(root).filter((name) => name.startsWith(".sandbox-run-"))).toEqual([]);
  });

  it("without an aside folder (or across a mount) entries wait next to their place, and are gone after success", async () => {
    const root = tree({ "sub/a.txt": "a", "sub/b.txt": "b" });
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "sub/a.txt"), "changed");
        fs.rmSync(path.join(copy, "sub/b.txt"));
      }),
    );
    applyReturnedTree(before, returned, "the workspace");
    expect(listing(root)).toEqual({ sub: "dir:755", "sub/a.txt": "file:644:changed" });
  });

  it("a staging directory whose apply was cut off keeps the caller's originals next to it", () => {
    const parent = tempDir("sandbox-run-transfer-parent-");
    const staging = path.join(parent, ".sandbox-run-staging-ws-x");
    fs.mkdirSync(path.join(staging, "aside"), { recursive: true });
    fs.writeFileSync(path.join(staging, "aside", "1"), "the caller's original");
    fs.writeFileSync(path.join(staging, "7"), "staged");
    removeStagingDir(staging);
    const kept = fs.readdirSync(parent);
    expect(kept).toEqual([expect.stringMatching(/^\.sandbox-run-kept-[0-9a-f]{12}$/)]);
    expect(fs.readFileSync(path.join(parent, kept[0]!, "1"), "utf8")).toBe("the caller's original");
  });
});

/**
 * Another local user who owns a folder in the workspace swaps a folder or a file for a symlink
 * between the apply's check and its write (`beforeWrite` runs exactly there). A root caller must
 * then write and chmod nothing outside the tree: every step goes through folder fds that never
 * follow a link, and the apply is undone.
 */
describe("a large apply beside other runs of the same controller (review, session 37)", () => {
  // 4,000 files replaced by 4,000 others: a few hundred ms of steps at the least.
  const many = Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`old/f${i}.txt`, `old ${i}`]));
  const replaceAll = (copy: string) => {
    fs.rmSync(path.join(copy, "old"), { recursive: true });
    fs.mkdirSync(path.join(copy, "new"));
    for (let i = 0; i < 4000; i++) fs.writeFileSync(path.join(copy, `new/f${i}.txt`), `new ${i}`);
  };
  /** Turns of the event loop while `work` runs, and how many of them came before its commit point. */
  async function turnsDuring(work: (onStep: StepHook) => unknown): Promise<{ total: number; beforeCommit: number }> {
    let turns = 0;
    let beforeCommit = -1;
    let running = true;
    const tick = () => {
      turns++;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      await work((_step, phase) => {
        if (phase === "committed") beforeCommit = turns;
      });
    } finally {
      running = false;
    }
    return { total: turns, beforeCommit };
  }

  it("lets the event loop through between its steps and ends as the one-go apply does; the one-go apply holds it throughout", async () => {
    const results: Record<string, string>[] = [];
    const turns: Array<{ total: number; beforeCommit: number }> = [];
    for (const yielding of [true, false]) {
      const root = tree(many);
      const { before, archive } = await sendTree(root);
      const { returned, stagingDir } = await read(before, sandboxRoundTrip(archive, replaceAll));
      turns.push(
        await turnsDuring((onStep) =>
          yielding
            ? applyReturnedTreeYielding(before, returned, "the workspace", { asideDir: stagingDir, onStep })
            : applyReturnedTree(before, returned, "the workspace", { asideDir: stagingDir, onStep }),
        ),
      );
      results.push(listing(root));
      expect(fs.existsSync(path.join(stagingDir, "aside"))).toBe(false);
    }
    // The same tree either way: 4,000 new files, none of the old.
    expect(Object.keys(results[0]!)).toHaveLength(4001);
    expect(results[0]!["new/f3999.txt"]).toBe("file:644:new 3999");
    expect(results[0]).toEqual(results[1]);
    // Other work ran while the yielding apply checked and wrote (before its commit point) ...
    expect(turns[0]!.beforeCommit).toBeGreaterThan(0);
    // ... and none at all during the one-go apply: what a neighbour's run waited through.
    expect(turns[1]).toEqual({ total: 0, beforeCommit: 0 });
  }, 120_000); // 4,000 files written and applied twice: 9-14 s here, past 30 s on a loaded machine

  it("the staging directory of a large returned tree is removed with the event loop let through", async () => {
    const root = tree({ "a.txt": "a" });
    const staging = makeStagingDir(root);
    for (let i = 0; i < 4000; i++) fs.writeFileSync(path.join(staging, `f${i}`), "x");
    const real = realStagingPath(staging);
    const { total } = await turnsDuring(() => removeStagingDirYielding(staging));
    expect(fs.existsSync(real)).toBe(false);
    expect(total).toBeGreaterThan(0);
  });
});

describe("apply, whatever the host does meanwhile", () => {
  const swapForLink = (file: string, target: string) => {
    fs.renameSync(file, `${file}-away`);
    fs.symlinkSync(target, file);
  };

  it("a folder swapped for a symlink after its check: nothing lands outside, and the apply is undone", async () => {
    const outside = tempDir("sandbox-run-transfer-outside-");
    const root = tree({ "d/a.txt": "a" });
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "d/n1.txt"), "* * * * * root id > /tmp/pwned\n");
        fs.writeFileSync(path.join(copy, "d/n2.txt"), "* * * * * root id > /tmp/pwned\n");
      }),
    );
    const error = applyError(() =>
      applyReturnedTree(before, returned, "the workspace", {
        asideDir: stagingDir,
        beforeWrite: (rel) => rel === "d/n1.txt" && swapForLink(path.join(root, "d"), outside),
      }),
    );
    expect(error.message).toMatch(/d changed on the host while the apply ran\); every change made so far was undone/);
    expect(fs.readdirSync(outside)).toEqual([]);
    // What went into the real folder (its fd held it) was taken out again.
    expect(fs.readdirSync(path.join(root, "d-away"))).toEqual(["a.txt"]);
  });

  it("a file swapped for a symlink before its mode changes: the file outside keeps its mode", async () => {
    const outside = tree({ "victim.txt": "root's" });
    const victim = path.join(outside, "victim.txt");
    fs.chmodSync(victim, 0o600);
    const root = tree({ "f.txt": "same" });
    fs.chmodSync(path.join(root, "f.txt"), 0o602);
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => fs.chmodSync(path.join(copy, "f.txt"), 0o606)),
    );
    const error = applyError(() =>
      applyReturnedTree(before, returned, "the workspace", {
        asideDir: stagingDir,
        beforeWrite: (rel) => rel === "f.txt" && swapForLink(path.join(root, "f.txt"), victim),
      }),
    );
    expect(error.message).toMatch(/f\.txt is no longer the file the apply checked \(changed on the host\)/);
    expect(fs.statSync(victim).mode & 0o7777).toBe(0o600);
  });

  it("a folder swapped for a symlink before its mode changes: the folder outside keeps its mode", async () => {
    const outside = tempDir("sandbox-run-transfer-outside-");
    fs.chmodSync(outside, 0o755);
    const root = tree({ "d/a.txt": "a" });
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => fs.chmodSync(path.join(copy, "d"), 0o700)),
    );
    const error = applyError(() =>
      applyReturnedTree(before, returned, "the workspace", {
        asideDir: stagingDir,
        beforeWrite: (rel) => rel === "d" && swapForLink(path.join(root, "d"), outside),
      }),
    );
    expect(error.message).toMatch(/d is not a directory; refusing to write below it/);
    expect(fs.statSync(outside).mode & 0o7777).toBe(0o755);
  });

  it("an undo after such a swap puts nothing outside and chmods nothing there either", async () => {
    expect(process.geteuid?.(), "chattr needs root (the unit tests run as root here and on CI)").toBe(0);
    const outside = tempDir("sandbox-run-transfer-outside-");
    const victimDir = tree({ "victim.txt": "root's" });
    const victim = path.join(victimDir, "victim.txt");
    fs.chmodSync(victim, 0o600);
    const root = tree({ "d/x.txt": "x", "f.txt": "f", "z-locked.txt": "locked" });
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.writeFileSync(path.join(copy, "d/x.txt"), "x, changed");
        fs.chmodSync(path.join(copy, "f.txt"), 0o640);
        fs.writeFileSync(path.join(copy, "z-locked.txt"), "changed");
      }),
    );
    const locked = path.join(root, "z-locked.txt");
    const chattr = spawnSync("chattr", ["+i", locked]);
    expect(chattr.status, `chattr +i on the test's temp folder: ${chattr.stderr}`).toBe(0);
    const outsideTimes = fs.statSync(outside).mtimeMs;
    try {
      // d/x.txt and f.txt are done; before the last step (which fails) both are swapped.
      const error = applyError(() =>
        applyReturnedTree(before, returned, "the workspace", {
          asideDir: stagingDir,
          beforeWrite: (rel) => {
            if (rel !== "z-locked.txt") return;
            swapForLink(path.join(root, "d"), outside);
            swapForLink(path.join(root, "f.txt"), victim);
          },
        }),
      );
      expect(error.message).toMatch(/undoing them failed for 1 path\(s\): f\.txt \(.*changed on the host/);
      expect(fs.statSync(victim).mode & 0o7777).toBe(0o600);
      expect(fs.readdirSync(outside)).toEqual([]);
      expect(fs.statSync(outside).mtimeMs).toBe(outsideTimes);
      // The real folder got its own file back (the same one: content "x").
      expect(fs.readFileSync(path.join(root, "d-away/x.txt"), "utf8")).toBe("x");
    } finally {
      spawnSync("chattr", ["-i", locked]);
    }
  });
});

function applyError(apply: () => unknown): SandboxRunError {
  let error: unknown;
  try {
    apply();
  } catch (e) {
    error = e;
  }
  expect(isSandboxRunError(error), String(error)).toBe(true);
  return error as SandboxRunError;
}

/**
 * The staging directory sits next to the tree, or inside it: either may be another local user's
 * folder, who can rename the directory away and put a symlink at its name. It is used through a
 * path pinned to its fd, so what is staged (and later moved aside) never follows that link.
 */
describe("the staging directory, whatever its parent's owner does", () => {
  it("swapped for a symlink after it was made: staged files land in it, not where the link points; removed whole", () => {
    const parent = tempDir("sandbox-run-transfer-parent-");
    const root = path.join(parent, "ws");
    fs.mkdirSync(root);
    const outside = tempDir("sandbox-run-transfer-outside-");
    const staging = makeStagingDir(root);
    const real = realStagingPath(staging);
    expect(path.dirname(real)).toBe(parent);
    expect(staging).toBe(`/proc/${process.pid}/fd/${staging.split("/").pop()}`);
    fs.renameSync(real, `${real}-away`);
    fs.symlinkSync(outside, real);
    fs.writeFileSync(path.join(staging, "1"), "* * * * * root id > /tmp/pwned\n", { flag: "wx" });
    fs.mkdirSync(path.join(staging, "aside"));
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.readdirSync(`${real}-away`).sort()).toEqual(["1", "aside"]);
    removeStagingDir(staging);
    // Emptied through its fd; the name (now the link) is not the folder, so it stays as it is.
    expect(fs.readdirSync(`${real}-away`)).toEqual([]);
    expect(fs.lstatSync(real).isSymbolicLink()).toBe(true);
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it("an apply through a pinned staging directory: what went aside is gone after it, and nothing is kept next to the tree", async () => {
    const parent = tempDir("sandbox-run-transfer-parent-");
    const root = path.join(parent, "ws");
    fs.mkdirSync(root);
    fs.writeFileSync(path.join(root, "old.txt"), "old");
    fs.writeFileSync(path.join(root, "keep.txt"), "keep");
    const { before, archive } = await sendTree(root);
    const staging = makeStagingDir(root);
    const archiveBack = sandboxRoundTrip(archive, (copy) => {
      fs.rmSync(path.join(copy, "old.txt"));
      fs.writeFileSync(path.join(copy, "keep.txt"), "changed");
    });
    const returned = await readReturnedTar(Buffer.isBuffer(archiveBack) ? Readable.from([archiveBack]) : archiveBack, {
      before,
      stagingDir: staging,
      limits: LIMITS,
      what: "the workspace",
    });
    const result = applyReturnedTree(before, returned, "the workspace", { asideDir: staging });
    expect(result.leftAside).toEqual([]);
    expect(fs.readdirSync(staging)).not.toContain("aside");
    removeStagingDir(staging);
    expect(fs.readdirSync(parent)).toEqual(["ws"]);
    expect(fs.readdirSync(root).sort()).toEqual(["keep.txt"]);
  });

  it("an ordinary staging directory is removed by its name once emptied", () => {
    const root = tree({ "a.txt": "a" });
    const staging = makeStagingDir(root);
    const real = realStagingPath(staging);
    fs.writeFileSync(path.join(staging, "1"), "x");
    removeStagingDir(staging);
    expect(fs.existsSync(real)).toBe(false);
  });
});

describe("the apply, once done", () => {
  it("is final: an old entry that cannot be removed afterwards is reported where it waits, and nothing is undone", async () => {
    expect(process.geteuid?.(), "chattr needs root (the unit tests run as root here and on CI)").toBe(0);
    const root = tree({ "d/old.txt": "old", "keep.txt": "k" });
    const { before, archive } = await sendTree(root);
    const { returned, stagingDir } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => {
        fs.rmSync(path.join(copy, "d"), { recursive: true });
        fs.writeFileSync(path.join(copy, "new.txt"), "new");
      }),
    );
    // The deleted folder waits aside while the new file goes in; made immutable there, it cannot
    // be removed once the apply is done (before, that failure undid the finished apply).
    let locked: string | undefined;
    try {
      const result = applyReturnedTree(before, returned, "the workspace", {
        asideDir: stagingDir,
        beforeWrite: (rel) => {
          if (rel !== "new.txt") return;
          const aside = path.join(stagingDir, "aside");
          const waiting = fs.readdirSync(aside).find((name) => fs.lstatSync(path.join(aside, name)).isFile());
          locked = path.join(aside, waiting!);
          expect(fs.readFileSync(locked, "utf8")).toBe("old");
          const chattr = spawnSync("chattr", ["+i", locked]);
          expect(chattr.status, `chattr +i: ${chattr.stderr}`).toBe(0);
        },
      });
      expect(fs.readFileSync(path.join(root, "new.txt"), "utf8")).toBe("new");
      expect(fs.existsSync(path.join(root, "d"))).toBe(false);
      expect(result.leftAside).toEqual([path.join(stagingDir, "aside")]);
    } finally {
      if (locked) spawnSync("chattr", ["-i", locked]);
    }
  });
});

describe("files this user cannot read (review, session 29)", () => {
  it("are left out of the copy-in and named, not an internal error half way through the archive", () => {
    const root = asUserTrees.tree({ "a.txt": "a", "secret.key": "s", "sudo-left.log": "r" });
    fs.chmodSync(path.join(root, "secret.key"), 0o000);
    fs.chmodSync(path.join(root, "sudo-left.log"), 0o600);
    for (const name of [".", "a.txt", "secret.key"]) fs.chownSync(path.join(root, name), 1500, 1500);
    // Root reads every file: the walk and pack run as an unprivileged uid, as a normal user's run would.
    const script = fileURLToPath(new URL("../support/pack-as-user.ts", import.meta.url));
    const userTmp = asUserTrees.dir();
    fs.chownSync(userTmp, 1500, 1500);
    const run =
      process.getuid?.() === 0
        ? spawnSync(
            "setpriv",
            ["--reuid=1500", "--regid=1500", "--clear-groups", process.execPath, "--import", "tsx", script, root],
            { encoding: "utf8", env: { ...process.env, TMPDIR: userTmp, HOME: userTmp }, cwd: REPO },
          )
        : spawnSync(process.execPath, ["--import", "tsx", script, root], { encoding: "utf8", cwd: REPO });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(out.skipped).toEqual([
      { path: "secret.key", reason: "this user cannot read it" },
      { path: "sudo-left.log", reason: "this user cannot read it" },
    ]);
    expect(out.sent).toEqual(["", "a.txt"]);
  });
});

describe("a returned tree past copy mode's path caps (review, session 29)", () => {
  it("is a limit naming the cap and bind mode, not a tampered archive", async () => {
    const root = tree({ "a.txt": "a" });
    const { before, archive } = await sendTree(root);
    const deep = sandboxRoundTrip(archive, (copy) => fs.mkdirSync(path.join(copy, "d/d/d/d/d"), { recursive: true }));
    const error = await readError(before, deep, { maxDepth: 3 });
    expect(error.code).toBe("limit");
    expect(error.message).toMatch(/a path deeper than 3 levels \(copy mode's cap\)/);
    expect(error.hint).toMatch(/--workspace bind/);
    const long = sandboxRoundTrip(archive, (copy) => fs.writeFileSync(path.join(copy, "x".repeat(200)), "x"));
    expect((await readError(before, long, { maxPathBytes: 100 })).message).toMatch(/longer than 100 bytes/);
  });
});

describe("a new file where the host holds an entry that never travelled (review, session 29)", () => {
  it("is refused naming that entry, not as something that appeared on the host", async () => {
    const root = tree({ "a.txt": "a" });
    spawnSync("mkfifo", [path.join(root, "pipe")]);
    const { before, archive } = await sendTree(root);
    const { returned } = await read(
      before,
      sandboxRoundTrip(archive, (copy) => fs.writeFileSync(path.join(copy, "pipe"), "a file")),
    );
    expect(() => applyReturnedTree(before, returned, "the workspace", { asideDir: tempDir() })).toThrow(
      /pipe \(held on the host by an entry not copied in: it is not a file, directory or symbolic link\)/,
    );
    expect(fs.lstatSync(path.join(root, "pipe")).isFIFO()).toBe(true);
  });
});

describe("a tree moved or replaced before copy-out (review, session 29)", () => {
  it("is refused (not-applied: the run ran, the host tree moved) before anything is staged; the same tree in place passes", async () => {
    const root = tree({ "a.txt": "a" });
    const { before } = await sendTree(root);
    expect(() => refuseTreeAway(before, "the workspace /x")).not.toThrow();
    fs.renameSync(root, `${root}-moved`);
    expect(() => refuseTreeAway(before, "the workspace /x")).toThrow(
      /^The workspace \/x was moved, removed or replaced .*\(it is gone\)/,
    );
    fs.mkdirSync(root);
    let error: unknown;
    try {
      refuseTreeAway(before, "the workspace /x");
    } catch (e) {
      error = e;
    }
    expect(isSandboxRunError(error) && error.code).toBe("not-applied");
    expect(String(error)).toContain("(it is another folder now)");
    expect(fs.readdirSync(root)).toEqual([]);
  });
});
