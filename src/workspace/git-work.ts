// What the rule walk notes for the git checks that need more than one entry at a time (content,
// the host's git): the object-store files the run created or changed (git-object-check.ts) and
// the files that name commits or index entries it created, changed or deleted (git-ref-check.ts).
// Both modes fill it the same way (the rule evaluator); each mode says how to reach the files
// (GitAccess): bind mode through directory fds in the tree the sandbox left and the kept copy,
// copy mode through the returned tree's staged content and the host's own files.
import type { EntryKind } from "./fd-walk.js";
import type { ObjectStore } from "./git-object-reader.js";

/** The facts of an entry the checks read (workspace-rules.ts EntryFacts has them). */
export interface StoreFacts {
  kind: EntryKind;
  size: number;
  hash?: string;
  mtimeMs?: number;
  ctimeMs?: number;
  ino?: number;
}

export interface StoreChange {
  /** Relative to the tree's root. */
  path: string;
  /** The git directory it is in (relative to the tree's root). */
  gitRoot: string;
  /** Relative to the git directory. */
  relative: string;
  change: "created" | "modified";
  before?: StoreFacts;
  after: StoreFacts;
}

export interface PointerChange {
  path: string;
  gitRoot: string;
  relative: string;
  change: "created" | "modified" | "deleted";
}

/** Object-store files listed for checking; past this each is a violation of its own (removed unchecked). */
export const MAX_STORE_CHANGES = 250_000;
/** Pointer files listed per tree; past this the git directories with more are refused as a whole. */
const MAX_POINTER_CHANGES = 50_000;

export class GitWork {
  readonly store: StoreChange[] = [];
  readonly pointers: PointerChange[] = [];
  /** Git directories whose pointer changes were too many to list. */
  readonly pointerOverflow = new Set<string>();
  /** Every git directory the walk met (relative to the tree's root). */
  readonly gitRoots = new Set<string>();

  /** Whether a store change was listed (false: too many, the caller refuses it unchecked). */
  addStore(change: StoreChange): boolean {
    if (this.store.length >= MAX_STORE_CHANGES) return false;
    this.store.push(change);
    return true;
  }

  addPointer(change: PointerChange): void {
    if (this.pointers.length >= MAX_POINTER_CHANGES) this.pointerOverflow.add(change.gitRoot);
    else this.pointers.push(change);
  }
}

/** A worktree entry before the run, as git records it: its mode (100644, 100755, 120000) and content. */
export interface WorktreeEntry {
  mode: number;
  content: Buffer;
}

/** How the git checks reach one tree's files (bind mode and copy mode each implement it). */
export interface GitAccess {
  /** A private folder of the run for scratch files (created by the caller). */
  scratch: string;
  /** Opens a file of the tree as the run left it, for reading; undefined when it is not a regular file there. */
  open(path: string): number | undefined;
  /** A file of the tree before the run, at most maxBytes: null when there was none, undefined when not known. */
  before(path: string, maxBytes: number): Buffer | null | undefined;
  /** The files below a tree path before the run (tree paths; a git directory's refs, logs and pointer files). */
  listBefore(treePath: string): string[];
  /** The size a file had before the run, when known (a reflog whose content was not kept). */
  beforeSize(path: string): number | undefined;
  /** A file of the tree as the run left it, at most maxBytes: null when there is none, undefined when unreadable. */
  after(path: string, maxBytes: number): Buffer | null | undefined;
  /** The worktree entry at a tree path before the run: null when there was none, undefined when not known. */
  worktreeBefore(path: string): WorktreeEntry | null | undefined;
  /**
   * The object directories that make up a git directory's store as the run left it, for a private
   * repository to read (its new objects have passed their checks), and loose objects to add to
   * that repository (files of ours; copy mode's staged copies).
   */
  stores(
    gitRoot: string,
    changes: readonly StoreChange[],
  ): { stores: ObjectStore[]; loose: Array<{ oid: string; file: string }>; close(): void };
  /** The hash the repository uses (its config before the run). */
  format(gitRoot: string): "sha1" | "sha256";
}

const POINTER_FILES = new Set([
  "HEAD",
  "packed-refs",
  "ORIG_HEAD",
  "FETCH_HEAD",
  "MERGE_HEAD",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "REBASE_HEAD",
  "AUTO_MERGE",
  "BISECT_EXPECTED_REV",
  "BISECT_START",
  "index",
  "shallow",
]);

/**
 * Files of a git directory (relative to it) that name commits, trees or blobs host git may write
 * into the worktree later: HEAD and the refs (checkout, reset --hard, stash pop), the `*_HEAD`
 * files (reset --hard ORIG_HEAD, merge FETCH_HEAD), BISECT_START (bisect reset), reflogs (HEAD@{1}, stash@{1}) and the index
 * (restore ., checkout -- .); and `shallow`, whose commits git takes for having no parents (the
 * host's next gc drops the history behind them). Lock files are not read by git.
 */
export function namesCommits(relative: string): boolean {
  if (relative.endsWith(".lock")) return false;
  return (
    POINTER_FILES.has(relative) ||
    relative.startsWith("refs/") ||
    relative.startsWith("logs/") ||
    /^sharedindex\.[0-9a-f]+$/.test(relative)
  );
}

/** A tree path joined from a git directory and a path relative to it. */
export const inGitDir = (gitRoot: string, relative: string) => (gitRoot === "" ? relative : `${gitRoot}/${relative}`);
