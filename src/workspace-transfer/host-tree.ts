// The host tree copy mode sends: walked once before the container starts, with lstat only (no
// symlink is ever followed), in walk order. Each entry keeps what a later step needs: the facts a
// rule judges (TreeEntry; the content hash is filled in while the tree is packed) and the host
// facts the apply step checks before it touches a path (inode, owner, times).
// What cannot travel is left out and said so: sockets, FIFOs, devices, names that are not UTF-8,
// files this user cannot read. Anything the sandbox later puts at such a path is a conflict, never
// an overwrite.
import fs from "node:fs";
import path from "node:path";
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
}

/** Entries handled between yields to the event loop. */
const YIELD_EVERY = 256;

export async function walkHostTree(root: string): Promise<HostTree> {
  const rootStat = fs.lstatSync(root);
  if (!rootStat.isDirectory()) throw new Error(`${root} is not a directory`);
  const tree: HostTree = { root, entries: [], facts: new Map(), skipped: [], bytes: 0 };
  record(tree, "", rootStat);
  // Directories still to list; the entries are put in walk order once all are known.
  const stack: string[] = [""];
  let sinceYield = 0;
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let names: Buffer[];
    try {
      names = fs.readdirSync(path.join(root, dir), { encoding: "buffer" });
    } catch (error) {
      tree.skipped.push({
        path: dir,
        reason: `its contents cannot be read (${(error as NodeJS.ErrnoException).code})`,
      });
      continue;
    }
    const children: Array<{ rel: string; stat: fs.Stats }> = [];
    // (Listing order does not matter: the entries are sorted into walk order at the end.)
    for (const raw of names) {
      const name = raw.toString("utf8");
      const rel = dir ? `${dir}/${name}` : name;
      if (!Buffer.from(name, "utf8").equals(raw)) {
        tree.skipped.push({ path: rel, reason: "its name is not valid UTF-8" });
        continue;
      }
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(path.join(root, rel));
      } catch {
        continue; // gone since the listing
      }
      if (!stat.isFile() && !stat.isDirectory() && !stat.isSymbolicLink()) {
        tree.skipped.push({ path: rel, reason: "it is not a file, directory or symbolic link" });
        continue;
      }
      children.push({ rel, stat });
    }
    for (const { rel, stat } of children) {
      record(tree, rel, stat);
      if (stat.isDirectory()) stack.push(rel);
      // Synchronous calls are much cheaper per file; yielding now and then keeps other runs in
      // this process (their event streams) flowing.
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }
  tree.entries.sort((a, b) => comparePaths(a.path, b.path));
  return tree;
}

function record(tree: HostTree, rel: string, stat: fs.Stats): void {
  const kind = stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "file";
  const entry: TreeEntry = {
    path: rel,
    kind,
    mode: stat.mode & TRAVELLING_MODE_BITS & (kind === "directory" ? 0o1777 : 0o777),
    size: kind === "file" ? stat.size : 0,
    mtimeMs: stat.mtimeMs,
  };
  if (kind === "symlink") {
    try {
      entry.target = fs.readlinkSync(path.join(tree.root, rel));
      entry.hash = entry.target;
    } catch {
      tree.skipped.push({ path: rel, reason: "its target cannot be read" });
      return;
    }
  }
  tree.entries.push(entry);
  tree.bytes += entry.size;
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
