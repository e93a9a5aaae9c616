// The before-run snapshot of a tree as a compact file in the run's private folder, written in
// walk order and read back sequentially, so a tree of any size costs a few buffers of memory.
// One record per entry (little-endian):
//   u8   kind | 0x10 hash present | 0x20 gitLike | 0x40 symlink target present
//   u16  depth, u16 name length, name (UTF-8)
//   u32  st_mode, f64 size, f64 mtimeMs, f64 ctimeMs, f64 ino
//   [32 bytes sha256] or [u16 length, symlink target (UTF-8)]
// A path is rebuilt from the depth and the names of the records before it.
import fs from "node:fs";
import type { EntryKind } from "./fd-walk.js";
import type { EntryFacts } from "./workspace-rules.js";

const KINDS: EntryKind[] = ["file", "directory", "symlink", "fifo", "socket", "device", "unknown"];
const HAS_HASH = 0x10;
const GIT_LIKE = 0x20;
const HAS_TARGET = 0x40;
const CHUNK = 1 << 20;
const FIXED = 1 + 2 + 2 + 4 + 8 * 4;

interface RecordedEntry {
  path: string;
  facts: EntryFacts;
}

export class SnapshotWriter {
  private readonly fd: number;
  private buffer = Buffer.allocUnsafe(CHUNK);
  private used = 0;

  constructor(readonly file: string) {
    this.fd = fs.openSync(file, "wx", 0o600);
  }

  write(depth: number, name: string, facts: EntryFacts): void {
    const nameBytes = Buffer.byteLength(name);
    const target = facts.kind === "symlink" && facts.hash !== undefined ? facts.hash : undefined;
    const targetBytes = target === undefined ? 0 : Buffer.byteLength(target);
    const size = FIXED + nameBytes + (target !== undefined ? 2 + targetBytes : facts.hash ? 32 : 0);
    if (this.used + size > this.buffer.length) this.flush();
    if (size > this.buffer.length) this.buffer = Buffer.allocUnsafe(size);
    const b = this.buffer;
    let o = this.used;
    let flags = KINDS.indexOf(facts.kind);
    if (target !== undefined) flags |= HAS_TARGET;
    else if (facts.hash) flags |= HAS_HASH;
    if (facts.gitLike) flags |= GIT_LIKE;
    o = b.writeUInt8(flags, o);
    o = b.writeUInt16LE(depth, o);
    o = b.writeUInt16LE(nameBytes, o);
    o += b.write(name, o, "utf8");
    o = b.writeUInt32LE(facts.mode >>> 0, o);
    o = b.writeDoubleLE(facts.size, o);
    o = b.writeDoubleLE(facts.mtimeMs ?? 0, o);
    o = b.writeDoubleLE(facts.ctimeMs ?? 0, o);
    o = b.writeDoubleLE(facts.ino ?? 0, o);
    if (target !== undefined) {
      o = b.writeUInt16LE(targetBytes, o);
      o += b.write(target, o, "utf8");
    } else if (facts.hash) {
      o += b.write(facts.hash, o, "hex");
    }
    this.used = o;
  }

  close(): void {
    this.flush();
    fs.closeSync(this.fd);
  }

  private flush(): void {
    let written = 0;
    while (written < this.used) written += fs.writeSync(this.fd, this.buffer, written, this.used - written);
    this.used = 0;
  }
}

export class SnapshotReader {
  private readonly fd: number;
  private buffer = Buffer.allocUnsafe(CHUNK);
  private start = 0;
  private end = 0;
  private eof = false;
  private readonly paths: string[] = [];

  constructor(file: string) {
    this.fd = fs.openSync(file, "r");
  }

  /** The next entry, or undefined at the end. */
  next(): RecordedEntry | undefined {
    if (!this.ensure(FIXED)) return undefined;
    const b = this.buffer;
    const nameBytes = b.readUInt16LE(this.start + 3);
    const flags = b.readUInt8(this.start);
    const tailFixed = flags & HAS_HASH ? 32 : flags & HAS_TARGET ? 2 : 0;
    if (!this.ensure(FIXED + nameBytes + tailFixed)) throw new Error("truncated snapshot record");
    let o = this.start + 1;
    const depth = b.readUInt16LE(o);
    o += 4;
    const name = b.toString("utf8", o, o + nameBytes);
    o += nameBytes;
    const facts: EntryFacts = {
      kind: KINDS[flags & 0x0f] ?? "unknown",
      mode: b.readUInt32LE(o),
      size: b.readDoubleLE(o + 4),
      mtimeMs: b.readDoubleLE(o + 12),
      ctimeMs: b.readDoubleLE(o + 20),
      ino: b.readDoubleLE(o + 28),
    };
    o += 36;
    if (flags & GIT_LIKE) facts.gitLike = true;
    if (flags & HAS_HASH) {
      facts.hash = b.toString("hex", o, o + 32);
      o += 32;
    } else if (flags & HAS_TARGET) {
      const length = b.readUInt16LE(o);
      const consumed = o - this.start + 2;
      if (!this.ensure(consumed + length)) throw new Error("truncated snapshot record");
      o = this.start + consumed;
      facts.hash = this.buffer.toString("utf8", o, o + length);
      o += length;
    }
    this.start = o;
    const parent = depth <= 1 ? "" : this.paths[depth - 1]!;
    const path = depth === 0 ? "" : parent === "" ? name : `${parent}/${name}`;
    this.paths[depth] = path;
    return { path, facts };
  }

  close(): void {
    fs.closeSync(this.fd);
  }

  /** Makes `bytes` bytes available from `start`; false at a clean end of file. */
  private ensure(bytes: number): boolean {
    while (this.end - this.start < bytes) {
      if (this.eof) {
        if (this.end === this.start) return false;
        throw new Error("truncated snapshot record");
      }
      if (this.start > 0) {
        this.buffer.copy(this.buffer, 0, this.start, this.end);
        this.end -= this.start;
        this.start = 0;
      }
      if (bytes > this.buffer.length) {
        const bigger = Buffer.allocUnsafe(bytes + CHUNK);
        this.buffer.copy(bigger, 0, 0, this.end);
        this.buffer = bigger;
      }
      const read = fs.readSync(this.fd, this.buffer, this.end, this.buffer.length - this.end, null);
      if (read === 0) this.eof = true;
      this.end += read;
    }
    return true;
  }
}
