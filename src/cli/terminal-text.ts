// Text from the model or the sandbox on its way to a person's terminal. Escape sequences there are
// commands to the terminal: OSC 52 writes the clipboard, cursor movement rewrites what was printed,
// bidi overrides make code read differently than it runs. Every such character (util/unsafe-chars.ts)
// is shown escaped (`\x1b`, `\u202e`), so nothing the sandbox wrote can act on the terminal and
// nothing is hidden: a file named `.husky/pre-commit` plus an invisible character must not read as
// `.husky/pre-commit`, and a payload in variation selectors must not read as nothing.

import { escapeHashCommands, escapeLineCommands } from "../util/runner-commands.js";
import { escapedChar, escapeUnsafeInJson, UNSAFE_IN_LINE, UNSAFE_IN_TEXT } from "../util/unsafe-chars.js";

/** For one line of progress: every control character escaped, line breaks and tabs too. */
export function terminalLine(value: unknown): string {
  // GitHub's runner reads `##[command]` anywhere in a log line.
  return escapeHashCommands(
    String(value).replace(UNSAFE_IN_LINE, (ch) => (ch === "\n" || ch === "\t" ? " " : escapedChar(ch))),
  );
}

/**
 * A path or name the sandbox chose, inside one of sandbox-run's lines: quoted as JSON when it holds
 * a control character (a line break, a tab) or space at either end, so it can neither start a line
 * of its own (a forged `sandbox-run: done`, a `::` workflow command; review, session 36) nor pass
 * for two names; then escaped as terminalLine does.
 */
export function terminalName(name: unknown): string {
  const text = String(name);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
  const quoted = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(text) || text !== text.trim();
  return terminalLine(quoted ? JSON.stringify(text) : text);
}

/**
 * For multi-line text (a result, a stderr tail): tabs and line feeds kept, every other control
 * escaped, and GitHub's `##[command]` (read anywhere in a log line) shown escaped as terminalLine does.
 */
export function terminalText(value: unknown): string {
  return escapeHashCommands(String(value).replace(/\r\n/g, "\n").replace(UNSAFE_IN_TEXT, escapedChar));
}

/**
 * For sandbox-run's own messages on stderr, which may quote hostile names (a cached tar's tags, a
 * path the sandbox made): terminalText, and a line that would start, after its indent, with `::` (a
 * workflow command to GitHub's runner, which trims the indent: `::add-mask::`, `::stop-commands::`)
 * gets its first colon escaped. Not for results: a line of C++ may start with `::`.
 */
export function messageText(value: unknown): string {
  return escapeLineCommands(terminalText(value));
}

/**
 * JSON for stdout (a result object, a `--json` envelope, a batch line): every character that could
 * act on a terminal written as a `\uXXXX` escape. Such characters occur only inside strings, where
 * the escape is the same value: `JSON.parse` gives back exactly what `JSON.stringify` was given.
 */
export function jsonText(value: unknown, indent?: number): string {
  return escapeUnsafeInJson(JSON.stringify(value, null, indent) ?? "null");
}
