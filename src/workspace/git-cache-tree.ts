// The cached trees of a git index (its TREE extension): for a folder, the id of the tree object
// its entries make and how many entries it covers. git commits a valid cached tree as it is
// (cache-tree.c: `git commit` and `git write-tree` reuse it without reading the entries below), so
// an index whose entries are the user's files and whose cached tree for `lib/` is a tree the
// sandbox wrote makes the user's next commit carry that tree, while `git status` and `git diff
// --cached`, which compare entries, show nothing (checked with git 2.39: a backdoor file went into
// the host's commit of an unrelated change). So every valid cached tree must be the tree its
// entries make: computed here as cache-tree.c computes it, and compared. Pure; git-index-paths.ts
// calls it for each index the run created or changed.
import crypto from "node:crypto";

/** An index entry as this check reads it (git-index-paths.ts IndexEntry). */
interface Entry {
  name: Buffer;
  mode: number;
  oid?: Buffer;
  flags?: number;
}

const STAGE_MASK = 0x3000;
const CE_INTENT_TO_ADD = 1 << 29;
const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;

interface CachedTree {
  /** The folder, "" or ending in "/" (latin1: bytes as they are). */
  path: string;
  entryCount: number;
  oid?: Buffer;
}

/** Why the index's cached trees are not what its entries make, or undefined. */
export function cacheTreeProblem(index: {
  entries: readonly Entry[];
  cacheTree?: Buffer;
  split: boolean;
  hashBytes: number;
}): string | undefined {
  if (!index.cacheTree) return undefined;
  const nodes = readCachedTrees(index.cacheTree, index.hashBytes);
  if (typeof nodes === "string") return `its cached trees (TREE) do not read: ${nodes}`;
  const valid = nodes.filter((n) => n.entryCount >= 0);
  if (valid.length === 0) return undefined;
  if (index.split) return "a split index with cached trees, which cannot be checked here";
  const names = index.entries.map((e) => e.name.toString("latin1"));
  for (let i = 1; i < index.entries.length; i++) {
    const order = Buffer.compare(index.entries[i - 1]!.name, index.entries[i]!.name);
    if (order > 0 || (order === 0 && stageOf(index.entries[i - 1]!) >= stageOf(index.entries[i]!)))
      return "its entries are out of order";
  }
  const trees = new Map<string, { oid: Buffer; entries: number }>();
  buildTree(index.entries, names, 0, index.entries.length, "", index.hashBytes, trees);
  for (const node of valid) {
    const covered = trees.get(node.path)?.entries ?? 0;
    const shown = node.path === "" ? "the root" : JSON.stringify(node.path.slice(0, -1));
    if (covered !== node.entryCount)
      return `its cached tree of ${shown} claims ${node.entryCount} entries, where the index has ${covered}`;
    const made = trees.get(node.path)?.oid ?? hashObject("tree", Buffer.alloc(0), index.hashBytes);
    if (!node.oid?.equals(made))
      return `its cached tree of ${shown} is not the tree its entries make: host git would commit ${node.oid?.toString("hex")} instead`;
  }
  return undefined;
}

/** The TREE extension's nodes, pre-order (read without recursion: a crafted one may nest deep). */
function readCachedTrees(data: Buffer, hashBytes: number): CachedTree[] | string {
  const nodes: CachedTree[] = [];
  const pending: Array<{ path: string; left: number }> = [];
  let at = 0;
  let root = true;
  while (root || pending.length > 0) {
    const parent = pending[pending.length - 1];
    if (parent && parent.left === 0) {
      pending.pop();
      continue;
    }
    if (parent) parent.left--;
    const nul = data.indexOf(0, at);
    if (nul < 0) return "a name without its end";
    const name = data.toString("latin1", at, nul);
    const lf = data.indexOf(0x0a, nul + 1);
    if (lf < 0) return "counts without their end";
    const counts = /^(-1|\d{1,9}) (\d{1,9})$/.exec(data.toString("latin1", nul + 1, lf));
    if (!counts) return "counts that are not numbers";
    if (root ? name !== "" : name === "" || name.includes("/")) return "a folder name git does not write";
    const path = root ? "" : `${parent!.path}${name}/`;
    const node: CachedTree = { path, entryCount: Number(counts[1]) };
    at = lf + 1;
    if (node.entryCount >= 0) {
      if (at + hashBytes > data.length) return "a truncated object id";
      node.oid = data.subarray(at, at + hashBytes);
      at += hashBytes;
    }
    nodes.push(node);
    pending.push({ path, left: Number(counts[2]) });
    root = false;
  }
  return at === data.length ? nodes : "bytes after the last cached tree";
}

/**
 * The tree object the entries [lo, hi) (all below `prefix`) make, as cache-tree.c update_one
 * writes it: files by mode and id, folders as trees (a sparse index's folder entry by its own id),
 * unmerged and intent-to-add entries left out. Every folder's tree id and entry count (all entries
 * below it, as a cached tree counts them) go into `trees`; sorted names keep a folder's together.
 */
function buildTree(
  entries: readonly Entry[],
  names: readonly string[],
  lo: number,
  hi: number,
  prefix: string,
  hashBytes: number,
  trees: Map<string, { oid: Buffer; entries: number }>,
): Buffer {
  // An explicit stack, not recursion: one entry 5,000 folders deep (a 10 KB index) overflowed the
  // call stack, and the exception skipped the judgement's restore (review, session 24).
  interface Frame {
    lo: number;
    hi: number;
    prefix: string;
    next: number;
    parts: Buffer[];
    /** The name of the folder being built below this one. */
    child?: string;
  }
  const stack: Frame[] = [{ lo, hi, prefix, next: lo, parts: [] }];
  for (;;) {
    const frame = stack[stack.length - 1]!;
    if (frame.next >= frame.hi) {
      const oid = hashObject("tree", Buffer.concat(frame.parts), hashBytes);
      trees.set(frame.prefix, { oid, entries: frame.hi - frame.lo });
      stack.pop();
      const parent = stack[stack.length - 1];
      if (!parent) return oid;
      parent.parts.push(Buffer.from(`40000 ${parent.child}\0`, "latin1"), oid);
      continue;
    }
    const i = frame.next;
    const entry = entries[i]!;
    const rest = names[i]!.slice(frame.prefix.length);
    const slash = rest.indexOf("/");
    const sparseFolder = (entry.mode & S_IFMT) === S_IFDIR && slash === rest.length - 1;
    if (slash >= 0 && !sparseFolder) {
      const folder = `${frame.prefix}${rest.slice(0, slash + 1)}`;
      let end = i + 1;
      while (end < frame.hi && names[end]!.startsWith(folder)) end++;
      frame.child = rest.slice(0, slash);
      frame.next = end;
      stack.push({ lo: i, hi: end, prefix: folder, next: i, parts: [] });
      continue;
    }
    frame.next = i + 1;
    if (stageOf(entry) !== 0 || (entry.flags ?? 0) & CE_INTENT_TO_ADD || !entry.oid) continue;
    const name = sparseFolder ? rest.slice(0, -1) : rest;
    const mode = sparseFolder ? S_IFDIR : entry.mode;
    frame.parts.push(Buffer.from(`${mode.toString(8)} ${name}\0`, "latin1"), entry.oid);
  }
}

function stageOf(entry: Entry): number {
  return ((entry.flags ?? 0) & STAGE_MASK) >> 12;
}

function hashObject(type: string, body: Buffer, hashBytes: number): Buffer {
  return crypto
    .createHash(hashBytes === 32 ? "sha256" : "sha1")
    .update(`${type} ${body.length}\0`)
    .update(body)
    .digest();
}
