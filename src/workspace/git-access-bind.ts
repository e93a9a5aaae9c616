// Bind mode's way to the files the git checks read (git-work.ts GitAccess): the tree as the run
// left it through directory fds from its root (the container is stopped: nothing moves it, but any
// name may be a symlink, so none is followed), and the tree before the run from the kept copy
// (protected-copy.ts: every git directory's metadata and every protected path, with content).
import fs from "node:fs";
import { readAll } from "../util/read-fd.js";
import { openRoot } from "./fd-walk.js";
import { objectFormatOf } from "./git-object-store.js";
import { type GitAccess, inGitDir, type WorktreeEntry } from "./git-work.js";
import type { KeptEntry, ProtectedCopy } from "./protected-copy.js";
import { lstatBelow, openDirBelow, openFileAt } from "./remove-tree.js";

interface BindGitAccess extends GitAccess {
  close(): void;
}

/** Files above this size are read only when most of their bytes are on disk. */
const SPARSE_CHECK_ABOVE_BYTES = 1024 * 1024;

export function bindGitAccess(root: string, copy: ProtectedCopy, scratch: string): BindGitAccess {
  const rootFd = openRoot(root);
  let kept: Map<string, KeptEntry> | undefined;
  const row = (path: string) => {
    kept ??= copy.load([""]);
    return kept.get(path);
  };
  const keptContent = (entry: KeptEntry): Buffer | undefined =>
    entry.blob === undefined ? undefined : fs.readFileSync(copy.blobPath(entry.blob));
  // The folder of the last file opened stays open: object files come in walk order, a folder at a time.
  let folder: { path: string; fd: number | undefined } | undefined;
  const open = (path: string) => {
    const slash = path.lastIndexOf("/");
    const parent = slash < 0 ? "" : path.slice(0, slash);
    if (folder?.path !== parent) {
      if (folder?.fd !== undefined) fs.closeSync(folder.fd);
      folder = { path: parent, fd: openDirBelow(rootFd, parent) };
    }
    return folder.fd === undefined ? undefined : openFileAt(folder.fd, path.slice(slash + 1));
  };
  return {
    scratch,
    open,
    before(path, maxBytes) {
      const entry = row(path);
      if (!entry) return null;
      if (entry.kind !== "file" || entry.size > maxBytes) return undefined;
      return keptContent(entry);
    },
    beforeSize: (path) => row(path)?.size,
    listBefore(treePath) {
      kept ??= copy.load([""]);
      const prefix = treePath === "" ? "" : `${treePath}/`;
      return [...kept.values()].filter((e) => e.kind === "file" && e.path.startsWith(prefix)).map((e) => e.path);
    },
    after(path, maxBytes) {
      const fd = open(path);
      if (fd === undefined) return lstatBelow(rootFd, path) ? undefined : null;
      try {
        const { size, blocks } = fs.fstatSync(fd);
        if (size > maxBytes) return undefined;
        // Git never writes a file with holes: a sparse one costs the sandbox no disk and the
        // controller its whole size in memory (a 64 MiB reflog of nothing): it cannot be read.
        if (size > SPARSE_CHECK_ABOVE_BYTES && blocks * 512 < size / 2) return undefined;
        return readAll(fd, size);
      } finally {
        fs.closeSync(fd);
      }
    },
    worktreeBefore(path): WorktreeEntry | null | undefined {
      const entry = row(path);
      if (!entry || entry.kind === "directory") return null;
      if (entry.kind === "symlink") return { mode: 0o120000, content: Buffer.from(entry.hash ?? "") };
      if (entry.kind !== "file") return undefined;
      const content = keptContent(entry);
      return content && { mode: entry.mode & 0o100 ? 0o100755 : 0o100644, content };
    },
    stores(gitRoot) {
      const fd = openDirBelow(rootFd, inGitDir(gitRoot, "objects"));
      return {
        stores: fd === undefined ? [] : [{ fd }],
        loose: [],
        close: () => {
          if (fd !== undefined) fs.closeSync(fd);
        },
      };
    },
    format(gitRoot) {
      const entry = row(inGitDir(gitRoot, "config"));
      return objectFormatOf(entry?.kind === "file" ? keptContent(entry) : undefined);
    },
    close: () => {
      if (folder?.fd !== undefined) fs.closeSync(folder.fd);
      fs.closeSync(rootFd);
    },
  };
}
