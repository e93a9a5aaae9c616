// The patch hand-back: the judged changes as a git-style patch, in the same format (and made by the
// same code, record/workspace-patch.ts) as a run record's `changes.patch`. Two private folders are
// filled with only the changed paths, the host's side as it was sent (checked by hash) and the
// returned side from the staging directory, and diffed. Git metadata (any `.git` path) is never
// part of it. Per file and in total the record's caps apply; what they leave out is noted.
import fs from "node:fs";
import path from "node:path";
import {
  COPY_YIELD_EVERY,
  diffSides,
  notedPath,
  PATCH_FILE_MAX_BYTES,
  PATCH_PATH_MAX_BYTES,
  PATCH_TOTAL_MAX_BYTES,
  patchNameProblem,
} from "../record/workspace-patch.js";
import { unquoteGitPath } from "../util/git-quoted-path.js";
import type { HostTree } from "../workspace-transfer/host-tree.js";
import { type ChangeContent, copySentContent, type JudgedChange } from "../workspace-transfer/judged-changes.js";
import type { TreeEntry } from "../workspace-transfer/tree-entry.js";
import { isGitMetadata } from "./git-paths.js";

export interface PatchHandBack {
  mode: "patch";
  /** The git-style patch ("" when nothing changed). */
  patch: string;
  /** What the patch leaves out, and why (empty when it has everything). */
  notes: string[];
  /** Files and symlinks in it. */
  files: number;
  bytes: number;
  /** Files it carries as git binary patches (at most 20): a reader of the patch sees none of their content. */
  binaryFiles: string[];
}

interface ChangePatchInput {
  changes: readonly JudgedChange[];
  /** The tree as sent (for the host's side of modified and deleted files). */
  sent: HostTree;
  /** A private folder of this run (the sides are made and removed in it). */
  privateDir: string;
  /** "the workspace /path", for messages. */
  what: string;
  /** The run's stop: the patch is abandoned once it fired. */
  signal?: AbortSignal;
}

export async function patchOfChanges(input: ChangePatchInput): Promise<PatchHandBack> {
  const scratch = fs.mkdtempSync(path.join(input.privateDir, "patch-"));
  const notes: string[] = [];
  try {
    const sides = { a: path.join(scratch, "a"), b: path.join(scratch, "b") };
    fs.mkdirSync(sides.a, { mode: 0o700 });
    fs.mkdirSync(sides.b, { mode: 0o700 });
    let total = 0;
    let files = 0;
    for (const [i, change] of input.changes.entries()) {
      // Filling the sides is file work in this process: other runs' streams get their turn.
      if (i > 0 && i % COPY_YIELD_EVERY === 0) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        input.signal?.throwIfAborted();
      }
      if (isGitMetadata(change.path)) continue;
      const skip = skipReason(change, total);
      if (skip) {
        notes.push(`${notedPath(change.path)} skipped: ${skip}`);
        continue;
      }
      total += (change.before?.size ?? 0) + (change.after?.size ?? 0);
      if (change.before) place(sides.a, change, change.before, { from: "sent-before" }, input);
      if (change.after) place(sides.b, change, change.after, change.content!, input);
      files++;
    }
    const bounds = input.signal ? { signal: input.signal } : {};
    const patch = files > 0 ? await diffSides(scratch, (line) => notes.push(line), bounds) : "";
    return { mode: "patch", patch, notes, files, bytes: Buffer.byteLength(patch), binaryFiles: binaryFilesOf(patch) };
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

const LISTED_BINARY = 20;

/** The files a git patch carries as binary patches, by their `diff --git a/<p> b/<p>` header. */
export function binaryFilesOf(patch: string): string[] {
  const found: string[] = [];
  let current: string | undefined;
  // Line starts only, no array of lines: a patch may hold millions of them.
  for (let start = 0; start < patch.length && found.length < LISTED_BINARY; ) {
    const newline = patch.indexOf("\n", start);
    const end = newline === -1 ? patch.length : newline;
    if (patch.startsWith("diff --git ", start)) current = headerPath(patch.slice(start + "diff --git ".length, end));
    else if (
      current !== undefined &&
      end - start === "GIT binary patch".length &&
      patch.startsWith("GIT binary patch", start)
    ) {
      found.push(current);
      current = undefined;
    }
    start = end + 1;
  }
  return found;
}

/**
 * The path of a `diff --git` header's "a/<p> b/<p>" (git C-quotes a name with bytes past ASCII, a
 * quote or a backslash: `"a/d\303\251ploy.sh"`; review, session 35: listed as `/d\303\251ploy.sh"`).
 */
function headerPath(pair: string): string {
  if (pair.startsWith('"')) {
    // The first name, quoted: up to its closing quote (a quote inside is escaped).
    const quoted = /^"(?:[^"\\]|\\.)*"/.exec(pair);
    if (quoted) return unquoteGitPath(quoted[0]).replace(/^a\//, "");
  }
  // Unquoted: the two halves are one path ("a/<p> b/<p>").
  const half = (pair.length - 1) / 2;
  return Number.isInteger(half) && pair.slice(2, half) === pair.slice(half + 3) ? pair.slice(2, half) : pair;
}

function skipReason(change: JudgedChange, total: number): string | undefined {
  if (Buffer.byteLength(change.path) > PATCH_PATH_MAX_BYTES) return `path longer than ${PATCH_PATH_MAX_BYTES} bytes`;
  const nameProblem = change.path.split("/").map(patchNameProblem).find(Boolean);
  if (nameProblem) return nameProblem;
  const largest = Math.max(change.before?.size ?? 0, change.after?.size ?? 0);
  if (largest > PATCH_FILE_MAX_BYTES) return `${largest} bytes (more than ${PATCH_FILE_MAX_BYTES / 1048576} MiB)`;
  const size = (change.before?.size ?? 0) + (change.after?.size ?? 0);
  if (total + size > PATCH_TOTAL_MAX_BYTES) return `the patch reached ${PATCH_TOTAL_MAX_BYTES / 1048576} MiB`;
  return undefined;
}

/** Puts one entry into a side: parents made one by one (never through a link), the entry created new. */
function place(
  side: string,
  change: JudgedChange,
  entry: TreeEntry,
  content: ChangeContent | { from: "sent-before" },
  input: ChangePatchInput,
): void {
  const rel = change.path;
  const parts = rel.split("/");
  let dir = side;
  for (const part of parts.slice(0, -1)) {
    dir = path.join(dir, part);
    const stat = fs.lstatSync(dir, { throwIfNoEntry: false });
    if (!stat) fs.mkdirSync(dir, { mode: 0o700 });
    else if (!stat.isDirectory()) throw new Error(`${rel}: a parent in the patch's side is not a directory`);
  }
  const file = path.join(dir, parts[parts.length - 1]!);
  // Keeps the execute bits (a patch shows mode changes), as the record's copies do.
  const mode = (entry.mode & 0o755) | 0o600;
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  switch (content.from) {
    case "target":
      fs.symlinkSync(content.target, file);
      return;
    case "sent-before":
      // A link has no mode of its own: chmod would follow it to whatever it names on this host
      // (a 0600 file it pointed at became 0755; review, session 45).
      if (entry.kind === "symlink") {
        fs.symlinkSync(entry.target ?? "", file);
        return;
      }
      copySentContent(input.sent, entry, input.what, file);
      break;
    case "sent":
      // Only the mode changed: the host's bytes as sent.
      copySentContent(input.sent, change.before!, input.what, file);
      break;
    case "empty":
      fs.closeSync(fs.openSync(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
      break;
    case "staged":
      fs.copyFileSync(content.file, file, fs.constants.COPYFILE_EXCL);
      break;
  }
  fs.chmodSync(file, mode);
}
