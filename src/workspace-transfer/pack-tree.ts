// Packs a walked host tree into a tar stream for `tar -x` in the sandbox, reading each file once
// and hashing it on the way (the hash is the "before" fact a returned tree is compared with).
// Files are opened with O_NOFOLLOW and checked against the walk (same inode, still a regular
// file), so a path swapped for a symlink after the walk is refused, not followed.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import type { HostTree } from "./host-tree.js";
import { END_OF_ARCHIVE, padding, tarHeader } from "./tar-header.js";
import type { TreeEntry } from "./tree-entry.js";

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
  for (const entry of tree.entries) {
    const name = entry.path === "" ? "./" : `./${entry.path}${entry.kind === "directory" ? "/" : ""}`;
    const header = { name, mode: modeOf(entry), mtimeMs: entry.mtimeMs };
    if (entry.kind === "directory") yield tarHeader({ ...header, type: "directory" });
    else if (entry.kind === "symlink") yield tarHeader({ ...header, type: "symlink", linkname: entry.target });
    else {
      yield tarHeader({ ...header, type: "file", size: entry.size });
      yield* fileContent(tree, entry);
      yield padding(entry.size);
    }
  }
  yield END_OF_ARCHIVE;
}

function* fileContent(tree: HostTree, entry: TreeEntry): Generator<Buffer> {
  const file = path.join(tree.root, entry.path);
  const fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.ino !== tree.facts.get(entry.path)?.ino || stat.size !== entry.size) {
      throw new Error(`${file} changed while the workspace was being copied`);
    }
    const hash = crypto.createHash("sha256");
    for (let offset = 0; offset < entry.size; ) {
      // A fresh buffer per read: the archive hands it on without copying.
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, entry.size - offset));
      const read = fs.readSync(fd, chunk, 0, chunk.length, offset);
      if (read === 0) throw new Error(`${file} shrank while the workspace was being copied`);
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
