// Reading objects of a repository the sandbox wrote to, with the host's git, without using that
// repository's git directory: a private bare repository in the run's private folder whose object
// store is empty and whose alternates are the object directories to read (bind mode: the one in
// the tree, reached as /proc/self/fd/N of an fd the walk opened; copy mode: the host's own, and a
// private folder of links to the staged new objects). So no config, hook, attribute, graft,
// replace ref or shallow file of the sandbox's is read; the commit-graph and multi-pack-index
// (caches git trusts) are switched off; git's environment is scrubbed (util/host-git.ts).
// Git never reads a store's own `info/`: each store is given as a private folder of links to its
// `pack` and fan-out folders, and the stores its alternates name are found here, through fds
// (git-alternates.ts). Git followed a borrowed store's `info/alternates` the sandbox had made a
// link to a host file, and quoted its last line in the error; a FIFO there held it five minutes
// (review, session 37). Nor is git's stderr ever quoted: it echoes what it read.
// Only plumbing runs: cat-file (types, commits and tags) and diff-tree (which paths two trees
// differ in). Objects read here were checked first (git-object-check.ts).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { hostGit } from "../util/host-git.js";
import { O_PATH } from "../util/o-path.js";
import { MAX_ALTERNATE_STORES, MAX_ALTERNATES_DEPTH, parseAlternates, readAlternatesAt } from "./git-alternates.js";

/** Where git finds objects: a directory fd of ours (passed to git) or a private path. */
export type ObjectStore = { fd: number } | { path: string };

export type ObjectInfo = { type: "commit" | "tree" | "blob" | "tag"; size: number } | { missing: true };

interface DiffRecord {
  path: string;
  srcMode: number;
  dstMode: number;
  dstOid: string;
  status: string;
}

/** A git command failed or went past its bounds: the ref check cannot conclude. */
export class ObjectReadError extends Error {}

/** rev-list's answer: about 190,000 new commits. */
const MAX_REV_LIST_BYTES = 16 * 1024 * 1024;
/** Bytes of commits, trees and tags imported into the private repository per check. */
const MAX_IMPORT_BYTES = 256 * 1024 * 1024;
/** Files larger than this are inflated in part first, to learn their type (a blob is skipped). */
const PEEK_ABOVE_BYTES = 1024 * 1024;
const PACK_TYPES: Record<string, number> = { commit: 1, tree: 2, blob: 3, tag: 4 };

const EXTRA_CONFIG = [
  "core.commitGraph=false",
  "core.multiPackIndex=false",
  "pack.useBitmaps=false",
  "pack.readReverseIndex=false",
  "pack.writeReverseIndex=false",
];
const TIMEOUT_MS = 5 * 60 * 1000;
const EMPTY_TREE = {
  sha1: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
  sha256: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
};

export class PrivateRepo {
  private constructor(
    private readonly dir: string,
    private readonly fds: number[],
    readonly format: "sha1" | "sha256",
    /** The fds opened here (the chain's stores), closed with the repository. */
    private readonly owned: number[],
  ) {}

  /**
   * Makes the private repository in a new folder below `scratch`. `shallow`: the repository's
   * shallow file before the run (commits whose parents it does not have).
   */
  static create(
    scratch: string,
    format: "sha1" | "sha256",
    stores: readonly ObjectStore[],
    shallow?: Buffer,
  ): PrivateRepo {
    const dir = fs.mkdtempSync(path.join(scratch, "objects-"));
    const { fds, owned } = storeChain(stores);
    // Git's fd 3 is fds[0]: each store is a folder of links into it, with no `info/` of its own.
    const alternates = fds.map((_, i) => shadowStore(path.join(dir, "stores", String(i)), `/proc/self/fd/${3 + i}`));
    fs.mkdirSync(path.join(dir, "git", "objects", "info"), { recursive: true, mode: 0o700 });
    fs.mkdirSync(path.join(dir, "git", "refs"), { mode: 0o700 });
    fs.mkdirSync(path.join(dir, "home"), { mode: 0o700 });
    fs.writeFileSync(path.join(dir, "git", "HEAD"), "ref: refs/heads/none\n", { flag: "wx" });
    fs.writeFileSync(
      path.join(dir, "git", "config"),
      format === "sha256"
        ? "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = sha256\n"
        : "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
      { flag: "wx" },
    );
    fs.writeFileSync(path.join(dir, "git", "objects", "info", "alternates"), `${alternates.join("\n")}\n`, {
      flag: "wx",
    });
    if (shallow) fs.writeFileSync(path.join(dir, "git", "shallow"), shallow, { flag: "wx" });
    return new PrivateRepo(dir, fds, format, owned);
  }

  get emptyTree(): string {
    return EMPTY_TREE[this.format];
  }

  /** Type and size of each object (`cat-file --batch-check`). */
  async info(oids: readonly string[]): Promise<Map<string, ObjectInfo>> {
    const out = new Map<string, ObjectInfo>();
    if (oids.length === 0) return out;
    const text = (await this.git(["cat-file", "--batch-check"], `${oids.join("\n")}\n`, 64 * 1024 * 1024)).toString(
      "latin1",
    );
    const lines = text.split("\n").filter((l) => l !== "");
    if (lines.length !== oids.length) throw new ObjectReadError("git cat-file answered for fewer objects than asked");
    for (const [i, line] of lines.entries()) {
      const [oid, type, size] = line.split(" ");
      if (oid !== oids[i]) throw new ObjectReadError("git cat-file answered out of order");
      if (type === "missing") out.set(oid!, { missing: true });
      else if (type === "commit" || type === "tree" || type === "blob" || type === "tag")
        out.set(oid!, { type, size: Number(size) });
      else throw new ObjectReadError(`git cat-file said "${line.slice(0, 100)}"`);
    }
    return out;
  }

  /** The content of each object (`cat-file --batch`); the caller keeps their sizes small. */
  async contents(oids: readonly string[], maxTotalBytes: number): Promise<Map<string, Buffer>> {
    const out = new Map<string, Buffer>();
    if (oids.length === 0) return out;
    const data = await this.git(["cat-file", "--batch"], `${oids.join("\n")}\n`, maxTotalBytes + oids.length * 200);
    let at = 0;
    for (const oid of oids) {
      const newline = data.indexOf(10, at);
      if (newline < 0) throw new ObjectReadError("git cat-file's answer ended early");
      const [name, type, size] = data.toString("latin1", at, newline).split(" ");
      if (name !== oid || type === "missing" || size === undefined)
        throw new ObjectReadError(`git cat-file could not read ${oid}`);
      const start = newline + 1;
      const end = start + Number(size);
      if (end + 1 > data.length) throw new ObjectReadError("git cat-file's answer ended early");
      out.set(oid, data.subarray(start, end));
      at = end + 1;
    }
    return out;
  }

  /**
   * For each commit not reachable from `known` (and each of its first-parent ancestors that is
   * not), its first parent (null for a root commit): `rev-list --first-parent --parents`. A commit
   * reachable from `known` is not in the map.
   */
  async firstParents(commits: readonly string[], known: readonly string[]): Promise<Map<string, string | null>> {
    const out = new Map<string, string | null>();
    if (commits.length === 0) return out;
    const input = `${[...commits, ...known.map((oid) => `^${oid}`)].join("\n")}\n`;
    const data = await this.git(
      ["rev-list", "--first-parent", "--parents", "--ignore-missing", "--stdin"],
      input,
      MAX_REV_LIST_BYTES,
    );
    for (const line of data.toString("latin1").split("\n")) {
      if (line === "") continue;
      const [commit, parent] = line.split(" ");
      out.set(commit!, parent ?? null);
    }
    return out;
  }

  /** Every commit `commits` reach that `known` do not, each with its parents (`rev-list --parents`). */
  async newCommits(commits: readonly string[], known: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (commits.length === 0) return out;
    const input = `${[...commits, ...known.map((oid) => `^${oid}`)].join("\n")}\n`;
    const data = await this.git(["rev-list", "--parents", "--ignore-missing", "--stdin"], input, MAX_REV_LIST_BYTES);
    for (const line of data.toString("latin1").split("\n")) {
      if (line === "") continue;
      const [commit, ...parents] = line.split(" ");
      out.set(commit!, parents);
    }
    return out;
  }

  /**
   * The paths each pair of trees differs in, recursively, renames not detected (`diff-tree
   * --stdin -r -z --no-renames`). Any word on stderr fails it: git reports a missing subtree there.
   */
  async diff(pairs: ReadonlyArray<readonly [string, string]>, maxBytes: number): Promise<Map<string, DiffRecord[]>> {
    const out = new Map<string, DiffRecord[]>();
    if (pairs.length === 0) return out;
    const input = `${pairs.map(([a, b]) => `${a} ${b}`).join("\n")}\n`;
    const data = await this.git(["diff-tree", "--stdin", "-r", "-z", "--no-renames"], input, maxBytes, true);
    let current: DiffRecord[] | undefined;
    let at = 0;
    while (at < data.length) {
      if (data[at] === 0x3a /* ":" */) {
        const metaEnd = data.indexOf(0, at);
        const pathEnd = metaEnd < 0 ? -1 : data.indexOf(0, metaEnd + 1);
        if (pathEnd < 0 || !current) throw new ObjectReadError("git diff-tree's answer is cut short");
        const [srcMode, dstMode, , dstOid, status] = data.toString("latin1", at + 1, metaEnd).split(" ");
        current.push({
          path: data.toString("utf8", metaEnd + 1, pathEnd),
          srcMode: Number.parseInt(srcMode!, 8),
          dstMode: Number.parseInt(dstMode!, 8),
          dstOid: dstOid!,
          status: status!,
        });
        at = pathEnd + 1;
      } else {
        const newline = data.indexOf(10, at);
        if (newline < 0) throw new ObjectReadError("git diff-tree's answer is cut short");
        current = [];
        out.set(data.toString("latin1", at, newline), current);
        at = newline + 1;
      }
    }
    for (const [a, b] of pairs) if (!out.has(`${a} ${b}`)) throw new ObjectReadError("git diff-tree left a pair out");
    return out;
  }

  /**
   * Adds loose objects (files of ours: copy mode's staged copies, already checked against their
   * names) to the private repository as one pack (`index-pack --stdin`, which hashes each again):
   * two files instead of a link per object. Blobs are left out unless `wanted` names them: the
   * checks read commits, tags and trees, and ask a blob only for its type when a ref names it.
   */
  async importLoose(objects: ReadonlyArray<{ oid: string; file: string }>, wanted: ReadonlySet<string>): Promise<void> {
    const entries: Buffer[] = [];
    let count = 0;
    let bytes = 0;
    for (const { oid, file } of objects) {
      const object = readLoose(file, wanted.has(oid));
      if (!object) continue;
      bytes += object.content.length;
      if (bytes > MAX_IMPORT_BYTES) throw new ObjectReadError("the run's new commits and trees are too large to read");
      entries.push(packEntryHeader(object.type, object.content.length), zlib.deflateSync(object.content, { level: 1 }));
      count++;
    }
    if (count === 0) return;
    const header = Buffer.alloc(12);
    header.write("PACK", 0, "latin1");
    header.writeUInt32BE(2, 4);
    header.writeUInt32BE(count, 8);
    const body = Buffer.concat([header, ...entries]);
    const pack = Buffer.concat([body, crypto.createHash(this.format).update(body).digest()]);
    await this.git(["index-pack", "--stdin"], pack, 1024 * 1024);
  }

  dispose(): void {
    for (const fd of this.owned.splice(0)) fs.closeSync(fd);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async git(args: string[], input: string | Buffer, maxBytes: number, quietStderr = false): Promise<Buffer> {
    const result = await hostGit(args, {
      cwd: this.dir,
      home: path.join(this.dir, "home"),
      gitDir: path.join(this.dir, "git"),
      config: EXTRA_CONFIG,
      fds: this.fds,
      input,
      timeoutMs: TIMEOUT_MS,
      maxOutputBytes: maxBytes,
    }).catch((error: NodeJS.ErrnoException) => {
      throw new ObjectReadError(
        error.code === "ENOENT" ? "the host's git is needed to check it and is not installed" : error.message,
      );
    });
    // Never git's words: they quote what it read (a line of a host file a link led it to).
    if (result.status !== 0 || (quietStderr && result.stderr.trim() !== ""))
      throw new ObjectReadError(
        result.status !== 0 ? `git ${args[0]} failed (exit ${result.status})` : `git ${args[0]} reported a problem`,
      );
    return result.stdout;
  }
}

/**
 * The stores to read, each as a directory fd: those given, then those their alternates name
 * (git's depth, MAX_ALTERNATE_STORES in all), read through fds (git-alternates.ts). A store named
 * by path (copy mode's: the host's own, private links) is opened here too.
 */
function storeChain(stores: readonly ObjectStore[]): { fds: number[]; owned: number[] } {
  const fds: number[] = [];
  const owned: number[] = [];
  const seen = new Set<string>();
  const add = (fd: number, mine: boolean): boolean => {
    const { dev, ino } = fs.fstatSync(fd);
    if (seen.has(`${dev}:${ino}`)) {
      if (mine) fs.closeSync(fd);
      return false;
    }
    seen.add(`${dev}:${ino}`);
    fds.push(fd);
    if (mine) owned.push(fd);
    return true;
  };
  try {
    let level: number[] = [];
    for (const store of stores) {
      const fd = "fd" in store ? store.fd : fs.openSync(store.path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      if (add(fd, !("fd" in store))) level.push(fd);
    }
    for (let depth = 0; depth < MAX_ALTERNATES_DEPTH && level.length > 0; depth++) {
      const next: number[] = [];
      for (const storeFd of level) {
        const text = readAlternatesAt(storeFd);
        if (text === undefined) continue;
        for (const named of parseAlternates(text, fs.readlinkSync(`/proc/self/fd/${storeFd}`))) {
          if (fds.length >= stores.length + MAX_ALTERNATE_STORES)
            throw new ObjectReadError(`the repository borrows objects from more than ${MAX_ALTERNATE_STORES} stores`);
          let fd: number;
          try {
            // O_PATH: a FIFO or device named there is never opened for reading.
            fd = fs.openSync(named, O_PATH_DIRECTORY);
          } catch {
            continue; // not there: git would skip it too
          }
          if (add(fd, true)) next.push(fd);
        }
      }
      level = next;
    }
    return { fds, owned };
  } catch (error) {
    for (const fd of owned) fs.closeSync(fd);
    throw error;
  }
}

const O_PATH_DIRECTORY = O_PATH | fs.constants.O_DIRECTORY;

/** A private object store at `dir`: links to `into`'s pack folder and its 256 fan-out folders, and nothing else. */
function shadowStore(dir: string, into: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.symlinkSync(`${into}/pack`, path.join(dir, "pack"));
  for (let i = 0; i < 256; i++) {
    const fan = i.toString(16).padStart(2, "0");
    fs.symlinkSync(`${into}/${fan}`, path.join(dir, fan));
  }
  return dir;
}

/** A loose object file's type and content; undefined for a blob nobody asked for. */
function readLoose(file: string, wanted: boolean): { type: string; content: Buffer } | undefined {
  const data = fs.readFileSync(file);
  const typeOf = (raw: Buffer) => raw.toString("latin1", 0, Math.max(0, raw.indexOf(32)));
  if (!wanted && data.length > PEEK_ABOVE_BYTES) {
    // Only the start, to learn the type: a large blob is not inflated at all.
    const head = zlib.inflateSync(data.subarray(0, 4096), {
      finishFlush: zlib.constants.Z_SYNC_FLUSH,
      maxOutputLength: 8 * 1024 * 1024,
    });
    if (typeOf(head) === "blob") return undefined;
  }
  const raw = zlib.inflateSync(data, { maxOutputLength: MAX_IMPORT_BYTES });
  const nul = raw.indexOf(0);
  const type = typeOf(raw);
  if (nul < 0 || PACK_TYPES[type] === undefined) throw new ObjectReadError("a loose object that does not read");
  return type === "blob" && !wanted ? undefined : { type, content: raw.subarray(nul + 1) };
}

/** A pack entry's header: the type and size, 4 bits of size then 7 a byte, lowest first. */
function packEntryHeader(type: string, size: number): Buffer {
  const bytes: number[] = [];
  let byte = (PACK_TYPES[type]! << 4) | (size & 0x0f);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Buffer.from(bytes);
}
