// The characters that act on a terminal or change how text reads without being seen, in one place
// for every reader sandbox-run writes for: C0 and C1 controls, DEL, the line and paragraph
// separators (readers that split lines on them, Python's `splitlines()` among them, cut a line in
// pieces), the interlinear annotation marks, and every character Unicode calls default-ignorable
// (renderers draw it as nothing): the bidi marks, embeddings, overrides and isolates (a `\u202e`
// makes code read differently than it runs), zero-width and invisible characters, the byte-order
// mark, the soft hyphen, Hangul fillers (valid in JavaScript names), and the variation selectors and
// tag characters, whose runs can carry a whole payload that a decoder in plain sight runs.
//
// Each reader takes the class with the C0 controls its format allows: a terminal line none, a
// multi-line text tab and line feed, JSON none of its own (JSON.stringify escapes U+0000-U+001F
// already). The `u` flag is part of every pattern: astral characters match whole.

/** The class beyond C0, as regular-expression source to put inside `[...]`. */
const BEYOND_C0 = "\\u007f-\\u009f\\u2028\\u2029\\ufff9-\\ufffb\\p{Default_Ignorable_Code_Point}";

/** For String.replace (global): one line of a terminal, every control character, line breaks and tabs too. */
export const UNSAFE_IN_LINE = new RegExp(`[\\u0000-\\u001f${BEYOND_C0}]`, "gu");
/** For multi-line text on a terminal: tab and line feed kept. */
export const UNSAFE_IN_TEXT = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f${BEYOND_C0}]`, "gu");
/** What JSON.stringify leaves raw in a string. */
const UNSAFE_IN_JSON = new RegExp(`[${BEYOND_C0}]`, "gu");

/**
 * What hides or reorders text in a name or a shown record (show/visible-chars.ts escapes each; the
 * workspace rules judge the names a run left by it: workspace/builtin-protections.ts), as source.
 * ZWJ and ZWNJ (U+200C, U+200D) are left alone between two characters outside ASCII, where emoji
 * and several scripts need them; anywhere else (next to ASCII, at an end, in a run of joiners,
 * which can carry a payload two characters at a time) they count too. show/page-script.ts holds
 * the same class as a literal (the page's script cannot import); a unit test checks that they agree.
 */
export const INVISIBLE_SOURCE = `(?![\\u200c\\u200d])[\\u0000-\\u0008\\u000b-\\u001f${BEYOND_C0}]|(?<![^\\u0000-\\u007f\\u200c\\u200d])[\\u200c\\u200d]|[\\u200c\\u200d](?![^\\u0000-\\u007f\\u200c\\u200d])`;

/** In a name, with tab and line feed: what hides text or splits a name read line by line or word by word. */
export const HIDING_OR_SPLITTING = new RegExp(`[\\t\\n]|${INVISIBLE_SOURCE}`, "u");

/** `\x1b`, `\u202e`, `\u{e0141}`: how one such character is shown on a terminal or a page. */
export function escapedChar(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (code > 0xffff) return `\\u{${code.toString(16)}}`;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * JSON text written where a person or a line reader may meet it (stdout, a record's files), with
 * every character of the class written as `\uXXXX`. Such characters occur only inside strings,
 * where the escape is the same value: JSON.parse gives back exactly what JSON.stringify was given.
 */
export function escapeUnsafeInJson(json: string): string {
  return json.replace(
    UNSAFE_IN_JSON,
    // Each UTF-16 unit (a tag character is two): JSON's \uXXXX escapes read back to the same text.
    (ch) =>
      Array.from({ length: ch.length }, (_, i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, "0")}`).join(""),
  );
}
