// Takes a secret's value back out of what an upstream answers, so a server that echoes the
// request (a debugging endpoint, an error page quoting the Authorization header) cannot hand
// the value to the sandbox. It replaces exact byte sequences: the value, its base64 at each of
// the three alignments base64 can put it at (inside a longer text, e.g. the `user:password` of a
// Basic credential, the value starts 0, 1 or 2 bytes into a 3-byte group), and the exact header
// values the proxy produced, with and without their scheme (`Basic <credential>` and the bare
// credential). A server that transforms the value otherwise (hex, reversed, split, encrypted) is
// out of its reach. Bodies are scanned as they stream, holding back just enough bytes to catch a
// match across chunk boundaries.
import { Transform, type TransformCallback } from "node:stream";

/**
 * A base64 character that encodes bits of the text next to the match as well as bits of the
 * secret: the secret's bits (`~keep`) are checked against `expect` and replaced by `bits`.
 */
interface EdgeChar {
  /** Bits (of the character's 6) that belong to the neighbouring text: kept. */
  keep: number;
  /** The secret's bits in that character, as the value puts them there. */
  expect: number;
  /** What goes in their place. */
  bits: number;
}

export interface Replacement {
  find: string;
  replace: string;
  /** The base64 character just before `find`, shared with the text before it. */
  before?: EdgeChar;
  /** The base64 character just after `find`, shared with the text after it. */
  after?: EdgeChar;
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_INDEX = new Map([...BASE64].map((char, index) => [char.charCodeAt(0), index]));

/**
 * What a secret's value may look like in an answer, each with what replaces it: the value (by its
 * placeholder), its whole base64 (by the placeholder's), and the part of its base64 that is the
 * same wherever it sits in a longer base64 text, at each of the three alignments (by the
 * placeholder's at the same alignment; the one or two characters it shares with its neighbours
 * lose the value's bits).
 */
export function secretForms(value: string, placeholder: string): Replacement[] {
  const forms: Replacement[] = [
    { find: value, replace: placeholder },
    { find: base64(Buffer.from(value, "latin1")), replace: base64(Buffer.from(placeholder, "latin1")) },
  ];
  for (const shift of [0, 1, 2]) forms.push(alignedBase64(value, placeholder, shift));
  return forms;
}

/** A header value the proxy produced, and its credential alone (`Basic xyz` -> also `xyz`). */
export function headerForms(produced: string, sent: string): Replacement[] {
  const forms: Replacement[] = [{ find: produced, replace: sent }];
  const a = /^\S+\s+(\S+)\s*$/.exec(produced);
  const b = /^\S+\s+(\S+)\s*$/.exec(sent);
  if (a && b && a[1] !== b[1]) forms.push({ find: a[1]!, replace: b[1]! });
  return forms;
}

/** `value` at `shift` bytes into a 3-byte group: its fixed base64 characters and the edge ones. */
function alignedBase64(value: string, placeholder: string, shift: number): Replacement {
  const v = encodeAt(Buffer.from(value, "latin1"), shift);
  const p = encodeAt(Buffer.from(placeholder, "latin1"), shift);
  const form: Replacement = { find: v.fixed, replace: p.fixed };
  if (v.lead) form.before = { keep: v.lead.keep, expect: v.lead.bits, bits: p.lead?.bits ?? 0 };
  // The placeholder may end at another alignment: the value's bits of the last character are cleared.
  if (v.tail) form.after = { keep: v.tail.keep, expect: v.tail.bits, bits: 0 };
  return form;
}

/**
 * The base64 of `bytes` preceded by `shift` bytes: the characters that depend on `bytes` alone,
 * and the leading and trailing characters shared with the bytes around (their `bytes` bits).
 */
function encodeAt(
  bytes: Buffer,
  shift: number,
): { fixed: string; lead?: { keep: number; bits: number }; tail?: { keep: number; bits: number } } {
  const text = base64(Buffer.concat([Buffer.alloc(shift), bytes])).replace(/=+$/, "");
  // shift 1: character 1 holds 2 bits before and 4 of the value; shift 2: character 2, 4 before and 2.
  const start = shift === 0 ? 0 : shift + 1;
  const lead = shift === 0 ? undefined : { keep: shift === 1 ? 0b110000 : 0b111100, bits: indexOf(text, shift) };
  const total = shift + bytes.length;
  const rest = total % 3;
  // rest 1: the last character holds 2 bits of the value and 4 after; rest 2: 4 of the value and 2 after.
  const end = rest === 0 ? text.length : text.length - 1;
  const tail =
    rest === 0
      ? undefined
      : {
          keep: rest === 1 ? 0b001111 : 0b000011,
          bits: indexOf(text, text.length - 1) & (rest === 1 ? 0b110000 : 0b111100),
        };
  return { fixed: text.slice(start, end), lead: lead && { ...lead, bits: lead.bits & ~lead.keep & 0b111111 }, tail };
}

function indexOf(text: string, at: number): number {
  return BASE64_INDEX.get(text.charCodeAt(at)) ?? 0;
}

function base64(bytes: Buffer): string {
  return bytes.toString("base64");
}

interface Needle {
  find: Buffer;
  replace: Buffer;
  before?: EdgeChar;
  after?: EdgeChar;
}

export function scrubText(text: string, replacements: readonly Replacement[]): string {
  const scanner = new Scanner(replacements);
  const out: Buffer[] = [];
  scanner.scan(Buffer.from(text, "latin1"), true, (part) => out.push(part));
  return Buffer.concat(out).toString("latin1");
}

/** A byte stream with every occurrence of each `find` replaced; the longest match wins. */
export class ScrubStream extends Transform {
  private readonly scanner: Scanner;
  private pending: Buffer = Buffer.alloc(0);

  constructor(replacements: readonly Replacement[]) {
    super();
    this.scanner = new Scanner(replacements);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const buffer = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = this.scanner.scan(buffer, false, (part) => this.push(part));
    done();
  }

  override _flush(done: TransformCallback): void {
    this.scanner.scan(this.pending, true, (part) => this.push(part));
    done();
  }
}

class Scanner {
  private readonly needles: Needle[];
  /** Bytes kept back for the next chunk: the longest needle and one character on each side. */
  readonly hold: number;

  constructor(replacements: readonly Replacement[]) {
    this.needles = longestFirst(replacements)
      .filter((r) => r.find !== "")
      .map((r) => ({
        find: Buffer.from(r.find, "latin1"),
        replace: Buffer.from(r.replace, "latin1"),
        ...(r.before ? { before: r.before } : {}),
        ...(r.after ? { after: r.after } : {}),
      }));
    this.hold = Math.max(0, ...this.needles.map((n) => n.find.length + 1));
  }

  /**
   * Emits `buffer` with the matches replaced, except what could still be (or border) a match when
   * more follows: that is returned, for the next call. A match is never closer than `hold` to the
   * start of a buffer that follows an earlier one, so the character before it is still here.
   */
  scan(buffer: Buffer, final: boolean, emit: (part: Buffer) => void): Buffer {
    let position = 0;
    while (true) {
      const best = this.next(buffer, position);
      if (!best) break;
      const { at, needle } = best;
      const end = at + needle.find.length;
      // The character after it decides its last one: wait for it unless the text ends here.
      if (needle.after && end >= buffer.length && !final) break;
      const lead = needle.before && at > position ? rewrittenEdge(buffer[at - 1]!, needle.before) : undefined;
      if (lead !== undefined) {
        if (at - 1 > position) emit(buffer.subarray(position, at - 1));
        emit(Buffer.from([lead]));
      } else if (at > position) emit(buffer.subarray(position, at));
      emit(needle.replace);
      position = end;
      const tail = needle.after && end < buffer.length ? rewrittenEdge(buffer[end]!, needle.after) : undefined;
      if (tail !== undefined) {
        emit(Buffer.from([tail]));
        position = end + 1;
      }
    }
    const keepFrom = final ? buffer.length : Math.max(position, buffer.length - this.hold);
    if (keepFrom > position) emit(buffer.subarray(position, keepFrom));
    return Buffer.from(buffer.subarray(keepFrom));
  }

  private next(buffer: Buffer, position: number): { at: number; needle: Needle } | undefined {
    let best: { at: number; needle: Needle } | undefined;
    for (const needle of this.needles) {
      const at = buffer.indexOf(needle.find, position);
      // needles are longest first, so on a tie the longer one is kept
      if (at >= 0 && (best === undefined || at < best.at)) best = { at, needle };
    }
    return best;
  }
}

/**
 * The base64 character `byte` with the secret's bits replaced, or undefined when it is not a
 * base64 character or does not hold the secret's bits there.
 */
function rewrittenEdge(byte: number, edge: EdgeChar): number | undefined {
  const index = BASE64_INDEX.get(byte);
  if (index === undefined || (index & ~edge.keep & 0b111111) !== edge.expect) return undefined;
  return BASE64.charCodeAt((index & edge.keep) | edge.bits);
}

function longestFirst(replacements: readonly Replacement[]): Replacement[] {
  return [...replacements].sort((a, b) => b.find.length - a.find.length);
}
