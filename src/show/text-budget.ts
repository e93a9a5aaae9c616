// The page's size cap. Every long text of the record goes through one budget: each kind of text
// has its own cap (a tool's output, a request body, ...), and all of them together may take at
// most `total` bytes of the page's embedded data (counted as they will be written: JSON-escaped,
// UTF-8). Once that is spent, each further text keeps a short preview from a second, smaller
// budget, and then nothing; the page says what it left out. The page's outline (each drawn item:
// a turn, a tool call, a timeline span, an exchange, a listed decision or file, with its names and
// labels) has a pool of its own, since their number grows with the record too: an item that does
// not fit is not drawn, and counted. So a record of any size makes a page of bounded size, and
// what is drawn first (header, result, diff, turns) is what is kept.
import type { Shown } from "./run-view.js";

const PAGE_TEXT_BYTES = 16 * 1024 * 1024;
const PAGE_PREVIEW_BYTES = 1536 * 1024;
export const PAGE_OUTLINE_BYTES = 2 * 1024 * 1024;
const PREVIEW_CHARS = 300;

/**
 * What one drawn item takes in the page's data besides its texts: its keys, numbers (up to 24
 * characters each) and punctuation, an upper bound, so the outline's pool bounds the page.
 */
export const FRAME = {
  turn: 384,
  tool: 256,
  span: 128,
  exchange: 512,
  entry: 192,
  /** A name or line inside an item (a header line, a reason, a file of a list). */
  part: 32,
} as const;

/** Caps per kind of text, in characters. */
export const CAPS = {
  label: 300,
  line: 2_000,
  prompt: 256 * 1024,
  result: 1024 * 1024,
  schema: 64 * 1024,
  errorText: 16 * 1024,
  modelText: 64 * 1024,
  toolArgs: 16 * 1024,
  toolOutput: 64 * 1024,
  body: 128 * 1024,
  fileDiff: 256 * 1024,
  eventData: 4 * 1024,
} as const;

export class TextBudget {
  private mainLeft: number;
  private previewLeft: number;
  /** Characters left out because of the caps, in all. */
  omittedChars = 0;
  /** Texts cut because the page's total was spent (not just their own cap). */
  starved = 0;

  private outlineLeft: number;
  /** Items of the outline not drawn because its pool was spent. */
  undrawn = 0;

  constructor(total = PAGE_TEXT_BYTES, preview = PAGE_PREVIEW_BYTES, outline = PAGE_OUTLINE_BYTES) {
    this.mainLeft = total;
    this.previewLeft = preview;
    this.outlineLeft = outline;
  }

  /**
   * Room in the outline for one item: its frame (FRAME) and its short texts (names, labels, lines,
   * already cut), as they will be written. Charged when it fits; otherwise the item is not drawn.
   */
  admit(frame: number, ...texts: Array<string | undefined>): boolean {
    let cost = frame;
    for (const text of texts) if (text !== undefined) cost += bytesOf(text);
    if (cost > this.outlineLeft) {
      this.undrawn++;
      return false;
    }
    this.outlineLeft -= cost;
    return true;
  }

  /** `text` cut to `cap` characters and to what the budget has left. */
  take(text: string, cap: number): Shown {
    let shown = cut(text, cap);
    let cost = bytesOf(shown);
    if (cost > this.mainLeft) {
      this.starved++;
      shown = this.mainLeft > 0 ? cutToBytes(shown, this.mainLeft) : "";
      if (shown === "" && this.previewLeft > 0) shown = cutToBytes(cut(text, PREVIEW_CHARS), this.previewLeft);
      cost = bytesOf(shown);
      if (this.mainLeft > 0) this.mainLeft = Math.max(0, this.mainLeft - cost);
      else this.previewLeft = Math.max(0, this.previewLeft - cost);
    } else this.mainLeft -= cost;
    const omitted = text.length - shown.length;
    this.omittedChars += omitted;
    return omitted > 0 ? { text: shown, omitted } : { text: shown };
  }

  /** Nothing more can be taken: every further text comes out empty. */
  get spent(): boolean {
    return this.mainLeft <= 0 && this.previewLeft <= 0;
  }

  /** A short label (a name, a host, a reason): cut to CAPS.label; charged with its item (`admit`). */
  static label(value: unknown): string {
    return cut(
      typeof value === "string" ? value : value === undefined || value === null ? "" : String(value),
      CAPS.label,
    );
  }

  /** One line of text (a message, a preview): cut to CAPS.line; charged with its item (`admit`). */
  static line(value: unknown): string {
    return cut(
      typeof value === "string" ? value : value === undefined || value === null ? "" : String(value),
      CAPS.line,
    );
  }
}

/** The first `max` UTF-16 units of `text`, never splitting a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return text.slice(0, end);
}

// What a character costs beyond its UTF-8 bytes once written into the page (embedded-json.ts):
// "<", ">", "&", DEL and the C0 controls but the short ones become \u003c (6 bytes for 1), a C1
// control \u009b (6 for 2), U+2028/2029 and the bidi controls \u202e (6 for 3), a quote or
// backslash gets a backslash, so do \b \f \n \r \t, a lone surrogate is \udXXX (6 for the 3 of its
// replacement character).
const EXTRA =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
  /[<>&\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|["\\]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Escaped with a backslash and one letter: 2 bytes for 1. */
const SHORT_ESCAPES = '"\\\b\f\n\r\t';

/** The bytes `text` takes in the page's data (exact for these escapes, without building the string). */
export function bytesOf(text: string): number {
  let extra = 0;
  for (const match of text.matchAll(EXTRA)) {
    const ch = match[0];
    const code = ch.charCodeAt(0);
    extra += SHORT_ESCAPES.includes(ch) ? 1 : code < 0x80 ? 5 : code < 0x800 ? 4 : 3;
  }
  return Buffer.byteLength(text) + 2 + extra;
}

/** The longest prefix of `text` whose embedded form fits in `bytes` (by halving: texts here are short). */
function cutToBytes(text: string, bytes: number): string {
  if (bytesOf(text) <= bytes) return text;
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (bytesOf(cut(text, mid)) <= bytes) low = mid;
    else high = mid - 1;
  }
  return cut(text, low);
}
