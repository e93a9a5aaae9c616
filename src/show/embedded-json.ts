// JSON that can sit inside an HTML <script type="application/json"> element whatever it holds.
// The HTML parser ends a script element at the first "</script" (any case) and treats "<!--" and
// "<script" inside it specially, so no "<" may appear raw; ">" and "&" are escaped as well so the
// text means nothing to any HTML tokenizer state. U+2028 and U+2029 are escaped because they end
// lines in older JavaScript and some tools. DEL, the C1 controls (U+009B and U+009D are CSI and OSC
// to a terminal reading UTF-8 that way: `show -o -` writes the page to stdout) and the bidi marks,
// embeddings, overrides and isolates are escaped too, as JSON on stdout is (cli/terminal-text.ts).
// The result is still JSON: JSON.parse reads it back unchanged (every escape is a JSON string
// escape, and these characters occur only in strings). text-budget.ts' bytesOf counts each escape.
const UNSAFE = /[<>&\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const unicodeEscape = (ch: string) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;

export function embeddedJson(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(UNSAFE, unicodeEscape);
}
