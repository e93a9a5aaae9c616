// The files of a git directory that name commits, read as data (pure): loose refs and HEAD
// (`<oid>` or `ref: <name>`), packed-refs (`<oid> <name>` lines, `^<oid>` peel lines), the
// `*_HEAD` files (one or more object ids; FETCH_HEAD's first column), and reflogs (`<old> <new>
// <who> <when>\t<message>` lines). git-plain-data.ts has already refused any of them that says
// more than git writes; here they are only read. A view reads a file of the git directory before
// or after the run: null when there is none, undefined when its content is not known (too large
// to have been kept, unreadable).

export type ReadFile = (relative: string) => Buffer | null | undefined;

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const ZERO = /^0+$/;

/** A loose ref or HEAD: an object id, or the name a symbolic ref points to. */
type RefValue = { oid: string } | { symref: string };

function parseRefFile(content: Buffer): RefValue | undefined {
  const text = content.toString("utf8").trim();
  if (text.startsWith("ref:")) return { symref: text.slice(4).trim() };
  const oid = text.toLowerCase();
  return OID.test(oid) ? { oid } : undefined;
}

/** packed-refs: name -> object id (peel lines, which name what a tag points to, are skipped). */
export function parsePackedRefs(content: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of content.toString("utf8").split("\n")) {
    const line = raw.replace(/\r$/, "");
    if (line === "" || line.startsWith("#") || line.startsWith("^")) continue;
    const space = line.indexOf(" ");
    const oid = line.slice(0, space).toLowerCase();
    if (space > 0 && OID.test(oid)) out.set(line.slice(space + 1), oid);
  }
  return out;
}

/** The object ids a `*_HEAD` file names (FETCH_HEAD: the first column of each line). */
export function oidsOf(content: Buffer): string[] {
  const out: string[] = [];
  for (const line of content.toString("utf8").split("\n")) {
    const first = line.split(/[\t ]/, 1)[0]!.trim().toLowerCase();
    if (OID.test(first) && !ZERO.test(first)) out.push(first);
  }
  return out;
}

/**
 * Reflog lines of `after` that `before` does not have (as a multiset), as the new object ids they
 * name. When the old content is not known, what lies past its old size (`beforeSize`) counts as
 * new: reflogs are appended to.
 */
export function newReflogOids(before: Buffer | null | undefined, after: Buffer, beforeSize = 0): string[] {
  const seen = new Map<string, number>();
  if (before) for (const line of lines(before)) seen.set(line, (seen.get(line) ?? 0) + 1);
  const appended = before === undefined ? after.subarray(Math.min(beforeSize, after.length)) : after;
  const out: string[] = [];
  for (const line of lines(appended)) {
    const left = seen.get(line) ?? 0;
    if (left > 0) {
      seen.set(line, left - 1);
      continue;
    }
    const oid = line.split(" ", 2)[1]?.toLowerCase();
    if (oid && OID.test(oid) && !ZERO.test(oid)) out.push(oid);
  }
  return out;
}

function lines(content: Buffer): string[] {
  return content
    .toString("utf8")
    .split("\n")
    .filter((l) => l !== "");
}

/** The name a reflog is the log of: logs/HEAD -> HEAD, logs/refs/heads/x -> refs/heads/x. */
export function refOfReflog(relative: string): string {
  return relative.slice("logs/".length);
}

const MAX_SYMREF_DEPTH = 5;

/**
 * What a ref name resolves to in one state of a git directory: its loose file (through symbolic
 * refs), else its packed-refs line. `packed` is that state's packed-refs. Undefined when it does
 * not resolve; "unknown" when a file on the way could not be read.
 */
export function resolveRef(
  read: ReadFile,
  packed: ReadonlyMap<string, string> | undefined,
  name: string,
): string | undefined | "unknown" {
  let current = name;
  for (let depth = 0; depth < MAX_SYMREF_DEPTH; depth++) {
    const loose = read(current);
    if (loose === undefined) return "unknown";
    if (loose !== null) {
      const value = parseRefFile(loose);
      if (!value) return undefined;
      if ("oid" in value) return ZERO.test(value.oid) ? undefined : value.oid;
      current = value.symref;
      continue;
    }
    if (!current.startsWith("refs/")) return undefined;
    if (packed === undefined) return "unknown";
    return packed.get(current);
  }
  return undefined;
}
