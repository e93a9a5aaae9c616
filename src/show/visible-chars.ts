// Record text as the page and the Markdown summary show it: every character that changes how
// text reads without being seen (util/unsafe-chars.ts) as its escape (`\u202e`, `\u{e0141}`),
// so nothing in a record hides or reorders what a reviewer reads.
import { escapedChar, INVISIBLE_SOURCE } from "../util/unsafe-chars.js";

export { INVISIBLE_SOURCE };

/** Text with every such character replaced by its escape (CRLF read as one line break). */
export function visibleText(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(new RegExp(INVISIBLE_SOURCE, "gu"), escapedChar);
}
