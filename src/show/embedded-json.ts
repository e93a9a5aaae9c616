// JSON that can sit inside an HTML <script type="application/json"> element whatever it holds.
// The HTML parser ends a script element at the first "</script" (any case) and treats "<!--" and
// "<script" inside it specially, so no "<" may appear raw; ">" and "&" are escaped as well so the
// text means nothing to any HTML tokenizer state. U+2028 and U+2029 are escaped because they end
// lines in older JavaScript and some tools. The result is still JSON: JSON.parse reads it back
// unchanged (every escape is a JSON string escape, and these characters occur only in strings).
const UNSAFE = /[<>&\u2028\u2029]/g;
const ESCAPES: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};

export function embeddedJson(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(UNSAFE, (ch) => ESCAPES[ch]!);
}
