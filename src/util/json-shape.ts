// How much work a JSON text from the sandbox would make the host do, counted before it is parsed
// (a model request's body, the tool-call arguments inside it, a line of Pi's event stream). The
// byte cap alone does not bound it: JSON.parse of 32 MiB of `[{},{},...]` (11 million empty
// objects) took ~1 GB and 17 s of the controller's single thread here, 32 MiB of `[[],[],...]`
// 750 MB and 6 s. One pass over the bytes counts values (commas and containers outside strings)
// and nesting, and refuses a body past either limit. Pi's requests are far inside both: a long
// conversation is thousands of messages of a few values each, and its images are single strings.

export interface JsonShapeLimits {
  /** Values (containers and list items, roughly: `{`, `[` and `,` outside strings). */
  maxValues: number;
  /** Nesting of objects and arrays. */
  maxDepth: number;
}

export const DEFAULT_JSON_SHAPE_LIMITS: JsonShapeLimits = Object.freeze({ maxValues: 1_000_000, maxDepth: 256 });

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/** Why the body's JSON is too big a structure to parse, or undefined. Malformed JSON is left to the parser. */
export function jsonShapeProblem(
  body: Uint8Array,
  limits: JsonShapeLimits = DEFAULT_JSON_SHAPE_LIMITS,
): string | undefined {
  return jsonShape(body, limits).problem;
}

/** The values the body's JSON holds (counted up to the first limit it passes), and the problem if it passes one. */
export function jsonShape(body: Uint8Array, limits: JsonShapeLimits): { values: number; problem?: string } {
  let values = 0;
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i]!;
    if (byte === QUOTE) {
      i = stringEnd(body, i);
      continue;
    }
    if (byte === COMMA) values++;
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      values++;
      if (++depth > limits.maxDepth) return { values, problem: `its JSON nests deeper than ${limits.maxDepth} levels` };
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--;
    else continue;
    if (values > limits.maxValues) return { values, problem: `its JSON holds more than ${limits.maxValues} values` };
  }
  return { values };
}

/** The index of the quote that ends the string opening at `start` (or the end of the body). */
function stringEnd(body: Uint8Array, start: number): number {
  for (let at = start + 1; ; at++) {
    at = body.indexOf(QUOTE, at);
    if (at < 0) return body.length;
    let backslashes = 0;
    while (body[at - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
}
