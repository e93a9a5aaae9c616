// Copy mode's way to the files the git checks read (workspace/git-work.ts GitAccess): the returned
// tree through its private staged copies (or the host's own file where it came back unchanged),
// and the tree before the run from the host, which the sandbox never wrote. Nothing here writes to
// the host tree: the private repository's new packs are links in the run's private folder, and its
// loose objects are added to it as one pack (git-object-reader.ts).
import fs from "node:fs";
import path from "node:path";
import { readSmallFile } from "../../util/read-fd.js";
import { objectFormatOf } from "../../workspace/git-object-store.js";
import type { GitAccess, WorktreeEntry } from "../../workspace/git-work.js";
import type { ReturnedTreeFacts, TreeEntry } from "../../workspace-transfer/tree-entry.js";

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
/** What a worktree file before the run may be read up to, to compare it with a commit's blob. */
const WORKTREE_MAX_BYTES = 16 * 1024 * 1024;

/** The GitAccess of one returned tree (`scratch`: a private folder of the run). */
export function copyGitAccess(
  hostPath: string,
  before: readonly TreeEntry[],
  after: readonly TreeEntry[],
  returned: ReturnedTreeFacts,
  scratch: string,
): GitAccess {
  const beforeOf = new Map(before.map((e) => [e.path, e]));
  const afterOf = new Map(after.map((e) => [e.path, e]));
  const hostFile = (rel: string, maxBytes: number) => readSmallFile(path.join(hostPath, rel), maxBytes);
  const access: GitAccess = {
    scratch,
    open(rel) {
      const entry = afterOf.get(rel);
      const file = entry?.kind === "file" ? returned.contentFile?.(rel) : undefined;
      return file === undefined ? undefined : openNoFollow(file);
    },
    before(rel, maxBytes) {
      const entry = beforeOf.get(rel);
      if (!entry) return null;
      return entry.kind === "file" && entry.size <= maxBytes ? hostFile(rel, maxBytes) : undefined;
    },
    beforeSize: (rel) => beforeOf.get(rel)?.size,
    listBefore(treePath) {
      const prefix = treePath === "" ? "" : `${treePath}/`;
      return before.filter((e) => e.kind === "file" && e.path.startsWith(prefix)).map((e) => e.path);
    },
    after(rel, maxBytes) {
      const entry = afterOf.get(rel);
      if (!entry) return null;
      return entry.kind === "file" ? returned.contentOf(rel, maxBytes) : undefined;
    },
    worktreeBefore(rel): WorktreeEntry | null | undefined {
      const entry = beforeOf.get(rel);
      if (!entry || entry.kind === "directory") return null;
      if (entry.kind === "symlink") return { mode: 0o120000, content: Buffer.from(entry.target ?? "") };
      const content = hostFile(rel, WORKTREE_MAX_BYTES);
      return content && { mode: entry.mode & 0o100 ? 0o100755 : 0o100644, content };
    },
    stores(gitRoot, changes) {
      // The run's new packs, linked by their names in a private folder; its loose objects, to be
      // added to the private repository; then the host's own store.
      const fileOf = (relative: string) => {
        const rel = gitRoot === "" ? relative : `${gitRoot}/${relative}`;
        return afterOf.get(rel)?.kind === "file" ? returned.contentFile?.(rel) : undefined;
      };
      const dir = fs.mkdtempSync(path.join(scratch, "new-packs-"));
      const loose: Array<{ oid: string; file: string }> = [];
      for (const change of changes) {
        const pack = /^objects\/pack\/(pack-[^/]+)\.(pack|idx)$/.exec(change.relative);
        const object = /^objects\/([0-9a-f]{2})\/([0-9a-f]{38}|[0-9a-f]{62})$/.exec(change.relative);
        if (pack) {
          fs.mkdirSync(path.join(dir, "pack"), { recursive: true, mode: 0o700 });
          for (const ext of ["pack", "idx"]) {
            const file = fileOf(`objects/pack/${pack[1]}.${ext}`);
            const at = path.join(dir, "pack", `${pack[1]}.${ext}`);
            if (file !== undefined && !fs.existsSync(at)) fs.symlinkSync(file, at);
          }
        } else if (object) {
          const file = fileOf(change.relative);
          if (file !== undefined) loose.push({ oid: object[1]! + object[2]!, file });
        }
      }
      const own = path.join(hostPath, gitRoot, "objects");
      return {
        stores: [{ path: dir }, ...(fs.existsSync(own) ? [{ path: own }] : [])],
        loose,
        close: () => {},
      };
    },
    format: (gitRoot) => objectFormatOf(access.before(gitRoot === "" ? "config" : `${gitRoot}/config`, 1024 * 1024)),
  };
  return access;
}

function openNoFollow(file: string): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  if (fs.fstatSync(fd).isFile()) return fd;
  fs.closeSync(fd);
  return undefined;
}
