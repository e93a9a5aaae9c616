// A tree as copy mode sees it: one entry per path, in walk order, with the facts a rule can judge
// (kind, permission bits, size, content hash). The tree sent into the sandbox and the tree it
// returned are both lists of these, so checks compare two lists without touching any filesystem.

import type { HostRunChange } from "../workspace/workspace-rules.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";

export type TreeEntryKind = "file" | "directory" | "symlink";

export interface TreeEntry {
  /** Relative to the root, "/"-separated; "" is the root itself. */
  path: string;
  kind: TreeEntryKind;
  /** Permission bits (0o1777 at most: setuid and setgid never travel either way). */
  mode: number;
  /** Bytes of a file's content; 0 otherwise. */
  size: number;
  /** sha256 (hex) of a file's content; a symlink's target. Absent for directories. */
  hash?: string;
  /** A symlink's target. */
  target?: string;
  mtimeMs: number;
  /**
   * Returned trees only: the permission bits the archive gave, where the reader cleared some of
   * them (setuid, setgid, group/world-write the run added). The rules judge these; `mode` is
   * what is applied.
   */
  modeAsReturned?: number;
}

/** A violation a check found in a returned tree; the run fails and nothing is applied. */
export interface TreeViolation {
  path: string;
  /** `mode`: only permission bits changed; `unreadable`: the sandbox made an entry unreadable. */
  change: "created" | "modified" | "deleted" | "mode" | "unreadable";
  rule?: string;
  /** Why the entry breaks its rule, where a rule says (the git rules). */
  detail?: string;
}

/**
 * A check's verdict on one returned tree: its violations (any fails the run, nothing is applied)
 * and what it found that host tools follow or misread (reported, not refused: workspace-rules.ts
 * HostRunList, at most 100 of each kind listed, all counted).
 */
export interface TreeJudgement {
  violations: TreeViolation[];
  hostRun: HostRunChange[];
  hostRunCount: number;
}

/** What a check may read of a returned tree beyond its entry list (returned-tar.ts ReturnedTree has it). */
export interface ReturnedTreeFacts {
  /** Entries left out of the returned tree for their kind (FIFOs, devices), by path. */
  refusedKinds: ReadonlyMap<string, "fifo" | "device">;
  /** A returned file's content, at most maxBytes; undefined when it cannot be read. */
  contentOf(path: string, maxBytes: number): Buffer | undefined;
  /**
   * Where a returned file's content is, for reading it in place: its private staged copy, or the
   * host's own file when it came back unchanged; undefined for an empty file.
   */
  contentFile?(path: string): string | undefined;
  /** Drops entries (and all below them) from the returned tree: the apply then removes them from the host. */
  leaveOut?(paths: readonly string[]): void;
}

/**
 * The check copy mode runs on a returned tree before anything reaches the host: the tree that was
 * sent (`before`) and the one that came back (`after`), both in walk order, and what else the
 * reader knows of it (`returned`: entries it left out, content). The workspace's rules (protected
 * paths, git safety) plug in here.
 */
export type ReturnedTreeCheck = ReturnedTreeJudge & {
  /**
   * Before anything is sent: reads what it needs of the lent trees as they are (their configs), so
   * a tree it cannot judge is refused before the run, not after it.
   */
  prepare?(lent: ReadonlyArray<{ hostPath: string; entries: readonly TreeEntry[] }>): void;
};

type ReturnedTreeJudge = (
  before: readonly TreeEntry[],
  after: readonly TreeEntry[],
  root: { hostPath: string; kind: "workspace" | "writable-root" },
  returned?: ReturnedTreeFacts,
  /**
   * Every tree the run was lent, as sent in (this one included): a config in one names paths in
   * another (an `.envrc`'s `PATH_add ../toolchain/bin`), so what they name is read over all of them.
   */
  lent?: ReadonlyArray<{ hostPath: string; entries: readonly TreeEntry[] }>,
  /**
   * A branch hand-back: the changed paths it will leave out (ignored, in nested repositories or
   * submodules; hand-back/branch-commit.ts branchSelection). The host keeps its own entries there.
   */
  leftOut?: (path: string) => boolean,
) => Promise<TreeJudgement>;

/** Permission bits that travel; setuid and setgid are dropped both ways. */
export const TRAVELLING_MODE_BITS = 0o1777;

/** Walk order: the host walk's (component by component, names by UTF-16 code units, parents first). */
export { comparePaths } from "../workspace/fd-walk.js";

/** The folder a tree path is in ("" for the root's children). */
export function parentOf(rel: string): string {
  const slash = rel.lastIndexOf("/");
  return slash < 0 ? "" : rel.slice(0, slash);
}

/** Whether an entry present on both sides changed (kind, permission bits, content or target). */
export function treeEntryChanged(before: TreeEntry, after: TreeEntry): boolean {
  if (before.kind !== after.kind || before.mode !== after.mode) return true;
  if (before.kind === "directory") return false;
  return before.size !== after.size || before.hash !== after.hash;
}

/** Created, modified and deleted files and symlinks (directories are implied by their contents). */
export function diffTrees(before: readonly TreeEntry[], after: readonly TreeEntry[]): ChangedFiles {
  const nonDirectories = (entries: readonly TreeEntry[]) =>
    new Map(entries.filter((e) => e.kind !== "directory").map((e) => [e.path, e]));
  const old = nonDirectories(before);
  const now = nonDirectories(after);
  const created: string[] = [];
  const modified: string[] = [];
  for (const [path, entry] of now) {
    const was = old.get(path);
    if (!was) created.push(path);
    else if (treeEntryChanged(was, entry)) modified.push(path);
  }
  const deleted = [...old.keys()].filter((path) => !now.has(path));
  return { created: created.sort(), modified: modified.sort(), deleted: deleted.sort() };
}
