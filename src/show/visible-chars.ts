// Characters that change how text reads without being seen: C0 and C1 controls (tab and line feed
// aside), DEL, the bidi marks, embeddings, overrides and isolates (a `\u202e` makes code read
// differently than it runs), zero-width and invisible characters, line and paragraph separators,
// the byte-order mark and the interlinear annotation marks. The page and the Markdown summary show
// each as its escape (`\u202e`), so nothing in a record hides or reorders what a reviewer reads.
// ZWJ and ZWNJ (U+200C, U+200D) are left alone: emoji and several scripts need them.
//
// page-script.ts holds the same class as a literal (the page's script cannot import); a unit test
// checks that the two agree.
export const INVISIBLE_SOURCE =
  "[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u180e\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2069\\ufeff\\ufff9-\\ufffb]";

/** `\x1b`, `\u202e`: how one such character is shown. */
function escapeChar(ch: string): string {
  const code = ch.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** Text with every such character replaced by its escape (CRLF read as one line break). */
export function visibleText(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(new RegExp(INVISIBLE_SOURCE, "g"), escapeChar);
}
