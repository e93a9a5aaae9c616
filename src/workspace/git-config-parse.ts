// git's configuration file syntax, read the way git reads it (config.c), without running git:
// `[section]`, `[section "subsection"]` and the older `[section.subsection]`, `key = value`
// (a key alone means true), values with double quotes, the escapes \" \\ \n \t \b, a backslash
// at the end of a line continuing the value, comments after # or ; outside quotes, and a key on
// the same line as its section header. Names of sections and keys are case-insensitive (lower
// case here); subsections are not. A line git would reject ends the parse there: what came
// before still counts (git stops with an error, so nothing after it takes effect either).

export interface ConfigEntry {
  /** section[.subsection].key, section and key in lower case. */
  name: string;
  section: string;
  subsection?: string;
  key: string;
  /** null for a key without "=" (boolean true). */
  value: string | null;
}

const NAME_CHAR = /[A-Za-z0-9-]/;
const SECTION_CHAR = /[A-Za-z0-9.-]/;

export function parseGitConfig(text: string): ConfigEntry[] {
  const out: ConfigEntry[] = [];
  let i = 0;
  let section: string | undefined;
  let subsection: string | undefined;
  const n = text.length;
  const isSpace = (c: string | undefined) => c === " " || c === "\t" || c === "\r";
  const skipLine = () => {
    while (i < n && text[i] !== "\n") i++;
  };
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  while (i < n) {
    const c = text[i]!;
    if (c === "\n" || isSpace(c)) {
      i++;
      continue;
    }
    if (c === "#" || c === ";") {
      skipLine();
      continue;
    }
    if (c === "[") {
      const header = parseHeader(text, i + 1);
      if (!header) return out;
      ({ section, subsection } = header);
      i = header.end;
      continue;
    }
    if (!/[A-Za-z]/.test(c) || section === undefined) return out;
    let key = "";
    while (i < n && NAME_CHAR.test(text[i]!)) key += text[i++]!;
    while (isSpace(text[i])) i++;
    let value: string | null = null;
    if (text[i] === "=") {
      const parsed = parseValue(text, i + 1);
      if (!parsed) return out;
      value = parsed.value;
      i = parsed.end;
    } else if (i < n && text[i] !== "\n" && text[i] !== "#" && text[i] !== ";") {
      return out;
    }
    const lowerKey = key.toLowerCase();
    out.push({
      name: subsection === undefined ? `${section}.${lowerKey}` : `${section}.${subsection}.${lowerKey}`,
      section,
      ...(subsection !== undefined ? { subsection } : {}),
      key: lowerKey,
      value,
    });
  }
  return out;
}

function parseHeader(text: string, start: number): { section: string; subsection?: string; end: number } | undefined {
  let i = start;
  let name = "";
  while (i < text.length && SECTION_CHAR.test(text[i]!)) name += text[i++]!;
  if (name === "") return undefined;
  if (text[i] === "]") {
    // [section.subsection]: the old form, subsection in lower case.
    const dot = name.indexOf(".");
    if (dot < 0) return { section: name.toLowerCase(), end: i + 1 };
    return { section: name.slice(0, dot).toLowerCase(), subsection: name.slice(dot + 1).toLowerCase(), end: i + 1 };
  }
  if (text[i] !== " " && text[i] !== "\t") return undefined;
  while (text[i] === " " || text[i] === "\t") i++;
  if (text[i] !== '"') return undefined;
  i++;
  let subsection = "";
  for (;;) {
    const c = text[i++];
    if (c === undefined || c === "\n") return undefined;
    if (c === '"') break;
    if (c === "\\") {
      const next = text[i++];
      if (next === undefined || next === "\n") return undefined;
      subsection += next;
    } else subsection += c;
  }
  if (text[i] !== "]") return undefined;
  return { section: name.toLowerCase(), subsection, end: i + 1 };
}

function parseValue(text: string, start: number): { value: string; end: number } | undefined {
  let i = start;
  let value = "";
  let quoted = false;
  let pendingSpace = 0;
  while (text[i] === " " || text[i] === "\t") i++;
  for (;;) {
    const c = text[i];
    if (c === undefined || (c === "\n" && !quoted)) break;
    if (c === "\n") return undefined; // a newline inside quotes
    i++;
    if (!quoted && (c === ";" || c === "#")) {
      while (i < text.length && text[i] !== "\n") i++;
      break;
    }
    if (!quoted && (c === " " || c === "\t" || c === "\r")) {
      if (c !== "\r" || text[i] !== "\n") pendingSpace++;
      continue;
    }
    if (pendingSpace) {
      value += " ".repeat(pendingSpace);
      pendingSpace = 0;
    }
    if (c === '"') {
      quoted = !quoted;
      continue;
    }
    if (c === "\\") {
      const next = text[i++];
      if (next === "\n") continue; // a continued line
      if (next === "\r" && text[i] === "\n") {
        i++;
        continue;
      }
      const escaped = next === "n" ? "\n" : next === "t" ? "\t" : next === "b" ? "\b" : next;
      if (escaped === '"' || escaped === "\\" || next === "n" || next === "t" || next === "b") value += escaped;
      else return undefined; // git: "bad config line"
      continue;
    }
    value += c;
  }
  if (quoted) return undefined;
  return { value, end: i };
}

/** The value git takes for `name` (section.key, lower case) from a config file's text: the last one's. */
export function lastConfigValue(text: string, name: string): string | undefined {
  return (
    parseGitConfig(text)
      .filter((e) => e.name === name)
      .pop()?.value ?? undefined
  );
}
