// Packs a walked host tree into a tar stream for `tar -x` in the sandbox, reading each file once
// and hashing it on the way (the hash is the "before" fact a returned tree is compared with).
// Files are opened with O_NOFOLLOW and checked against the walk (same inode, still a regular
// file), so a path swapped for a symlink after the walk is refused, not followed.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import tar from "tar-stream";
import type { HostTree } from "./host-tree.js";
import type { TreeEntry } from "./tree-entry.js";

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const CHUNK_BYTES = 1024 * 1024;

export interface PackOptions {
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
  const pack = tar.pack();
  const modeOf = options.modeOf ?? ((e: TreeEntry) => e.mode);
  void (async () => {
    for (const entry of tree.entries) {
      const name = entry.path === "" ? "./" : `./${entry.path}${entry.kind === "directory" ? "/" : ""}`;
      const header = { name, mode: modeOf(entry), mtime: new Date(entry.mtimeMs), uid: 0, gid: 0 };
      if (entry.kind === "directory") await addEntry(pack, { ...header, type: "directory" });
      else if (entry.kind === "symlink") await addEntry(pack, { ...header, type: "symlink", linkname: entry.target });
      else await addFile(pack, tree, entry, header);
    }
    pack.finalize();
  })().catch((error: unknown) => pack.destroy(error as Error));
  return Readable.from(pack as unknown as AsyncIterable<Buffer>);
}

/** A tar with one file, `name`, holding the content of the host file `file` (e.g. the CA bundle). */
export function packSingleFile(file: string, name: string, mode = 0o644): Readable {
  const pack = tar.pack();
  pack.entry({ name, mode, type: "file" }, fs.readFileSync(file), (error) => {
    if (error) pack.destroy(error);
    else pack.finalize();
  });
  return Readable.from(pack as unknown as AsyncIterable<Buffer>);
}

type PackHeader = Parameters<tar.Pack["entry"]>[0];

function addEntry(pack: tar.Pack, header: PackHeader): Promise<void> {
  return new Promise((resolve, reject) => pack.entry(header, (error) => (error ? reject(error) : resolve())));
}

async function addFile(
  pack: tar.Pack,
  tree: HostTree,
  entry: TreeEntry,
  header: { name: string; mode: number; mtime: Date },
): Promise<void> {
  const file = path.join(tree.root, entry.path);
  const fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const stat = fs.fstatSync(fd);
    const facts = tree.facts.get(entry.path);
    if (!stat.isFile() || stat.ino !== facts?.ino || stat.size !== entry.size) {
      throw new Error(`${file} changed while the workspace was being copied`);
    }
    const hash = crypto.createHash("sha256");
    let sink!: ReturnType<tar.Pack["entry"]>;
    const done = new Promise<void>((resolve, reject) => {
      sink = pack.entry({ ...header, type: "file", size: entry.size }, (error) => (error ? reject(error) : resolve()));
    });
    const buffer = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, Math.max(entry.size, 1)));
    let offset = 0;
    while (offset < entry.size) {
      const read = fs.readSync(fd, buffer, 0, Math.min(buffer.length, entry.size - offset), offset);
      if (read === 0) throw new Error(`${file} shrank while the workspace was being copied`);
      // The sink keeps the chunk until it is written: hand it a copy, reuse our buffer.
      const chunk = Buffer.from(buffer.subarray(0, read));
      hash.update(chunk);
      offset += read;
      if (!sink.write(chunk)) await new Promise<void>((resolve) => sink.once("drain", () => resolve()));
    }
    sink.end(undefined);
    await done;
    entry.hash = hash.digest("hex");
  } finally {
    fs.closeSync(fd);
  }
}
