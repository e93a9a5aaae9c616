// Paths as git writes them in patches and diff headers: C-quoted ("a\tb\303\251") when they hold
// bytes past ASCII, a quote, a backslash or a control character (core.quotePath).

/** git's C-style quoted path ("a\tb\303\251") decoded; other text as it is. */
export function unquoteGitPath(text: string): string {
  if (!(text.length >= 2 && text.startsWith('"') && text.endsWith('"'))) return text;
  const bytes: number[] = [];
  const body = text.slice(1, -1);
  const simple: Record<string, number> = { n: 10, t: 9, r: 13, a: 7, b: 8, f: 12, v: 11, '"': 34, "\\": 92 };
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch !== "\\") {
      bytes.push(...Buffer.from(ch, "utf8"));
      continue;
    }
    const next = body[i + 1] ?? "";
    const octal = /^[0-7]{3}/.exec(body.slice(i + 1, i + 4));
    if (octal) {
      bytes.push(Number.parseInt(octal[0], 8) & 0xff);
      i += 3;
    } else if (next in simple) {
      bytes.push(simple[next]!);
      i += 1;
    } else bytes.push(92);
  }
  return Buffer.from(bytes).toString("utf8");
}
