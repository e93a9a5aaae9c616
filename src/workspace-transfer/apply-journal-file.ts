// The undo journal of copy mode's apply (apply-journal.ts) on disk, so that an apply whose
// controller was killed half way is undone by the next reaper (dead-apply.ts) as the live undo does
// it. `journal` in the private staging directory: a header line (the tree, its root's inode), then
// one JSON array a line, each written with one write(2) before the step it undoes is taken (and, for
// what the apply makes, one more after it with the inode made), so a kill between a step and its
// line cannot leave a step nobody knows of. No fsync: the threat is a killed controller, not a power
// loss. `["c"]` is the commit point (everything is in; what waits aside may go), `["u"]` says the
// live controller undid it itself.
// The file is ours, in a folder only we can write, and still read as untrusted: a record naming a
// path that is not a plain relative path (empty, `.`, `..`, absolute), an aside name that is not a
// number, a hidden name that is not the apply's, or anything malformed refuses the whole journal.
import fs from "node:fs";
import path from "node:path";
import { atTextPath } from "../workspace/fd-walk.js";
import type { Identity } from "./tree-dirs.js";

export const JOURNAL_FILE = "journal";
/** Hidden names the apply gives entries it moves aside next to their place, and new files on their way in. */
export const BESIDE_NAME = /^\.sandbox-run-aside-[0-9a-f]{16}$/;
export const TEMPORARY_NAME = /^\.sandbox-run-[0-9a-f]{12}$/;
const ASIDE_NAME = /^[1-9][0-9]{0,15}$/;
/** More than any apply writes (a line is about 100 bytes, three per entry at most). */
const MAX_JOURNAL_BYTES = 1024 * 1024 * 1024;

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
  /** A file is put (rel, its temporary name, its folder's dev, ino); then put: rel, dev, ino, size, mtimeMs. */
  | ["f", string, string, number, number]
  | ["F", string, number, number, number, number]
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
    this.#write(`${JSON.stringify({ v: 1, root, dev: rootIdentity.dev, ino: rootIdentity.ino })}\n`);
  }

  append(record: JournalRecord): void {
    this.#write(`${JSON.stringify(record)}\n`);
  }

  close(): void {
    if (this.#fd !== undefined) fs.closeSync(this.#fd);
    this.#fd = undefined;
  }

  #write(line: string): void {
    if (this.#fd === undefined) throw new Error("the apply's journal is closed");
    const bytes = Buffer.from(line);
    for (let off = 0; off < bytes.length; ) off += fs.writeSync(this.#fd, bytes, off, bytes.length - off);
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
  root: string;
  rootIdentity: Identity;
  records: JournalRecord[];
}

/**
 * The journal in the staging directory `stagingFd` holds (undefined: none, an apply never began or
 * a version before journals); a JournalRefused when it is not one this code wrote. A last line cut
 * short (no newline) is a write the kill stopped: left out.
 */
export function readJournal(stagingFd: number): ReadJournal | undefined {
  let fd: number;
  try {
    fd = fs.openSync(atTextPath(stagingFd, JOURNAL_FILE), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new JournalRefused(`its journal cannot be opened (${(error as NodeJS.ErrnoException).code})`);
  }
  let text: string;
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.uid !== process.geteuid?.() || (stat.mode & 0o022) !== 0)
      throw new JournalRefused("its journal is not a private file of this user's");
    if (stat.size > MAX_JOURNAL_BYTES) throw new JournalRefused("its journal is larger than any apply writes");
    text = fs.readFileSync(fd, "utf8");
  } finally {
    fs.closeSync(fd);
  }
  const lines = text.split("\n");
  lines.pop(); // "" after the last newline, or a line the kill cut short
  const header = parse(lines.shift());
  if (!isObject(header) || header.v !== 1) throw new JournalRefused("its journal has no header");
  const root = header.root;
  if (typeof root !== "string" || !path.isAbsolute(root) || path.resolve(root) !== root || root.includes("\0"))
    throw new JournalRefused("its journal names no absolute tree");
  const rootIdentity = { dev: header.dev, ino: header.ino };
  if (!isNumber(rootIdentity.dev) || !isNumber(rootIdentity.ino))
    throw new JournalRefused("its journal's header names no inode", root);
  const records = lines.map((line, i) => {
    const record = parse(line, root);
    const problem = recordProblem(record);
    if (problem) throw new JournalRefused(`line ${i + 2} of its journal: ${problem}`, root);
    return record as JournalRecord;
  });
  return { root, rootIdentity: rootIdentity as Identity, records };
}

/** Why a parsed line is not a record this code writes (undefined: it is one). */
function recordProblem(r: unknown): string | undefined {
  if (!Array.isArray(r) || typeof r[0] !== "string") return "not a record";
  const shape: Record<string, string> = {
    t: "pnnnn",
    a: "pAfnn",
    b: "pBfnn",
    d: "pnn",
    D: "pnn",
    f: "pTnn",
    F: "pnnnn",
    m: "pfnnnn",
    c: "",
    u: "",
  };
  const kinds = shape[r[0]];
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

function parse(line: string | undefined, tree?: string): unknown {
  if (line === undefined) return undefined;
  try {
    return JSON.parse(line);
  } catch {
    throw new JournalRefused("its journal holds a line that is not JSON", tree);
  }
}
