// CI runners read commands out of a job's log: GitHub's runner takes `##[command]` anywhere in a
// line, and `::command::` at a line's start once it has trimmed the indent (`::add-mask::` hides
// the host's later lines, `::stop-commands::` turns the job's own commands off, `::error file=…`
// forges an annotation on the pull request). Text the sandbox shaped that reaches a log is shown
// with the first character of each escaped, as the terminal escapes write it.

/** `##[` anywhere: shown as `#\x23[`. */
export function escapeHashCommands(text: string): string {
  return text.replace(/##\[/g, "#\\x23[");
}

/**
 * A line that starts, after its indent, with `::`: its first colon shown as `\x3a`. Any white space
 * counts as indent, Unicode's too: the runner trims a line with .NET's TrimStart(), which takes a
 * no-break space or U+3000 away as well (fix review, round 3, session 41).
 */
export function escapeLineCommands(text: string): string {
  return text.replace(/^([^\S\r\n\u2028\u2029]*):(?=:)/gmu, "$1\\x3a");
}
