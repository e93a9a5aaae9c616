// Text from the model or the sandbox on its way to a person's terminal. Escape sequences there are
// commands to the terminal: OSC 52 writes the clipboard, cursor movement rewrites what was printed,
// bidi overrides make code read differently than it runs. Every such character is shown escaped
// (`\x1b`, `\u202e`), so nothing the sandbox wrote can act on the terminal and nothing is hidden.

// C0 controls (but tab and line feed, allowed where the format has lines), DEL, C1 controls, and
// the Unicode bidi embeddings, overrides and isolates.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE_MULTILINE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE_LINE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escapeChar(ch: string): string {
  const code = ch.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** For one line of progress: every control character escaped, line breaks and tabs too. */
export function terminalLine(value: unknown): string {
  return String(value).replace(UNSAFE_LINE, (ch) => (ch === "\n" || ch === "\t" ? " " : escapeChar(ch)));
}

/** For multi-line text (a result, a stderr tail): tabs and line feeds kept, every other control escaped. */
export function terminalText(value: unknown): string {
  return String(value).replace(/\r\n/g, "\n").replace(UNSAFE_MULTILINE, escapeChar);
}
