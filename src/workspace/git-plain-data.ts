// What a git directory may hold after a run: plain data. Host git writes into files there in
// place (COMMIT_EDITMSG, MERGE_MSG and FETCH_HEAD are truncated and rewritten, logs/** appended
// to) and follows what some of them say (HEAD, refs), so an entry the run created or changed
// must be a regular file or a directory, a file must have one link and no setuid, setgid,
// group- or world-write bit, and a pointer file must say only what git itself writes there.
// Pure functions over entry facts; the rule engine (workspace-rules.ts) calls them.
import { GIT_REPLACE_REFS, gitObjectStorePath } from "./builtin-protections.js";
import type { EntryKind } from "./fd-walk.js";
import { indexProblem } from "./git-index-paths.js";

/** The facts of an entry these rules read (workspace-rules.ts EntryFacts has them). */
interface DataFacts {
  kind: EntryKind;
  mode: number;
  nlink?: number;
}

type GitDataRule = "git-entry-kinds" | "git-modes" | "git-pointers";

interface GitDataProblem {
  rule: GitDataRule;
  /** Why, in words: "a symbolic link", "2 hard links", "mode 0666", "not an object id ...". */
  detail: string;
}

/** Bits no file in a git directory may have: setuid, setgid, group- and world-write. */
export const UNSAFE_GIT_FILE_BITS = 0o6000 | 0o020 | 0o002;

const KIND_WORDS: Record<string, string> = {
  symlink: "a symbolic link",
  fifo: "a FIFO",
  socket: "a socket",
  device: "a device",
};

/**
 * The kind, link and mode problem of an entry inside a git directory, if any. `changed`: the
 * run created or changed it (by content, kind or mode); `touched`: its inode's status changed
 * at all (a new hard link moves ctime and nlink, not the content). Entries the run did not
 * touch are never judged: a repository may hold a symlink of its own.
 */
export function gitEntryProblem(
  relative: string,
  after: DataFacts,
  changed: boolean,
  touched: boolean,
): GitDataProblem | undefined {
  if (after.kind === "directory" || after.kind === "unknown") return undefined; // unknown: the walk's own violation
  if (after.kind !== "file") return changed ? { rule: "git-entry-kinds", detail: KIND_WORDS[after.kind]! } : undefined;
  // Objects and packs are written once under their own name and never opened for writing again:
  // a hard-linked object (`git clone --local`) is no door.
  if ((after.nlink ?? 1) > 1 && (changed || touched) && !gitObjectStorePath(relative))
    return { rule: "git-entry-kinds", detail: `a file with ${after.nlink} hard links` };
  const bits = after.mode & UNSAFE_GIT_FILE_BITS;
  if (bits && changed)
    return { rule: "git-modes", detail: `mode ${(after.mode & 0o7777).toString(8).padStart(4, "0")}` };
  return undefined;
}

/** How git reads a file of a git directory as a pointer, by its path relative to that directory. */
type PointerFormat = "ref" | "oids" | "fetch-head" | "packed-refs" | "index" | "bisect-start";

const SINGLE_REF_FILES = new Set([
  "HEAD",
  "ORIG_HEAD",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "REBASE_HEAD",
  "AUTO_MERGE",
  "BISECT_HEAD",
  "BISECT_EXPECTED_REV",
]);

export function pointerFormatOf(relative: string): PointerFormat | undefined {
  const path = relative.endsWith(".lock") ? relative.slice(0, -5) : relative;
  if (path.startsWith("refs/")) return "ref";
  if (SINGLE_REF_FILES.has(path)) return "ref";
  if (path === "MERGE_HEAD") return "oids";
  if (path === "FETCH_HEAD") return "fetch-head";
  if (path === "packed-refs") return "packed-refs";
  // `git bisect reset` runs `git checkout <its content> --`.
  if (path === "BISECT_START") return "bisect-start";
  // git checks out what an index names, to the path it names (git-index-paths.ts).
  if (path === "index" || /^sharedindex\.[0-9a-f]+$/.test(path)) return "index";
  return undefined;
}

/** The most a pointer file may hold to be checked (a larger one is a violation). */
export const POINTER_MAX_BYTES = 64 * 1024 * 1024;

const OID = "(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})";
const OID_LINE = new RegExp(`^${OID}$`);
const PACKED_LINE = new RegExp(`^${OID} (.+)$`);
const PEELED_LINE = new RegExp(`^\\^${OID}$`);
const FETCH_LINE = new RegExp(`^${OID}\\t(?:not-for-merge)?\\t[^\\n]*$`);
const SYMREF = /^ref:[ \t]*(.*)$/;

/** Whether the content is what git writes into a pointer file of this format; else why not. */
export function pointerProblem(format: PointerFormat, content: Buffer): string | undefined {
  if (format === "index") return indexProblem(content);
  if (content.includes(0)) return "it holds a NUL byte";
  const text = content.toString("utf8");
  if (Buffer.byteLength(text) !== content.length) return "it is not UTF-8";
  const lines = withoutTrailingBlanks(text).split("\n");
  switch (format) {
    case "ref": {
      if (lines.length !== 1) return "more than one line where git keeps one object id or `ref: refs/...`";
      const line = lines[0]!.trimEnd();
      if (OID_LINE.test(line)) return undefined;
      const symref = SYMREF.exec(line);
      if (!symref) return "neither an object id nor `ref: refs/...`";
      const target = symref[1]!;
      if (!target.startsWith("refs/")) return `a symbolic ref to "${printable(target)}", outside refs/`;
      return refnameProblem(target);
    }
    case "bisect-start":
      return bisectStartProblem(lines);
    case "oids":
      return lines.every((l) => OID_LINE.test(l.trimEnd())) ? undefined : "a line that is not an object id";
    case "fetch-head":
      if (text.trim() === "") return undefined;
      return lines.every((l) => FETCH_LINE.test(l.replace(/\r$/, ""))) ? undefined : "a line git fetch does not write";
    case "packed-refs": {
      for (const [i, raw] of lines.entries()) {
        const line = raw.replace(/\r$/, "");
        if (line === "" && lines.length === 1) return undefined;
        if (i === 0 && line.startsWith("# pack-refs with:")) continue;
        if (PEELED_LINE.test(line)) continue;
        const packed = PACKED_LINE.exec(line);
        if (!packed) return `line ${i + 1} is not "<object id> <refname>" or "^<object id>"`;
        const problem = refnameProblem(packed[1]!);
        if (problem) return `line ${i + 1}: ${problem}`;
        if (GIT_REPLACE_REFS.test(packed[1]!)) return `line ${i + 1}: a replace ref (git reads another object for it)`;
      }
      return undefined;
    }
  }
}

/**
 * BISECT_START: what `git bisect start` writes, the branch it started on (its short name) or, on
 * a detached HEAD, the commit id. `git bisect reset` passes the content (trailing white space
 * trimmed) to `git checkout` as one argument, so a leading "-" would be an option there (`-f`
 * throws away the user's uncommitted changes). Empty: git takes it as no bisect.
 */
function bisectStartProblem(lines: string[]): string | undefined {
  if (lines.length !== 1) return "more than one line where git keeps the branch or commit a bisect started from";
  const line = lines[0]!;
  if (line === "" || OID_LINE.test(line)) return undefined;
  if (line.startsWith("-"))
    return `"${printable(line)}" starts with "-": the host's bisect reset would pass it to its checkout as an option`;
  if (!isBranchName(line)) return `"${printable(line)}" is neither an object id nor a valid branch name`;
  return undefined;
}

/** Whether git takes a short name for a branch's (check-ref-format --branch): no leading "-", not HEAD, refs/heads/<name> valid. */
export function isBranchName(name: string): boolean {
  return !name.startsWith("-") && name !== "HEAD" && refnameProblem(`refs/heads/${name}`) === undefined;
}

/**
 * git check-ref-format's rules (with --allow-onelevel off): no component starting with "." or
 * ending with ".lock", no "..", no control character, space, ~ ^ : ? * [ or backslash, no "@{",
 * no empty component, no trailing "." or "/", not "@".
 */
function refnameProblem(name: string): string | undefined {
  const bad = () => `"${printable(name)}" is not a valid ref name`;
  if (name === "@" || name.includes("..") || name.includes("@{") || name.endsWith(".")) return bad();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it rejects
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return bad();
  const parts = name.split("/");
  if (parts.length < 2) return bad();
  for (const part of parts) if (part === "" || part.startsWith(".") || part.endsWith(".lock")) return bad();
  return undefined;
}

function printable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: shown escaped, never raw
  return text.slice(0, 80).replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/**
 * The text without the spaces, tabs and line ends at its end. A loop, not `/[ \t\r\n]+$/`: that
 * regex backtracks from every position of a long run of blanks followed by anything else (80 KB of
 * a sandbox's packed-refs held the controller's thread 10 s; review, session 24).
 */
export function withoutTrailingBlanks(text: string): string {
  let end = text.length;
  while (end > 0) {
    const c = text.charCodeAt(end - 1);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0a) break;
    end--;
  }
  return text.slice(0, end);
}
