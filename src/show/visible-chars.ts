// Characters that change how text reads without being seen: C0 and C1 controls (tab and line feed
// aside), DEL, line and paragraph separators, the interlinear annotation marks, and every character
// Unicode calls default-ignorable (renderers draw it as nothing): the bidi marks, embeddings,
// overrides and isolates (a `\u202e` makes code read differently than it runs), zero-width and
// invisible characters, the byte-order mark, the soft hyphen, Hangul fillers (valid in JavaScript
// names), and the variation selectors and tag characters, whose runs can carry a whole payload that
// a decoder in plain sight runs. The page and the Markdown summary show each as its escape
// (`\u202e`, `\u{e0141}`), so nothing in a record hides or reorders what a reviewer reads.
// ZWJ and ZWNJ (U+200C, U+200D) are left alone between two characters outside ASCII, where emoji
// and several scripts need them; anywhere else (next to ASCII, at an end, in a run of joiners,
// which can carry a payload two characters at a time) they are shown too.
//
// page-script.ts holds the same class as a literal (the page's script cannot import); a unit test
// checks that the two agree. The `u` flag is part of it: astral characters match whole.
export const INVISIBLE_SOURCE =
  "(?![\\u200c\\u200d])[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u2028\\u2029\\ufff9-\\ufffb\\p{Default_Ignorable_Code_Point}]|(?<![^\\u0000-\\u007f\\u200c\\u200d])[\\u200c\\u200d]|[\\u200c\\u200d](?![^\\u0000-\\u007f\\u200c\\u200d])";

/** `\x1b`, `\u202e`, `\u{e0141}`: how one such character is shown. */
function escapeChar(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (code > 0xffff) return `\\u{${code.toString(16)}}`;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** Text with every such character replaced by its escape (CRLF read as one line break). */
export function visibleText(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(new RegExp(INVISIBLE_SOURCE, "gu"), escapeChar);
}
