// Reads the returned tar's entries, header by header, for returned-tar.ts. The bytes come from the
// relay in the sandbox, which runs as the same uid as the model's tools: any byte may be hostile.
//
// Why not tar-stream (used elsewhere for images we built): it takes pax global ('g') and GNU long
// name ('L', 'K', 'N') headers of up to 4 MiB and merges a global header's records into every later
// entry synchronously, seconds of CPU per entry on the controller's one event loop. A filter in
// front of it would have to step through the archive exactly as it does (its null blocks, its
// skipping of a directory's content) or the two would read different bytes as headers. So this one
// reader is our own: it understands what the relay's writer (images/pi/relay.mjs, `header()`)
// produces, ustar headers each after at most one pax header ('x') of path, linkpath, size and our
// own records, and refuses those extensions by name. Pulled, never pushed: the next bytes are read
// when the caller asks for the next entry or more content, so at most one chunk is held.

import { decodeName } from "../util/name-bytes.js";

const BLOCK = 512;
/** A pax header's body at most: the relay's hold a path and a link target of 4 KiB each, a size and our flag. */
export const MAX_PAX_BYTES = 64 * 1024;
const EMPTY: Buffer = Buffer.alloc(0);

/** What honest writers never produce: the caller fails the whole copy-out with this message. */
export class TarRefusal extends Error {}

export interface TarEntryHeader {
  /** Relative as written (UTF-8 decoded; bytes that are not UTF-8 escaped: util/name-bytes.ts). */
  name: string;
  /** tar-stream's names ("file", "directory", "symlink", "link", "fifo", ...); undefined for a type of no known meaning. */
  type: string | undefined;
  mode: number;
  size: number;
  mtimeMs: number;
  linkname: string;
  /** The pax records before this header, by key (unknown keys included, values as UTF-8). */
  pax: Record<string, string>;
}

export interface TarEntry {
  header: TarEntryHeader;
  /** The entry's content, in pieces; what the caller leaves unread is skipped before the next entry. */
  content: AsyncIterable<Buffer>;
}

const TYPES: Record<string, string> = {
  "\0": "file",
  "0": "file",
  "1": "link",
  "2": "symlink",
  "3": "character-device",
  "4": "block-device",
  "5": "directory",
  "6": "fifo",
  "7": "contiguous-file",
};

/** Header types that carry metadata for other entries: the relay writes none of them. */
const REFUSED_TYPES: Record<string, string> = {
  g: "a pax global header ('g')",
  L: "a GNU long name header ('L')",
  K: "a GNU long link name header ('K')",
  N: "an old GNU long names header ('N')",
};

export async function* readTarEntries(archive: AsyncIterable<Buffer>): AsyncGenerator<TarEntry> {
  const reader = new ChunkReader(archive[Symbol.asyncIterator]());
  let pax: Record<string, string> | undefined;
  for (;;) {
    const block = await reader.exactly(BLOCK, true);
    if (block === undefined) {
      if (pax) throw new TarRefusal("it ends right after a pax header");
      return;
    }
    // Zero blocks end an archive; the relay writes two and then nothing, and any entry after them
    // is read like any other (as tar-stream did).
    if (isZeros(block)) continue;
    const flag = String.fromCharCode(block[156]!);
    checkHeaderBlock(block, flag);
    const ustarSize = numberField(block, 124, 12);
    if (flag === "x") {
      if (pax) throw new TarRefusal("it has two pax headers in a row");
      if (ustarSize > MAX_PAX_BYTES) {
        throw new TarRefusal(`it has a pax header of ${ustarSize} bytes (at most ${MAX_PAX_BYTES} are read)`);
      }
      pax = paxRecords(await reader.exactly(ustarSize));
      await reader.skip(padding(ustarSize));
      continue;
    }
    const records = pax ?? {};
    pax = undefined;
    const header: TarEntryHeader = {
      name: records.path ?? nameOf(block),
      type: TYPES[flag],
      mode: numberField(block, 100, 8),
      size: records.size === undefined ? ustarSize : paxSize(records.size),
      mtimeMs: numberField(block, 136, 12) * 1000,
      linkname: records.linkpath ?? text(block, 157, 100),
      pax: records,
    };
    const content = new EntryContent(reader, header.size);
    yield { header, content };
    await content.skipRest();
  }
}

/** The checks on a header block before anything of it is believed. */
function checkHeaderBlock(block: Buffer, flag: string): void {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
  if (sum !== numberField(block, 148, 8)) throw new TarRefusal("a header's checksum is wrong");
  // "ustar\0" (POSIX; what the relay writes) or "ustar " (GNU).
  if (block.toString("latin1", 257, 262) !== "ustar") throw new TarRefusal("a header is not a ustar header");
  const refused = REFUSED_TYPES[flag];
  if (refused) throw new TarRefusal(`it holds ${refused}, which the relay never writes`);
}

/** The ustar name, with the POSIX prefix field in front when there is one. */
function nameOf(block: Buffer): string {
  const name = text(block, 0, 100);
  const posix = block[262] === 0;
  return posix && block[345] !== 0 ? `${text(block, 345, 155)}/${name}` : name;
}

/** A NUL-terminated field as UTF-8, bad bytes escaped (a fresh string: nothing keeps the block alive). */
function text(block: Buffer, start: number, length: number): string {
  const end = block.indexOf(0, start);
  return decodeName(block, start, end === -1 || end > start + length ? start + length : end).name;
}

/** An octal field (spaces and NULs around it), or GNU's base-256 form (high bit set) for large values. */
function numberField(block: Buffer, start: number, length: number): number {
  if (block[start]! & 0x80) {
    if (block[start] !== 0x80) throw new TarRefusal("a header holds a negative number");
    let value = 0;
    for (let i = start + 1; i < start + length; i++) value = value * 256 + block[i]!;
    if (!Number.isSafeInteger(value)) throw new TarRefusal("a header holds a number too large to be true");
    return value;
  }
  const digits = block
    .toString("latin1", start, start + length)
    .replace(/\0.*$/s, "")
    .trim();
  if (!/^[0-7]*$/.test(digits)) throw new TarRefusal("a header's number field is not octal");
  return digits === "" ? 0 : Number.parseInt(digits, 8);
}

function paxSize(value: string): number {
  const size = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(size)) throw new TarRefusal("a pax size is not a number");
  return size;
}

/**
 * "<length> <key>=<value>\n" records. Each value is decoded on its own (a string sliced from the
 * whole body would keep the body alive for as long as the host keeps the name).
 */
function paxRecords(body: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  for (let at = 0; at < body.length; ) {
    const space = body.indexOf(0x20, at);
    const length = space === -1 ? Number.NaN : Number(body.toString("latin1", at, space));
    const end = at + length;
    const equals = space === -1 ? -1 : body.indexOf(0x3d, space);
    if (
      !Number.isSafeInteger(length) ||
      end > body.length ||
      body[end - 1] !== 0x0a ||
      equals === -1 ||
      equals >= end
    ) {
      // Trailing NULs pad some writers' bodies; anything else is not a record.
      if (body.subarray(at).every((byte) => byte === 0)) break;
      throw new TarRefusal("a pax header's records are malformed");
    }
    // Values as names are: a path that is not UTF-8 must not read as a real name holding U+FFFD.
    records[body.toString("utf8", space + 1, equals)] = decodeName(body, equals + 1, end - 1).name;
    at = end;
  }
  return records;
}

function isZeros(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

function padding(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

/** One entry's content: `size` bytes, then the padding to the next block. */
class EntryContent implements AsyncIterable<Buffer> {
  #left: number;
  constructor(
    private readonly reader: ChunkReader,
    private readonly size: number,
  ) {
    this.#left = size;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    while (this.#left > 0) {
      const piece = await this.reader.upTo(this.#left);
      this.#left -= piece.length;
      yield piece;
    }
  }

  async skipRest(): Promise<void> {
    await this.reader.skip(this.#left + padding(this.size));
    this.#left = 0;
  }
}

/** The archive's chunks as a byte stream the reader pulls from. */
class ChunkReader {
  #pending: Buffer = EMPTY;
  constructor(private readonly chunks: AsyncIterator<Buffer>) {}

  /** Up to `max` bytes (at least one); the archive ending here is a truncated entry. */
  async upTo(max: number): Promise<Buffer> {
    while (this.#pending.length === 0) {
      const next = await this.chunks.next();
      if (next.done) throw new TarRefusal("it is not a complete tar archive (it ends inside an entry)");
      this.#pending = next.value;
    }
    const piece = this.#pending.subarray(0, max);
    this.#pending = this.#pending.subarray(piece.length);
    return piece;
  }

  /** Exactly `size` bytes; undefined when `endOk` and the archive ended before the first of them. */
  async exactly(size: number, endOk: true): Promise<Buffer | undefined>;
  async exactly(size: number): Promise<Buffer>;
  async exactly(size: number, endOk = false): Promise<Buffer | undefined> {
    if (endOk && this.#pending.length === 0) {
      const next = await this.chunks.next();
      if (next.done) return undefined;
      this.#pending = next.value;
    }
    if (this.#pending.length >= size) return this.upTo(size);
    const pieces: Buffer[] = [];
    for (let got = 0; got < size; ) {
      const piece = await this.upTo(size - got);
      pieces.push(piece);
      got += piece.length;
    }
    return Buffer.concat(pieces, size);
  }

  async skip(size: number): Promise<void> {
    for (let left = size; left > 0; ) left -= (await this.upTo(left)).length;
  }
}
