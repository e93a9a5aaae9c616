// The host tree copy mode sends: walked once before the container starts, with lstat only (no
// symlink is ever followed), in walk order. Each entry keeps what a later step needs: the facts a
// rule judges (TreeEntry; the content hash is filled in while the tree is packed) and the host
// facts the apply step checks before it touches a path (inode, owner, times).
// The walk goes through directory fds (workspace/fd-walk.ts): each folder is opened relative to its
// parent's fd with O_NOFOLLOW, checked against its lstat, and listed through that fd, so a folder
// swapped for a symlink meanwhile (by another process writing in the tree) is never followed; one
// whose identity changed fails the walk (workspaceChanged). The pack opens files the same way.
// What cannot travel is left out and said so: sockets, FIFOs, devices, names that are not UTF-8,
// files this user cannot read. Anything the sandbox later puts at such a path is a conflict, never
// an overwrite.
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { NOT_UTF8, WalkError, walkTree, yieldToEventLoop } from "../workspace/fd-walk.js";
import { isSparse } from "../workspace/workspace-snapshot.js";
import { comparePaths, TRAVELLING_MODE_BITS, type TreeEntry } from "./tree-entry.js";

export interface HostFacts {
  dev: number;
  ino: number;
  uid: number;
  gid: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

export interface SkippedEntry {
  path: string;
  reason: string;
}

export interface HostTree {
  /** Canonical absolute path of the root. */
  root: string;
  /** Walk order; entries[0] is the root (""). */
  entries: TreeEntry[];
  facts: Map<string, HostFacts>;
  /** Entries that do not travel, and directories whose contents could not be read. */
  skipped: SkippedEntry[];
  /** Bytes of file content. */
  bytes: number;
  /**
   * Sparse files (isSparse): the pack sends every file whole, so their holes would fill the
   * sandbox's copy. How many, their apparent bytes, and the largest few (to name them).
   */
  sparse: { count: number; bytes: number; largest: Array<{ path: string; size: number }> };
}

/** Sparse files a HostTree names. */
const MAX_NAMED_SPARSE = 5;

/** Entries handled between yields to the event loop. */
const YIELD_EVERY = 256;

/** The hint of every "the workspace changed while it was copied in" error. */
const CHANGED_HINT =
  "The workspace changed while it was being copied into the sandbox; run again when nothing else writes there.";

/** A folder or file of the tree is no longer the one the walk saw: nothing from it is sent. */
export function workspaceChanged(root: string, rel: string, cause?: unknown): SandboxRunError {
  return new SandboxRunError("usage", `${path.join(root, rel)} changed while the workspace was being copied in.`, {
    hint: CHANGED_HINT,
    cause,
  });
}

export async function walkHostTree(root: string): Promise<HostTree> {
  const rootStat = fs.lstatSync(root);
  if (!rootStat.isDirectory()) throw new Error(`${root} is not a directory`);
  const tree: HostTree = {
    root,
    entries: [],
    facts: new Map(),
    skipped: [],
    bytes: 0,
    sparse: { count: 0, bytes: 0, largest: [] },
  };
  let sinceYield = 0;
  let rootSeen = false;
  try {
    // The caller's own tree: every name is held (its size is the caller's), so no folder is overfull.
    for (const entry of walkTree(root, { maxHeldNames: Number.POSITIVE_INFINITY })) {
      rootSeen = true;
      if (entry.path === "") {
        // The root as opened (O_NOFOLLOW): the folder the path named when the walk looked.
        if (!entry.stat || entry.stat.dev !== rootStat.dev || entry.stat.ino !== rootStat.ino) {
          throw workspaceChanged(root, "");
        }
      } else if (entry.changed) {
        throw workspaceChanged(root, entry.path);
      }
      if (entry.kind === "unknown") continue; // could not be lstat'ed: as good as gone
      if (entry.problem === NOT_UTF8 || (entry.problem && entry.kind !== "directory")) {
        tree.skipped.push({ path: entry.path, reason: entry.problem });
        continue;
      }
      if (entry.kind !== "file" && entry.kind !== "directory" && entry.kind !== "symlink") {
        tree.skipped.push({ path: entry.path, reason: "it is not a file, directory or symbolic link" });
        continue;
      }
      record(tree, entry.path, entry.stat!, entry.at);
      // A folder the walk could not open or list travels empty.
      if (entry.problem)
        tree.skipped.push({ path: entry.path, reason: `its contents cannot be read (${entry.problem})` });
      // Synchronous calls are much cheaper per file; yielding now and then keeps other runs in
      // this process (their event streams) flowing. The walk's fds pin what it stands in.
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldToEventLoop();
      }
    }
  } catch (error) {
    // Past the root, a WalkError is a folder that was not where the walk left it (climbing back).
    if (rootSeen && error instanceof WalkError) throw workspaceChanged(root, "", error);
    throw error;
  }
  // The walk's order already (sorted pre-order); kept for callers that rely on it.
  tree.entries.sort((a, b) => comparePaths(a.path, b.path));
  return tree;
}

/** `at`: a path to the entry valid now ("/proc/self/fd/<its folder's fd>/<name>"). */
function record(tree: HostTree, rel: string, stat: fs.Stats, at: string | Buffer): void {
  const kind = stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "file";
  const entry: TreeEntry = {
    path: rel,
    kind,
    mode: stat.mode & TRAVELLING_MODE_BITS & (kind === "directory" ? 0o1777 : 0o777),
    size: kind === "file" ? stat.size : 0,
    mtimeMs: stat.mtimeMs,
  };
  if (kind === "file") {
    // The pack would fail on it half way through its tar header (review, session 29: a `chmod 000`
    // file or a root-owned leftover of `sudo` made every copy-mode run of a normal user an internal
    // error, "This is a bug").
    try {
      fs.accessSync(at, fs.constants.R_OK);
    } catch {
      tree.skipped.push({ path: rel, reason: "this user cannot read it" });
      return;
    }
  }
  if (kind === "symlink") {
    try {
      entry.target = fs.readlinkSync(at);
      entry.hash = entry.target;
    } catch {
      tree.skipped.push({ path: rel, reason: "its target cannot be read" });
      return;
    }
  }
  tree.entries.push(entry);
  tree.bytes += entry.size;
  if (kind === "file" && isSparse(stat)) noteSparse(tree.sparse, rel, stat.size);
  tree.facts.set(rel, {
    dev: stat.dev,
    ino: stat.ino,
    uid: stat.uid,
    gid: stat.gid,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
    ctimeMs: stat.ctimeMs,
  });
}

function noteSparse(sparse: HostTree["sparse"], rel: string, size: number): void {
  sparse.count++;
  sparse.bytes += size;
  const { largest } = sparse;
  if (largest.length === MAX_NAMED_SPARSE && largest[largest.length - 1]!.size >= size) return;
  largest.push({ path: rel, size });
  largest.sort((a, b) => b.size - a.size);
  if (largest.length > MAX_NAMED_SPARSE) largest.pop();
}
