// Takes a secret's value back out of text that is about to reach someone who must not see it
// (the sandbox, through the egress proxy's answers or the model gateway's replies; a run's events
// and errors), so a server that echoes the request (a debugging endpoint, an error page quoting the
// Authorization header) cannot hand the value over. It replaces exact byte sequences: the value;
// the value as the common encoders escape it (JSON, percent-encoding, HTML: see escapedForms); its
// base64 at each of the three alignments base64 can put it at (inside a longer text, e.g. the
// `user:password` of a Basic credential, the value starts 0, 1 or 2 bytes into a 3-byte group);
// and the exact header values the proxy produced, with and without their scheme (`Basic
// <credential>` and the bare credential). A server that transforms the value otherwise (hex,
// reversed, split, encrypted, escaped twice, escaped by an encoder not listed) is out of its
// reach. Bodies are scanned as they stream, holding back only the bytes that could still begin a
// match (and the base64 character before one), so a match split across chunks is found.
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
    ...escapedForms(value, placeholder),
    { find: base64(Buffer.from(value, "latin1")), replace: base64(Buffer.from(placeholder, "latin1")) },
  ];
  for (const shift of [0, 1, 2]) forms.push(alignedBase64(value, placeholder, shift));
  return forms;
}

/** Written where a credential value was found (in records, events, errors and the gateway's replies). */
export const CREDENTIAL_REMOVED = "<credential removed by sandbox-run>";

/** How one encoder writes a character: its escape, or undefined for the character itself. */
type Escape = (char: string) => string | undefined;

const hex = (char: string, upper: boolean) => {
  const code = char.charCodeAt(0).toString(16).padStart(2, "0");
  return upper ? code.toUpperCase() : code;
};
const jsonU = (upper: boolean) => (char: string) => `\\u00${hex(char, upper)}`;
const escapeOf =
  (table: Record<string, string>, rest?: { chars: string; as: Escape }): Escape =>
  (char) =>
    table[char] ?? (rest?.chars.includes(char) ? rest.as(char) : undefined);
const JSON_MINIMAL = { '"': '\\"', "\\": "\\\\" };
const UNRESERVED = /[A-Za-z0-9\-._~]/;
const percent =
  (upper: boolean, keep: RegExp, space?: string): Escape =>
  (char) => {
    if (keep.test(char)) return undefined;
    if (char === " " && space) return space;
    const bytes = Buffer.from(char, "utf8");
    return [...bytes].map((b) => `%${hex(String.fromCharCode(b), upper)}`).join("");
  };
const HTML_TEXT = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };

/**
 * The encoders whose output an upstream may echo a value in: each writes every character of the
 * value either as itself or as its escape. A mix of two encoders is not looked for.
 */
const ENCODERS: readonly Escape[] = [
  // JSON: Node's JSON.stringify, Python's json.dumps, Ruby, Rust's serde_json, Jackson
  escapeOf(JSON_MINIMAL),
  // PHP's json_encode (and others) escape "/" too
  escapeOf({ ...JSON_MINIMAL, "/": "\\/" }),
  // Go's encoding/json (HTML-safe by default), in lower-case hex, and the same in upper case
  escapeOf(JSON_MINIMAL, { chars: "<>&", as: jsonU(false) }),
  escapeOf(JSON_MINIMAL, { chars: "<>&", as: jsonU(true) }),
  // Gson (HTML-safe by default)
  escapeOf(JSON_MINIMAL, { chars: "<>&='", as: jsonU(false) }),
  // .NET's System.Text.Json (its default encoder)
  escapeOf({ "\\": "\\\\" }, { chars: "\"<>&'+`", as: jsonU(true) }),
  // An encoder that writes every character but letters and digits as \u00XX, both cases
  escapeOf({ "\\": "\\\\" }, { chars: asciiPunctuation(), as: jsonU(false) }),
  escapeOf({ "\\": "\\\\" }, { chars: asciiPunctuation(), as: jsonU(true) }),
  // Percent-encoding: encodeURIComponent; RFC 3986's unreserved kept (Python's quote(safe=""),
  // both cases); Python's quote() keeps "/"; form encoding (Go's QueryEscape, quote_plus) writes " " as "+"
  percent(true, /[A-Za-z0-9\-_.!~*'()]/),
  percent(true, UNRESERVED),
  percent(false, UNRESERVED),
  percent(true, /[A-Za-z0-9\-._~/]/),
  percent(true, UNRESERVED, "+"),
  // HTML: lodash and Ruby (&#39;), Python's html.escape (&#x27;), Go's html.EscapeString (&#34;
  // &#39;), PHP's htmlspecialchars (&#039;), and text content (XML, quote=False)
  escapeOf({ ...HTML_TEXT, '"': "&quot;", "'": "&#39;" }),
  escapeOf({ ...HTML_TEXT, '"': "&quot;", "'": "&#x27;" }),
  escapeOf({ ...HTML_TEXT, '"': "&#34;", "'": "&#39;" }),
  escapeOf({ ...HTML_TEXT, '"': "&quot;", "'": "&#039;" }),
  escapeOf(HTML_TEXT),
];

/** Printable ASCII but letters, digits and the backslash. */
function asciiPunctuation(): string {
  let chars = "";
  for (let code = 0x20; code < 0x7f; code++) {
    const char = String.fromCharCode(code);
    if (!/[A-Za-z0-9\\]/.test(char)) chars += char;
  }
  return chars;
}

/**
 * The value as each of ENCODERS writes it, each with the placeholder written the same way; only
 * those that differ from the value (and from each other). A value with non-ASCII characters also
 * as its UTF-8 bytes (what a byte stream holds; the value itself is matched as latin1).
 */
export function escapedForms(value: string, placeholder: string): Replacement[] {
  const seen = new Set([value]);
  const forms: Replacement[] = [];
  const add = (find: string, replace: string) => {
    if (seen.has(find)) return;
    seen.add(find);
    forms.push({ find, replace });
  };
  const utf8 = (text: string) => Buffer.from(text, "utf8").toString("latin1");
  add(utf8(value), utf8(placeholder));
  for (const encode of ENCODERS) {
    const write = (text: string) => [...text].map((char) => encode(char) ?? char).join("");
    add(utf8(write(value)), utf8(write(placeholder)));
  }
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

/** Header values and other latin1 text (one character a byte). */
export function scrubText(text: string, replacements: readonly Replacement[]): string {
  return new TextScrubber(replacements).latin1(text);
}

/**
 * The replacements made once, for many texts: latin1 ones (header values), bytes, and JavaScript
 * strings of any characters (messages, events), the latter as their UTF-8 bytes, where an ASCII
 * match cannot fall inside a character. A text with no match is returned as it is (the same
 * object), after one search per form.
 */
export class TextScrubber {
  readonly #scanner: Scanner;
  /** The forms that are ASCII: searched for in a string as they are. */
  readonly #ascii: string[] = [];
  /** The rest (UTF-8 bytes as latin1): searched for in a string's UTF-8. */
  readonly #other: Buffer[] = [];

  constructor(replacements: readonly Replacement[]) {
    this.#scanner = new Scanner(replacements);
    for (const find of new Set(replacements.map((r) => r.find))) {
      if (find === "") continue;
      if (isAscii(find)) this.#ascii.push(find);
      else this.#other.push(Buffer.from(find, "latin1"));
    }
  }

  get active(): boolean {
    return this.#ascii.length + this.#other.length > 0;
  }

  latin1(text: string): string {
    if (
      !this.#ascii.some((find) => text.includes(find)) &&
      !this.#other.some((find) => text.includes(find.toString("latin1")))
    )
      return text;
    return this.#run(Buffer.from(text, "latin1")).toString("latin1");
  }

  /** A string of any characters: matched as UTF-8 (the forms are latin1 byte strings). */
  string(text: string): string {
    let bytes: Buffer | undefined;
    const hit =
      this.#ascii.some((find) => text.includes(find)) ||
      (this.#other.length > 0 &&
        !isAscii(text) &&
        this.#other.some((find) => (bytes ??= Buffer.from(text, "utf8")).includes(find)));
    if (!hit) return text;
    return this.#run(bytes ?? Buffer.from(text, "utf8")).toString("utf8");
  }

  /** The bytes with every form replaced; the same Buffer when none was found. */
  bytes(bytes: Buffer): Buffer {
    if (
      !this.#ascii.some((find) => bytes.includes(find, 0, "latin1")) &&
      !this.#other.some((find) => bytes.includes(find))
    )
      return bytes;
    return this.#run(bytes);
  }

  #run(bytes: Buffer): Buffer {
    const out: Buffer[] = [];
    this.#scanner.scan(bytes, true, (part) => out.push(part));
    return Buffer.concat(out);
  }
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** Credential values shorter than this are not secrets worth searching for (e.g. "ollama"). */
export const MIN_CREDENTIAL_LENGTH = 8;

/**
 * What to take out wherever credential values (header values a gateway adds, a policy secret's
 * value) may turn up: each value, and a header value also without its scheme ("Bearer ", "Basic ",
 * "token "), in all of secretForms' forms, replaced by CREDENTIAL_REMOVED (written the same way).
 */
export function credentialForms(values: readonly string[], replace = CREDENTIAL_REMOVED): Replacement[] {
  const seen = new Set<string>();
  for (const value of values) {
    const bare = value.replace(/^(Bearer|Basic|token)\s+/i, "");
    for (const v of [value, bare]) if (v.length >= MIN_CREDENTIAL_LENGTH) seen.add(v);
  }
  return [...seen].flatMap((v) => secretForms(v, replace));
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
  /** The needles by their first byte, for the held-back tail. */
  private readonly byFirst = new Map<number, Needle[]>();
  private readonly longest: number;
  private readonly edges: boolean;

  constructor(replacements: readonly Replacement[]) {
    const seen = new Set<string>();
    this.needles = longestFirst(replacements)
      .filter((r) => r.find !== "" && !seen.has(r.find) && Boolean(seen.add(r.find)))
      .map((r) => ({
        find: Buffer.from(r.find, "latin1"),
        replace: Buffer.from(r.replace, "latin1"),
        ...(r.before ? { before: r.before } : {}),
        ...(r.after ? { after: r.after } : {}),
      }));
    for (const needle of this.needles) {
      const first = needle.find[0]!;
      this.byFirst.set(first, [...(this.byFirst.get(first) ?? []), needle]);
    }
    this.longest = Math.max(0, ...this.needles.map((n) => n.find.length));
    this.edges = this.needles.some((n) => n.before);
  }

  /**
   * Emits `buffer` with the matches replaced, except what could still be (or border) a match when
   * more follows: that is returned, for the next call. Held back: from the earliest place where
   * the rest of the buffer is the start of a needle (and the character before it, for a base64
   * form whose first character is shared with the text before), and a last base64 character that
   * may be the one before a base64 form in the next chunk. Each needle is searched for once per
   * call (its next place is kept until a match passes it), so a call costs one pass per needle
   * whatever the number of matches.
   */
  scan(buffer: Buffer, final: boolean, emit: (part: Buffer) => void): Buffer {
    let position = 0;
    let keepFrom = buffer.length;
    const nextAt = new Array<number>(this.needles.length).fill(-2);
    while (true) {
      const best = this.next(buffer, position, nextAt);
      if (!best) break;
      const { at, needle } = best;
      const end = at + needle.find.length;
      // The character after it decides its last one, and a longer needle may match here once more
      // arrives: wait unless the text ends here.
      if (!final && ((needle.after && end >= buffer.length) || this.longerMayFollow(buffer, at, needle))) {
        keepFrom = needle.before && at > position ? at - 1 : at;
        break;
      }
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
    if (final) keepFrom = buffer.length;
    else keepFrom = Math.max(position, Math.min(keepFrom, this.partialFrom(buffer, position)));
    if (keepFrom > position) emit(buffer.subarray(position, keepFrom));
    return Buffer.from(buffer.subarray(keepFrom));
  }

  private next(buffer: Buffer, position: number, nextAt: number[]): { at: number; needle: Needle } | undefined {
    let best: { at: number; needle: Needle } | undefined;
    for (let i = 0; i < this.needles.length; i++) {
      const needle = this.needles[i]!;
      let at = nextAt[i]!;
      if (at === -1) continue;
      if (at < position) nextAt[i] = at = buffer.indexOf(needle.find, position);
      // needles are longest first, so on a tie the longer one is kept
      if (at >= 0 && (best === undefined || at < best.at)) best = { at, needle };
    }
    return best;
  }

  /** Whether a needle longer than `needle` begins at `at` and runs past the end of the buffer. */
  private longerMayFollow(buffer: Buffer, at: number, needle: Needle): boolean {
    const rest = buffer.length - at;
    if (rest >= this.longest) return false;
    for (const other of this.byFirst.get(buffer[at]!) ?? []) {
      if (other.find.length > rest && other.find.length > needle.find.length && startsWith(other.find, buffer, at))
        return true;
    }
    return false;
  }

  /** Where the buffer's tail that may begin a match (or border one) starts; buffer.length when none. */
  private partialFrom(buffer: Buffer, position: number): number {
    const from = Math.max(position, buffer.length - this.longest + 1);
    for (let p = from; p < buffer.length; p++) {
      for (const needle of this.byFirst.get(buffer[p]!) ?? []) {
        if (needle.find.length > buffer.length - p && startsWith(needle.find, buffer, p)) {
          return needle.before && p > position ? p - 1 : p;
        }
      }
    }
    // The character before a base64 form that the next chunk may start with.
    if (this.edges && buffer.length > position && BASE64_INDEX.has(buffer[buffer.length - 1]!))
      return buffer.length - 1;
    return buffer.length;
  }
}

/** Whether buffer[at..] (to its end) is the start of `find`. */
function startsWith(find: Buffer, buffer: Buffer, at: number): boolean {
  const n = Math.min(find.length, buffer.length - at);
  return buffer.compare(find, 0, n, at, at + n) === 0;
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
