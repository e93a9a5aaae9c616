// A judged returned tree as a list of changes, for a hand-back that does not apply it (a branch
// commit, a patch): every file and symlink the run created, changed or deleted, with where its new
// content is. Directories are implied by their contents (neither git nor a patch records them).
// Content comes only from places the sandbox never held: the private staging directory the
// returned tar was read into, or the host's own file, read again and checked against the hash it
// had when it was sent.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import type { HostTree } from "./host-tree.js";
import { EMPTY_FILE, type ReturnedTree } from "./returned-tar.js";
import { comparePaths, type TreeEntry, treeEntryChanged } from "./tree-entry.js";

/** Where a changed entry's new content is. */
export type ChangeContent =
  /** A regular file in the private staging directory. */
  | { from: "staged"; file: string }
  | { from: "empty" }
  /** The bytes the host's file had when it was sent (only its mode changed): readSentContent. */
  | { from: "sent" }
  /** A symbolic link: its target is its content. */
  | { from: "target"; target: string };

export interface JudgedChange {
  /** Relative to the tree's root, "/"-separated. */
  path: string;
  /** The file or symlink the host had there when the run started; absent when the run created it. */
  before?: TreeEntry;
  /** The file or symlink the returned tree has there; absent when the run deleted it. */
  after?: TreeEntry;
  /** With `after`: where its content is. */
  content?: ChangeContent;
}

/** Every file and symlink that differs between the tree sent and the judged tree returned, in walk order. */
export function judgedChanges(before: HostTree, returned: ReturnedTree): JudgedChange[] {
  const nonDirectories = (entries: readonly TreeEntry[]) =>
    new Map(entries.filter((e) => e.kind !== "directory").map((e) => [e.path, e]));
  const old = nonDirectories(before.entries);
  const now = nonDirectories(returned.after);
  const changes: JudgedChange[] = [];
  for (const [rel, was] of old) if (!now.has(rel)) changes.push({ path: rel, before: was });
  for (const [rel, entry] of now) {
    const was = old.get(rel);
    if (was && !treeEntryChanged(was, entry)) continue;
    changes.push({
      path: rel,
      ...(was ? { before: was } : {}),
      after: entry,
      content: contentOf(rel, entry, returned),
    });
  }
  return changes.sort((a, b) => comparePaths(a.path, b.path));
}

function contentOf(rel: string, entry: TreeEntry, returned: ReturnedTree): ChangeContent {
  if (entry.kind === "symlink") return { from: "target", target: entry.target ?? "" };
  const staged = returned.staged.get(rel);
  if (staged === EMPTY_FILE) return { from: "empty" };
  if (staged !== undefined) return { from: "staged", file: staged };
  // Not staged: the returned bytes equal the host's (only the mode changed).
  return entry.size === 0 ? { from: "empty" } : { from: "sent" };
}

/**
 * Copies the content the host file `sent` (a change's `before`) had when it was sent into
 * `destination` (a new file, created exclusively): read without following a link, checked to be the
 * same inode, size and sha256 as then. A host change since is a usage error (nothing handed back).
 */
export function copySentContent(tree: HostTree, sent: TreeEntry, what: string, destination: string): void {
  const rel = sent.path;
  const facts = tree.facts.get(rel);
  const changed = () =>
    new SandboxRunError(
      "not-applied",
      `The run's changes to ${what} were not handed back: ${rel} changed on the host during the run. Nothing was written.`,
      { hint: "Do not change a workspace on the host while a copy-mode run works on it; then run again." },
    );
  if (sent.kind !== "file" || !facts) throw changed();
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;
  let from: number;
  try {
    from = fs.openSync(path.join(tree.root, rel), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    throw changed();
  }
  let to: number | undefined;
  try {
    const stat = fs.fstatSync(from);
    if (!stat.isFile() || stat.ino !== facts.ino || stat.size !== sent.size) throw changed();
    to = fs.openSync(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    const hash = crypto.createHash("sha256");
    const buffer = Buffer.allocUnsafe(Math.min(COPY_CHUNK, Math.max(1, sent.size)));
    let copied = 0;
    for (;;) {
      const n = fs.readSync(from, buffer, 0, buffer.length, copied);
      if (n === 0) break;
      hash.update(buffer.subarray(0, n));
      fs.writeSync(to, buffer, 0, n);
      copied += n;
      if (copied > sent.size) break;
    }
    if (copied !== sent.size || hash.digest("hex") !== sent.hash) throw changed();
  } finally {
    fs.closeSync(from);
    if (to !== undefined) fs.closeSync(to);
  }
}

const COPY_CHUNK = 1024 * 1024;
