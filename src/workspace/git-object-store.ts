// What a file of a git object store is, by its path relative to its git directory. Git finds
// objects by name and does not check that what it reads under a name is what the name says: a
// loose object is inflated and used, a pack's .idx says which object sits at which offset, and
// the caches derived from them (commit-graph, multi-pack-index, reverse indexes, bitmaps) are
// believed as they are. So each kind is judged differently (git-object-check.ts):
//   loose     objects/<2 hex>/<38 or 62 hex>: must inflate to content whose hash is its name
//   pack/idx  objects/pack/<any name>.pack and .idx (git loads every .idx that has its .pack,
//             whatever the name: not only pack-<checksum>): the .idx must be the one git makes
//             from the pack
//   derived   commit-graph(s), multi-pack-index, *.rev, *.bitmap: removed, git rebuilds them
//   lfs       lfs/objects/<2>/<2>/<64 hex>: git-lfs's store, content whose sha256 is its name
//   other     a pack's .keep, .promisor and .mtimes, info/packs, and what git-lfs keeps beside
//             its objects: git never reads them as objects
//   stray     anything else under objects/ (temporary files, names git would never look up, and
//             whatever kind git may learn to load that is not listed here): removed, judged by
//             what it is not rather than trusted by its name
// Pure; the alternates files are not store files at all (builtin-protections.ts refuses them).

import { parseGitConfig } from "./git-config-parse.js";

type StoreFile =
  | { kind: "loose"; oid: string }
  | { kind: "pack"; stem: string }
  | { kind: "pack-index"; stem: string }
  | { kind: "derived" }
  | { kind: "lfs"; oid: string }
  | { kind: "other" }
  | { kind: "stray" };

const LOOSE = /^objects\/([0-9a-f]{2})\/([0-9a-f]{38}|[0-9a-f]{62})$/;
const PACK = /^objects\/pack\/([^/]+)\.(pack|idx)$/;
/** Files beside the objects that git reads, but never as objects. */
const AUXILIARY = [/^objects\/pack\/[^/]+\.(keep|promisor|mtimes)$/, /^objects\/info\/packs$/];
const LFS = /^lfs\/objects\/([0-9a-f]{2})\/([0-9a-f]{2})\/([0-9a-f]{64})$/;
/**
 * Caches git trusts without checking them against the objects: commit-graph (a commit's tree and
 * parents), multi-pack-index (which object sits where, in which pack), reverse indexes and
 * bitmaps (offsets and reachability). Incremental multi-pack-index chains live in
 * multi-pack-index.d/.
 */
const DERIVED = [
  /^objects\/info\/commit-graph$/,
  /^objects\/info\/commit-graphs\//,
  /^objects\/pack\/multi-pack-index$/,
  /^objects\/pack\/multi-pack-index\.d\//,
  /^objects\/pack\/[^/]+\.(rev|bitmap)$/,
];

/** What a path (relative to its git directory) of the object store is. */
export function storeFileOf(relative: string): StoreFile {
  const loose = LOOSE.exec(relative);
  if (loose) return { kind: "loose", oid: loose[1]! + loose[2]! };
  const pack = PACK.exec(relative);
  if (pack) return { kind: pack[2] === "pack" ? "pack" : "pack-index", stem: pack[1]! };
  if (DERIVED.some((re) => re.test(relative))) return { kind: "derived" };
  const lfs = LFS.exec(relative);
  if (lfs && lfs[3]!.startsWith(lfs[1]! + lfs[2]!)) return { kind: "lfs", oid: lfs[3]! };
  if (relative.startsWith("objects/") && !AUXILIARY.some((re) => re.test(relative))) return { kind: "stray" };
  return { kind: "other" };
}

/**
 * What goes when a derived cache the run wrote is removed (relative to the git directory): a
 * commit-graph chain is its chain file and its layers, a multi-pack-index its incremental chain,
 * so a change to one part drops the whole (git reads a chain whose layer is gone as broken).
 */
export function derivedRemovals(relative: string): string[] {
  if (/^objects\/info\/commit-graphs?(\/|$)/.test(relative))
    return ["objects/info/commit-graph", "objects/info/commit-graphs"];
  if (/^objects\/pack\/multi-pack-index(\.d\/|$)/.test(relative))
    return ["objects/pack/multi-pack-index", "objects/pack/multi-pack-index.d"];
  return [relative];
}

/** The hash a repository uses, from its config (extensions.objectFormat); sha1 unless it says sha256. */
export function objectFormatOf(config: Buffer | null | undefined): "sha1" | "sha256" {
  if (!config) return "sha1";
  let format: string | null | undefined;
  for (const entry of parseGitConfig(config.toString("utf8")))
    if (entry.name === "extensions.objectformat") format = entry.value;
  return format?.toLowerCase() === "sha256" ? "sha256" : "sha1";
}

/** The hash a loose object's name is made with, by its length. */
export function hashOfOid(oid: string): "sha1" | "sha256" {
  return oid.length === 64 ? "sha256" : "sha1";
}
