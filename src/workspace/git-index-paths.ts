// A git index (`.git/index`, `sharedindex.*`) read as data: every path it names, checked as git
// checks a path before it puts one into an index (read-cache.c verify_path). git itself does not
// check the paths of an index it reads: `git checkout -- .` and `git restore .` (what a person
// runs to throw a run's changes away) write every entry to its path relative to the worktree's
// top, so an index the sandbox wrote with `../../.bashrc`, `/etc/cron.d/x` or
// `.git/hooks/pre-commit` makes host git write there (checked with git 2.39). So an index the run
// created or changed must name only paths git would have put there itself.
//
// Format (Documentation/gitformat-index.txt): "DIRC", version 2/3/4, entry count; each entry 40
// bytes of stat data and mode, the object id (20 or 32 bytes: the repository's hash, which this
// pure function does not know, so both are tried), 16-bit flags (+16 bits when extended, v3+),
// then the name: NUL-terminated and padded to 8 bytes (v2/v3), or prefix-compressed against the
// previous name (v4). Then extensions; REUC (resolve-undo, which `git checkout -m` writes back)
// names paths too. A split index's main file names a replaced entry with an empty name. The cached
// trees (TREE) are what git commits without looking at the entries: git-cache-tree.ts checks them.

import { cacheTreeProblem } from "./git-cache-tree.js";

const CE_NAMEMASK = 0xfff;
const CE_EXTENDED = 0x4000;
const STAT_BYTES = 40;
const MODE_OFFSET = 24;
const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const S_IFDIR = 0o040000;
/** Names and extensions past this many entries are not read: the index is refused instead. */
const MAX_ENTRIES = 10_000_000;
/** A name git could check out (PATH_MAX); longer ones only cost the reader (a deep one, its stack). */
const MAX_NAME_BYTES = 4096;
/**
 * Bytes of names one read decodes in all: a version-4 index spells each name as a prefix of the
 * one before plus a suffix, so 64 bytes of index could make a copy of a 4 KiB name (a 1 MiB index,
 * gigabytes: review, session 24). A version-2 index holds its names as they are, within its size.
 */
const MAX_NAME_BYTES_IN_ALL = 64 * 1024 * 1024;

interface IndexEntry {
  name: Buffer;
  mode: number;
  /** The object id (resolve-undo records: absent). */
  oid?: Buffer;
  /** 16-bit flags, and the extended ones in the upper 16 bits (stage: bits 12-13; intent-to-add: 1 << 29). */
  flags?: number;
}

/** One layout's reading of an index. */
interface ReadIndex {
  entries: IndexEntry[];
  /** Paths of the resolve-undo records. */
  resolveUndo: IndexEntry[];
  /** A split index's main file (its entries complete the shared index's). */
  split: boolean;
  /** The cached trees (TREE extension), as stored. */
  cacheTree?: Buffer;
  hashBytes: number;
}

/** Why the index names a path git would not put there itself, or why it cannot be read; undefined when it is plain. */
export function indexProblem(content: Buffer): string | undefined {
  if (content.length < 12 || content.toString("latin1", 0, 4) !== "DIRC") return "not a git index (no DIRC header)";
  const version = content.readUInt32BE(4);
  if (version < 2 || version > 4) return `an index of version ${version}, which git does not write`;
  const count = content.readUInt32BE(8);
  if (count > MAX_ENTRIES) return `more than ${MAX_ENTRIES} entries`;
  // The repository's hash decides the layout; an index that reads under either is judged under both.
  let parsed = 0;
  let unread: string | undefined;
  for (const hashBytes of [20, 32]) {
    const read = readIndex(content, version, count, hashBytes);
    if (typeof read === "string") {
      unread ??= read;
      continue;
    }
    parsed++;
    // A split index's main file names a replaced entry with an empty name (it takes the shared one's).
    const named = read.split ? read.entries.filter((e) => e.name.length > 0) : read.entries;
    for (const entry of [...named, ...read.resolveUndo]) {
      const problem = entryPathProblem(entry);
      if (problem) return problem;
    }
    const trees = cacheTreeProblem(read);
    if (trees) return trees;
  }
  return parsed > 0 ? undefined : `an index git cannot read (${unread})`;
}

/**
 * The entries of an index under the repository's hash size (a split index's main file: the
 * entries it names), or undefined when it does not read as one.
 */
export function indexEntriesOf(content: Buffer, hashBytes: number): IndexEntry[] | undefined {
  if (content.length < 12 || content.toString("latin1", 0, 4) !== "DIRC") return undefined;
  const version = content.readUInt32BE(4);
  const count = content.readUInt32BE(8);
  if (version < 2 || version > 4 || count > MAX_ENTRIES) return undefined;
  const read = readIndex(content, version, count, hashBytes);
  return typeof read === "string" ? undefined : read.entries.filter((e) => e.name.length > 0);
}

/** The entries (and REUC paths) under one hash size, or why that layout does not read. */
function readIndex(content: Buffer, version: number, count: number, hashBytes: number): ReadIndex | string {
  const end = content.length - hashBytes;
  const entries: IndexEntry[] = [];
  let at = 12;
  let previous: Buffer = Buffer.alloc(0);
  let nameBytes = 0;
  for (let i = 0; i < count; i++) {
    if (at + STAT_BYTES + hashBytes + 2 > end) return "truncated";
    const mode = content.readUInt32BE(at + MODE_OFFSET);
    const oid = content.subarray(at + STAT_BYTES, at + STAT_BYTES + hashBytes);
    let flags = content.readUInt16BE(at + STAT_BYTES + hashBytes);
    let nameAt = at + STAT_BYTES + hashBytes + 2;
    let allFlags = flags;
    if (flags & CE_EXTENDED) {
      if (version < 3) return "an extended entry in a version 2 index";
      if (nameAt + 2 > end) return "truncated";
      allFlags |= content.readUInt16BE(nameAt) * 0x10000;
      nameAt += 2;
    }
    flags &= CE_NAMEMASK;
    let name: Buffer;
    let next: number;
    if (version === 4) {
      const varint = decodeVarint(content, nameAt, end);
      if (!varint) return "a bad name prefix";
      if (varint.value > previous.length) return "a name prefix longer than the previous name";
      const keep = previous.length - varint.value;
      const nul = content.indexOf(0, varint.next);
      if (nul < 0 || nul >= end) return "an unterminated name";
      const suffix = content.subarray(varint.next, nul);
      if (flags !== CE_NAMEMASK && flags !== keep + suffix.length) return "a name whose length does not match";
      if (keep + suffix.length > MAX_NAME_BYTES) return `a name longer than ${MAX_NAME_BYTES} bytes`;
      nameBytes += keep + suffix.length;
      if (nameBytes > MAX_NAME_BYTES_IN_ALL) return `names of more than ${MAX_NAME_BYTES_IN_ALL} bytes in all`;
      name = Buffer.concat([previous.subarray(0, keep), suffix]);
      next = nul + 1;
    } else {
      const nul = content.indexOf(0, nameAt);
      if (nul < 0 || nul >= end) return "an unterminated name";
      const length = flags === CE_NAMEMASK ? nul - nameAt : flags;
      // git copies `length` bytes as the name, and uses it as a C string: a NUL inside would hide the rest.
      if (nul - nameAt !== length) return "a name whose length does not match";
      if (length > MAX_NAME_BYTES) return `a name longer than ${MAX_NAME_BYTES} bytes`;
      name = content.subarray(nameAt, nul);
      // Entries are padded with NULs to a multiple of 8 bytes, at least one.
      next = at + ((nameAt - at + length + 8) & ~7);
      if (next > end) return "truncated";
    }
    entries.push({ name, mode, oid, flags: allFlags });
    previous = name;
    at = next;
  }
  // Extensions: a 4-byte signature, a 32-bit size, the data.
  const read: ReadIndex = { entries, resolveUndo: [], split: false, hashBytes };
  while (at + 8 <= end) {
    const signature = content.toString("latin1", at, at + 4);
    const size = content.readUInt32BE(at + 4);
    const data = at + 8;
    if (data + size > end) return "a truncated extension";
    if (signature === "link") read.split = true;
    if (signature === "TREE") read.cacheTree = content.subarray(data, data + size);
    if (signature === "REUC") {
      const reuc = readResolveUndo(content.subarray(data, data + size), hashBytes);
      if (typeof reuc === "string") return reuc;
      for (const entry of reuc) read.resolveUndo.push(entry); // as many as the index says: no spread
    }
    at = data + size;
  }
  return read;
}

/** REUC: per path, its name NUL, three octal modes each NUL-terminated, then an object id per non-zero mode. */
function readResolveUndo(data: Buffer, hashBytes: number): IndexEntry[] | string {
  const out: IndexEntry[] = [];
  let at = 0;
  while (at < data.length) {
    const nul = data.indexOf(0, at);
    if (nul < 0) return "a truncated resolve-undo record";
    const name = data.subarray(at, nul);
    at = nul + 1;
    let mode = 0;
    let objects = 0;
    for (let stage = 0; stage < 3; stage++) {
      const end = data.indexOf(0, at);
      if (end < 0) return "a truncated resolve-undo record";
      const text = data.toString("latin1", at, end);
      if (!/^[0-7]{1,7}$/.test(text)) return "a resolve-undo mode that is not octal";
      const stageMode = Number.parseInt(text, 8);
      at = end + 1;
      if (stageMode !== 0) {
        mode ||= stageMode;
        objects++;
      }
    }
    // The object ids of the stages that are there follow the three modes.
    at += objects * hashBytes;
    if (at > data.length) return "a truncated resolve-undo record";
    out.push({ name, mode });
  }
  return out;
}

/** git's varint (varint.c): 7 bits a byte, most significant first, each continuation adding one. */
function decodeVarint(buffer: Buffer, at: number, end: number): { value: number; next: number } | undefined {
  if (at >= end) return undefined;
  let c = buffer[at++]!;
  let value = c & 127;
  while (c & 128) {
    if (at >= end || value > 2 ** 40) return undefined;
    value += 1;
    c = buffer[at++]!;
    value = value * 128 + (c & 127);
  }
  return { value, next: at };
}

/** HFS+ ignores these code points in names (utf8.c is_hfs_dotgit): `.g\u200cit` is `.git` there. */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/**
 * Why git's verify_path (with core.protectNTFS and core.protectHFS on) refuses an entry's path: an
 * empty, `.` or `..` component, a leading or doubled `/`, a `.git` component in any case or in
 * the forms NTFS and HFS+ read as `.git`, a `.gitmodules` that is a symbolic link. A trailing `/`
 * only on a sparse index's directory entry.
 */
function entryPathProblem(entry: IndexEntry): string | undefined {
  const name = entry.name.toString("utf8");
  const shown = JSON.stringify(name.slice(0, 200));
  if (!Buffer.from(name, "utf8").equals(entry.name)) return `an entry whose name is not UTF-8 (${shown})`;
  const type = entry.mode & S_IFMT;
  const parts = name.split("/");
  if (type === S_IFDIR && parts.length > 1 && parts[parts.length - 1] === "") parts.pop();
  for (const part of parts) {
    if (part === "" || part === "." || part === "..")
      return `an entry ${shown}, which git would write outside its place (an empty, "." or ".." component)`;
    const folded = part.replace(HFS_IGNORED, "").toLowerCase();
    if (/^\.git(?:[. ]*|:.*)$/.test(folded) || folded === "git~1")
      return `an entry ${shown}, which git would write into a git directory`;
    if (type === S_IFLNK && (/^\.gitmodules(?:[. ]*|:.*)$/.test(folded) || folded === "gitmod~1"))
      return `an entry ${shown}, a .gitmodules that is a symbolic link`;
  }
  return undefined;
}
