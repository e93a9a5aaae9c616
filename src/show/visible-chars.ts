// Record text as the page and the Markdown summary show it: every character that changes how
// text reads without being seen (util/invisible-chars.ts) as its escape (`\u202e`, `\u{e0141}`),
// so nothing in a record hides or reorders what a reviewer reads.
import { INVISIBLE_SOURCE } from "../util/invisible-chars.js";

export { INVISIBLE_SOURCE };

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
