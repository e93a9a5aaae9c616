// A small glob matcher for protectedPaths, over workspace-relative paths with "/" separators.
// Node 20 has path.matchesGlob only as an experimental API that prints a warning on first use,
// so a library cannot call it. Supported:
//   **   any number of whole path segments, including none (".git/hooks/**" matches ".git/hooks")
//   *    any characters inside one segment
//   ?    one character inside one segment
// Everything else is literal; braces, [...] classes and a leading "!" (other globs' syntax) are
// refused rather than taken literally, which would protect nothing. Dot files are matched like any other name (a protection that
// skipped ".github" would be no protection). A pattern is anchored at the workspace root: "*.pem"
// matches only top-level files; write "**/*.pem" for every depth. A trailing "/" means "/**".
//
// Why by hand: protected paths are a security boundary written in policy files. picomatch and
// minimatch add braces, classes, extglobs and negation, and skip dot files unless told; a pattern
// that means something else in their syntax, or an option left at its default, protects less than
// the policy says. This subset is small enough to read in full.

export type PathMatcher = (relativePath: string) => boolean;

/** Why a pattern cannot be used, or undefined when it is fine. */
export function globProblem(pattern: string): string | undefined {
  if (pattern.trim() === "") return "is empty";
  if (pattern.startsWith("/")) return "must be relative to the workspace (no leading /)";
  if (pattern.includes("\\")) return "must use / as the separator";
  // Other globs' syntax would be taken literally here and protect nothing (review, session 30).
  if (pattern.startsWith("!"))
    return "starts with '!', which does not negate here: protectedPaths only adds protection; leave the path out instead";
  if (/[{}]/.test(pattern))
    return 'uses braces, which this glob does not expand: write one pattern per alternative (e.g. "**/*.pem" and "**/*.key")';
  if (/[[\]]/.test(pattern))
    return "uses a [...] class, which this glob does not know: write one pattern per name, or use ? for any one character";
  if (
    normalizePattern(pattern)
      .split("/")
      .some((s) => s === ".." || s === "")
  ) {
    return "must not contain '..' or empty segments";
  }
  return undefined;
}

function normalizePattern(pattern: string): string {
  let p = pattern.replace(/^(\.\/)+/, "");
  if (p.endsWith("/")) p = `${p}**`;
  return p;
}

function segmentSource(segment: string): string {
  let out = "";
  for (const ch of segment.replace(/\*{2,}/g, "*")) {
    if (ch === "*") out += "[^/]*";
    else if (ch === "?") out += "[^/]";
    else out += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return out;
}

export function globToRegExp(pattern: string): RegExp {
  // "a/**/**/b" means "a/**/b".
  const segments = normalizePattern(pattern)
    .split("/")
    .filter((s, i, all) => !(s === "**" && all[i - 1] === "**"));
  const last = segments.length - 1;
  let source = "";
  segments.forEach((segment, i) => {
    if (segment === "**") {
      if (i === last) source += i === 0 ? ".*" : "(?:/.*)?";
      else source += i === 0 ? "(?:.*/)?" : "/(?:.*/)?";
      return;
    }
    const afterGlobstar = i > 0 && segments[i - 1] === "**";
    source += (i > 0 && !afterGlobstar ? "/" : "") + segmentSource(segment);
  });
  // "s": file names may contain line breaks, and "." must still match them.
  return new RegExp(`^${source}$`, "s");
}

/** A matcher for a list of patterns: true when any of them matches. */
export function compileGlobs(patterns: readonly string[]): PathMatcher {
  const compiled = patterns.map(globToRegExp);
  return (relativePath) => compiled.some((re) => re.test(relativePath));
}

/**
 * What a pattern protects as a whole, when that is one literal path: "<dir>/**" without
 * wildcards in <dir> protects the directory (".git/hooks/**" -> ".git/hooks"), a pattern
 * without wildcards protects exactly that file (".git/config"); undefined otherwise. An
 * existing entry of that kind can be mounted read-only. ("src" alone matches only the path
 * "src", not the files below it, so it never protects a directory.)
 */
export function literalPathOf(pattern: string): { path: string; kind: "directory" | "file" } | undefined {
  const p = normalizePattern(pattern);
  const directory = p.endsWith("/**");
  const path = directory ? p.slice(0, -3) : p;
  if (path === "" || /[*?]/.test(path)) return undefined;
  return { path, kind: directory ? "directory" : "file" };
}
