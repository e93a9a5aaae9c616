// The undo journal of copy mode's apply (apply-journal.ts) on disk, so that an apply whose
// controller was killed half way is undone by the next reaper (dead-apply.ts) as the live undo does
// it. `journal` in the private staging directory: a header line (the tree, its root's inode), then
// one JSON array a line, each written with one write(2) before the step it undoes is taken (and, for
// what the apply makes, one more with the inode made), so a kill between a step and its line cannot
// leave a step nobody knows of. No fsync: the threat is a killed controller, not a power loss.
// `["c"]` is the commit point (everything is in; what waits aside may go; an apply undone after it,
// another tree of the run failing, cuts it away first), `["u"]` says the live controller undid it
// itself.
// Version 2 (session 36): a new file is made under a hidden name next to its place, its inode
// journaled (`P`), and only then renamed into place, so an entry at a place whose inode the journal
// does not name is never the apply's. Version 1 journaled the inode (`F`) only once the file was in
// its place: a `f` with no `F` after it leaves unknown whose the entry at the place is (the reaper
// leaves it, and says so). Both are read; this code writes version 2.
// The file is ours, in a folder only we can write, and still read as untrusted: a record naming a
// path that is not a plain relative path (empty, `.`, `..`, absolute), an aside name that is not a
// number, a hidden name that is not the apply's, or anything malformed refuses the whole journal.
import fs from "node:fs";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import { atTextPath } from "../workspace/fd-walk.js";
import type { Identity } from "./tree-dirs.js";

export const JOURNAL_FILE = "journal";
/** Hidden names the apply gives entries it moves aside next to their place, and new files on their way in. */
export const BESIDE_NAME = /^\.sandbox-run-aside-[0-9a-f]{16}$/;
export const TEMPORARY_NAME = /^\.sandbox-run-[0-9a-f]{12}$/;
const ASIDE_NAME = /^[1-9][0-9]{0,15}$/;
/**
 * The most a reaper reads: a journal past it is refused whole (nothing undone, the staging directory
 * kept; gc says so). A line is about 50 to 100 bytes, three per entry at most: an apply of half a
 * million entries or more (fewer with long names; a control character the sandbox put in a name is
 * 6 bytes of JSON). Read a chunk at a time and parsed a line at a time, such a journal costs a reaper
 * at most about 1.1 GB of memory and 12 s to read and replay (lines of 3-character names, the most
 * records a byte; security.md CM10).
 */
export const MAX_JOURNAL_BYTES = 128 * 1024 * 1024;
/** The longest line read, in characters: a path of 4096 control characters is 24 KiB of JSON. */
const MAX_LINE_CHARS = 1024 * 1024;
const CHUNK_BYTES = 1024 * 1024;
/** The journal format this code writes (see the top), and the record kinds each version holds. */
const VERSION = 2;
const VERSION_KINDS: Record<number, string> = { 1: "tabdDfFmcu", 2: "tabdDfFpPmcu" };

type Flag = 0 | 1;
export type JournalRecord =
  /** A folder's times before its first change, and its inode: rel, atime, mtime (s), dev, ino. */
  | ["t", string, number, number, number, number]
  /** Moved into the aside folder as `n`: rel, n, directory, its folder's dev, ino. */
  | ["a", string, string, Flag, number, number]
  /** Moved to a hidden name in its folder: rel, name, directory, its folder's dev, ino. */
  | ["b", string, string, Flag, number, number]
  /** A folder is made (rel, its folder's dev, ino); then made: rel, its own dev, ino. */
  | ["d", string, number, number]
  | ["D", string, number, number]
  /** Version 1: a file is put (rel, its temporary name, its folder's dev, ino); then put: rel, dev, ino, size, mtimeMs. */
  | ["f", string, string, number, number]
  | ["F", string, number, number, number, number]
  /**
   * A file is put: rel, the name it may be written under first, the name it arrives under (both
   * hidden, in its folder), its folder's dev, ino; then, before it takes its place: rel, dev, ino,
   * size, mtimeMs of what arrived.
   */
  | ["p", string, string, string, number, number]
  | ["P", string, number, number, number, number]
  /** A mode set: rel, directory, the mode it had, the mode set, its dev, ino. */
  | ["m", string, Flag, number, number, number, number]
  | ["c"]
  | ["u"];

/** Appends the records of one apply (see the top); `close()` once it is final either way. */
export class JournalWriter {
  #fd: number | undefined;

  constructor(dir: string, root: string, rootIdentity: Identity) {
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_APPEND } = fs.constants;
    this.#fd = fs.openSync(path.join(dir, JOURNAL_FILE), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND, 0o600);
    this.#write(`${JSON.stringify({ v: VERSION, root, dev: rootIdentity.dev, ino: rootIdentity.ino })}\n`);
  }

  append(record: JournalRecord): void {
    this.#write(`${JSON.stringify(record)}\n`);
  }

  close(): void {
    if (this.#fd !== undefined) fs.closeSync(this.#fd);
    this.#fd = undefined;
  }

  /** The journal's length after its last whole record. */
  #length = 0;

  /** Where the next record begins: what takeBack() cuts the journal back to. */
  get length(): number {
    return this.#length;
  }

  /**
   * Takes back every record from `length` (one ftruncate, needing no disk space: they are all gone
   * or all still there, each whole). Throws when the journal cannot be cut.
   */
  takeBack(length: number): void {
    if (this.#fd === undefined) throw new Error("the apply's journal is closed");
    fs.ftruncateSync(this.#fd, length);
    this.#length = length;
  }

  #write(line: string): void {
    if (this.#fd === undefined) throw new Error("the apply's journal is closed");
    const bytes = Buffer.from(line);
    try {
      for (let off = 0; off < bytes.length; ) off += fs.writeSync(this.#fd, bytes, off, bytes.length - off);
    } catch (error) {
      // A record is whole or absent: a commit record cut short by a full disk must not read as one
      // later (a reaper would keep an apply this process undid).
      try {
        fs.ftruncateSync(this.#fd, this.#length);
      } catch {
        // A torn last line is not a record either (the reader skips it).
      }
      throw error;
    }
    this.#length += bytes.length;
  }
}

/** A journal that is not what this code writes: nothing it says is done. `tree`: the one its header names. */
export class JournalRefused extends Error {
  constructor(
    message: string,
    readonly tree?: string,
  ) {
    super(message);
  }
}

export interface ReadJournal {
  /** The format it was written in (see the top). */
  version: 1 | 2;
  root: string;
  rootIdentity: Identity;
  records: JournalRecord[];
}

/**
 * The journal in the staging directory `stagingFd` holds (undefined: none, an apply never began or
 * a version before journals); a JournalRefused when it is not one this code wrote. A last line cut
 * short (no newline) is a write the kill stopped: left out. Opened without following a link or
 * waiting on a FIFO, read a chunk at a time (MAX_JOURNAL_BYTES bounds it).
 */
export function readJournal(stagingFd: number): ReadJournal | undefined {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(atTextPath(stagingFd, JOURNAL_FILE), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new JournalRefused(`its journal cannot be opened (${(error as NodeJS.ErrnoException).code})`);
  }
  let header: Omit<ReadJournal, "records"> | undefined;
  const records: JournalRecord[] = [];
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.uid !== process.geteuid?.() || (stat.mode & 0o022) !== 0)
      throw new JournalRefused("its journal is not a private file of this user's");
    let lineNumber = 0;
    forEachLine(fd, (line) => {
      lineNumber++;
      if (header === undefined) {
        header = readHeader(parse(line));
        // Said by its size, before the rest is read.
        if (stat.size > MAX_JOURNAL_BYTES)
          throw new JournalRefused("its journal is larger than any apply writes", header.root);
        return;
      }
      const record = parse(line, header.root);
      const problem = recordProblem(record, header.version);
      if (problem) throw new JournalRefused(`line ${lineNumber} of its journal: ${problem}`, header.root);
      records.push(record as JournalRecord);
    });
  } finally {
    fs.closeSync(fd);
  }
  if (header === undefined) throw new JournalRefused("its journal has no header");
  return { ...header, records };
}

/** Calls `line` with each whole line of the file `fd` (a last one with no newline is left out). */
function forEachLine(fd: number, line: (text: string) => void): void {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  // Decodes a character cut by a chunk's end with the next chunk.
  const decoder = new StringDecoder("utf8");
  let carry = "";
  let total = 0;
  for (let n = fs.readSync(fd, chunk, 0, CHUNK_BYTES, null); n > 0; n = fs.readSync(fd, chunk, 0, CHUNK_BYTES, null)) {
    total += n;
    if (total > MAX_JOURNAL_BYTES) throw new JournalRefused("its journal is larger than any apply writes");
    const lines = (carry + decoder.write(chunk.subarray(0, n))).split("\n");
    carry = lines.pop()!;
    if (carry.length > MAX_LINE_CHARS)
      throw new JournalRefused("its journal holds a line longer than any apply writes");
    for (const text of lines) line(text);
  }
}

function readHeader(header: unknown): Omit<ReadJournal, "records"> {
  if (!isObject(header) || (header.v !== 1 && header.v !== 2)) throw new JournalRefused("its journal has no header");
  const root = header.root;
  if (typeof root !== "string" || !path.isAbsolute(root) || path.resolve(root) !== root || root.includes("\0"))
    throw new JournalRefused("its journal names no absolute tree");
  const rootIdentity = { dev: header.dev, ino: header.ino };
  if (!isNumber(rootIdentity.dev) || !isNumber(rootIdentity.ino))
    throw new JournalRefused("its journal's header names no inode", root);
  return { version: header.v, root, rootIdentity: rootIdentity as Identity };
}

/** Why a parsed line is not a record this code writes in `version` (undefined: it is one). */
function recordProblem(r: unknown, version: number): string | undefined {
  if (!Array.isArray(r) || typeof r[0] !== "string") return "not a record";
  const shape: Record<string, string> = {
    t: "pnnnn",
    a: "pAfnn",
    b: "pBfnn",
    d: "pnn",
    D: "pnn",
    f: "pTnn",
    F: "pnnnn",
    p: "pTTnn",
    P: "pnnnn",
    m: "pfnnnn",
    c: "",
    u: "",
  };
  const kinds = r[0].length === 1 && VERSION_KINDS[version]?.includes(r[0]) ? shape[r[0]] : undefined;
  if (kinds === undefined || r.length !== kinds.length + 1) return `an unknown record (${String(r[0]).slice(0, 10)})`;
  for (let i = 0; i < kinds.length; i++) {
    const v = r[i + 1];
    const ok =
      kinds[i] === "p"
        ? isTreePath(v) || ((r[0] === "t" || r[0] === "m") && v === "")
        : kinds[i] === "n"
          ? isNumber(v)
          : kinds[i] === "f"
            ? v === 0 || v === 1
            : kinds[i] === "A"
              ? typeof v === "string" && ASIDE_NAME.test(v)
              : kinds[i] === "B"
                ? typeof v === "string" && BESIDE_NAME.test(v)
                : typeof v === "string" && TEMPORARY_NAME.test(v);
    if (!ok) return `a path or name outside the tree or the aside folder (${JSON.stringify(v)?.slice(0, 200)})`;
  }
  if (r[0] === "m" && !((r[3] as number) <= 0o7777 && (r[4] as number) <= 0o7777)) return "a mode out of range";
  return undefined;
}

/** A path below the root: relative, "/"-separated, no empty, `.` or `..` part, no NUL. */
export function isTreePath(v: unknown): v is string {
  return (
    typeof v === "string" &&
    v !== "" &&
    !v.includes("\0") &&
    v.split("/").every((part) => part !== "" && part !== "." && part !== "..")
  );
}

function isNumber(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parse(line: string, tree?: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new JournalRefused("its journal holds a line that is not JSON", tree);
  }
}
