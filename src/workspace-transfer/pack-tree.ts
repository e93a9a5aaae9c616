// Packs a walked host tree into a tar stream for `tar -x` in the sandbox, reading each file once
// and hashing it on the way (the hash is the "before" fact a returned tree is compared with).
// Files are opened as the walk reached them: relative to their folder's fd, each folder opened
// relative to its parent's with O_NOFOLLOW and checked against the walk's (dev, ino) (TreeDirs),
// the file itself with O_NOFOLLOW and checked the same way (and still a regular file of its size).
// So a file or a folder above it swapped (for a symlink, or anything else) after the walk fails the
// copy-in (workspaceChanged); nothing from outside the tree is sent.
import crypto from "node:crypto";
import fs from "node:fs";
import { Readable } from "node:stream";
import { type HostTree, workspaceChanged } from "./host-tree.js";
import { END_OF_ARCHIVE, padding, tarHeader } from "./tar-header.js";
import { TreeDirError, TreeDirs } from "./tree-dirs.js";
import { parentOf, type TreeEntry } from "./tree-entry.js";

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const CHUNK_BYTES = 1024 * 1024;

interface PackOptions {
  /**
   * The permission bits an entry gets inside the sandbox. Default: its own. Read-only trees give
   * everyone the owner's read and search bits (they are owned by another uid in there).
   */
  modeOf?: (entry: TreeEntry) => number;
}

/** For read-only trees: everyone may read (and search or run) what the owner may; nobody else may write. */
export function readableByAll(entry: TreeEntry): number {
  const owner = entry.mode & 0o700;
  const readAndSearch = owner & 0o500;
  return (entry.mode & 0o1000) | owner | (readAndSearch >> 3) | (readAndSearch >> 6);
}

/** A tar of `tree`; each file entry's `hash` is set as its content is read. */
export function packTree(tree: HostTree, options: PackOptions = {}): Readable {
  return Readable.from(batched(treeArchive(tree, options.modeOf ?? ((e) => e.mode))), { objectMode: false });
}

/** A tar with one file, `name`, holding the content of the host file `file` (e.g. the CA bundle). */
export function packSingleFile(file: string, name: string, mode = 0o644): Readable {
  const content = fs.readFileSync(file);
  const header = tarHeader({ name, type: "file", mode, size: content.length });
  return Readable.from([Buffer.concat([header, content, padding(content.length), END_OF_ARCHIVE])], {
    objectMode: false,
  });
}

function* treeArchive(tree: HostTree, modeOf: (entry: TreeEntry) => number): Generator<Buffer> {
  let dirs: TreeDirs;
  try {
    dirs = TreeDirs.open(tree.root, tree.facts);
  } catch (error) {
    throw changedOr(error, tree.root, "");
  }
  try {
    yield* entriesOf(tree, dirs, modeOf);
  } finally {
    dirs.close();
  }
}

function* entriesOf(tree: HostTree, dirs: TreeDirs, modeOf: (entry: TreeEntry) => number): Generator<Buffer> {
  for (const entry of tree.entries) {
    const name = entry.path === "" ? "./" : `./${entry.path}${entry.kind === "directory" ? "/" : ""}`;
    const header = { name, mode: modeOf(entry), mtimeMs: entry.mtimeMs };
    if (entry.kind === "directory") yield tarHeader({ ...header, type: "directory" });
    else if (entry.kind === "symlink") yield tarHeader({ ...header, type: "symlink", linkname: entry.target });
    else {
      yield tarHeader({ ...header, type: "file", size: entry.size });
      yield* fileContent(tree, dirs, entry);
      yield padding(entry.size);
    }
  }
  yield END_OF_ARCHIVE;
}

function* fileContent(tree: HostTree, dirs: TreeDirs, entry: TreeEntry): Generator<Buffer> {
  let fd: number;
  try {
    fd = fs.openSync(dirs.at(entry.path), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    throw changedOr(dirs.shown(error), tree.root, error instanceof TreeDirError ? parentOf(entry.path) : entry.path);
  }
  try {
    const stat = fs.fstatSync(fd);
    const facts = tree.facts.get(entry.path);
    if (!stat.isFile() || stat.ino !== facts?.ino || stat.dev !== facts.dev || stat.size !== entry.size) {
      throw workspaceChanged(tree.root, entry.path);
    }
    const hash = crypto.createHash("sha256");
    for (let offset = 0; offset < entry.size; ) {
      // A fresh buffer per read: the archive hands it on without copying.
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, entry.size - offset));
      const read = fs.readSync(fd, chunk, 0, chunk.length, offset);
      if (read === 0) throw workspaceChanged(tree.root, entry.path);
      const data = read === chunk.length ? chunk : chunk.subarray(0, read);
      hash.update(data);
      offset += read;
      yield data;
    }
    entry.hash = hash.digest("hex");
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The "changed" error for a TreeDirError (a folder is not the walk's) or an open that met a
 * symlink, a non-folder or nothing where the walk saw an entry; any other error as it is.
 */
function changedOr(error: unknown, root: string, rel: string): unknown {
  const code = (error as NodeJS.ErrnoException)?.code;
  if (error instanceof TreeDirError || code === "ELOOP" || code === "ENOTDIR" || code === "ENOENT") {
    return workspaceChanged(root, rel, error);
  }
  return error;
}

/** Joins small buffers (headers, small files) into chunks of about 1 MiB. */
function* batched(parts: Iterable<Buffer>): Generator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  for (const part of parts) {
    if (part.length >= CHUNK_BYTES) {
      if (size > 0) yield Buffer.concat(pending, size);
      pending = [];
      size = 0;
      yield part;
      continue;
    }
    pending.push(part);
    size += part.length;
    if (size >= CHUNK_BYTES) {
      yield Buffer.concat(pending, size);
      pending = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(pending, size);
}
