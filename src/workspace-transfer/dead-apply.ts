// What a reaper (gc, the next controller's start-up: run-dirs.ts reapRunDirs, through
// staging-dir.ts removeListedStagingDirs) does with an apply its controller did not live to finish.
// The staging directory's journal (apply-journal-file.ts) says how far it went:
// - it says the apply finished (the commit point): what waits aside, here and next to its place,
//   goes, as the live commit would have removed it;
// - it says nothing of an end: every step is undone in reverse by the live journal's own undo
//   (apply-journal.ts), through folder fds opened one name at a time without following a link
//   (ReplayDirs), each step only in the folder of the inode it was taken in; the tree is then as it
//   was before the apply. What cannot be put back (its place taken, the entry changed since) stays
//   aside: the aside folder is kept next to the tree (`.sandbox-run-kept-<hex>`) with a manifest of
//   where each entry in it belongs, and the caller is told (gc names it);
// - a journal this code did not write, or a tree that is no longer the one it names: nothing is
//   undone or removed, the staging directory stays whole, and the caller is told.
import fs from "node:fs";
import path from "node:path";
import { O_PATH } from "../util/o-path.js";
import { atTextPath } from "../workspace/fd-walk.js";
import { ApplyJournal, type TreePlaces, type Unrestored } from "./apply-journal.js";
import { JournalRefused, readJournal } from "./apply-journal-file.js";
import { pinned, sameInode, TreeDirError } from "./tree-dirs.js";
import { parentOf } from "./tree-entry.js";

const DIR_FLAGS = O_PATH | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW;
const MAX_OPEN = 128;

/** An apply a dead controller left unfinished, as a reaper found it. */
export interface DeadApply {
  /** The tree it was writing. */
  tree: string;
  /** Every step was taken back: the tree is as it was before the apply. */
  undone: boolean;
  /** What could not be put back, and why (where it waits). */
  unrestored: Unrestored[];
  /**
   * Where what could not be put back waits: the kept aside folder (its manifest.json says where
   * each entry belongs), or, when nothing was undone (`refused`), the staging directory, kept whole.
   */
  kept?: string;
  /** Why nothing was undone. */
  refused?: string;
  /** Not undone now: a run in progress holds the tree (its reaper leaves it, and its run folder, to the next). */
  waiting?: string;
  /** `gc --dry-run`: an unfinished apply a gc now would undo (nothing was done). */
  wouldUndo?: true;
}

/**
 * The tree whose apply a dead controller journaled in `staging` and did not finish (nor undo):
 * what finishDeadApply would undo. Reads the journal only (`gc --dry-run`).
 */
export function pendingDeadApply(staging: string): string | undefined {
  const journal = journalSummary(staging);
  return journal?.steps && journal.end === undefined ? journal.root : undefined;
}

/** A private journal's tree, whether any step was taken, and how it ended ("c" committed, "u" undone); undefined when unreadable. */
function journalSummary(staging: string): { root: string; steps: boolean; end?: "c" | "u" } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(staging, DIR_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.uid !== process.geteuid?.() || (stat.mode & 0o077) !== 0) return undefined;
    const read = readJournal(fd);
    if (!read) return undefined;
    let end: "c" | "u" | undefined;
    for (const r of read.records) if (r[0] === "c" || r[0] === "u") end = r[0];
    return { root: read.root, steps: read.records.some((r) => r[0] !== "t"), ...(end ? { end } : {}) };
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Undoes (or, once committed, finishes) the apply a dead controller journaled in the staging
 * directory `staging` (its name; ours, private: the caller checked). Undefined when there is
 * nothing to say: no journal, an apply that finished or was undone by its controller, or no step
 * taken. A DeadApply with `refused` or `waiting` (`hold` gave a reason, not the tree): the
 * directory must stay.
 */
export function finishDeadApply(
  staging: string,
  hold: (tree: string) => { release(): void } | string,
): DeadApply | undefined {
  let fd: number;
  try {
    fd = fs.openSync(staging, DIR_FLAGS);
  } catch {
    return undefined;
  }
  let tree = "(unknown)";
  const refused = (why: string): DeadApply => ({ tree, undone: false, unrestored: [], kept: staging, refused: why });
  try {
    const stat = fs.fstatSync(fd);
    if (stat.uid !== process.geteuid?.() || (stat.mode & 0o077) !== 0) return undefined;
    const read = readJournal(fd);
    if (!read) return undefined;
    tree = read.root;
    let end: string | undefined;
    for (const r of read.records) if (r[0] === "c" || r[0] === "u") end = r[0];
    if (end === "u" || !read.records.some((r) => r[0] !== "t")) return undefined;
    // Written only while held as a run holds it, without waiting (the caller's `hold`): a tree a run
    // in progress holds may be the one that run's sandbox got (review, session 36).
    const held = hold(read.root);
    if (typeof held === "string") return { tree, undone: false, unrestored: [], waiting: held };
    try {
      // Made next to the tree or inside it (makeStagingDir): a journal naming another tree is not ours.
      const parent = path.dirname(staging);
      if (parent !== read.root && parent !== path.dirname(read.root))
        return refused(`its journal names ${read.root}, which its staging directory is not next to`);
      let rootFd: number;
      try {
        rootFd = fs.openSync(read.root, DIR_FLAGS);
      } catch (error) {
        return refused(`the tree cannot be opened (${(error as NodeJS.ErrnoException).code})`);
      }
      const dirs = new ReplayDirs(read.root, rootFd);
      try {
        if (!sameInode(fs.fstatSync(rootFd), read.rootIdentity))
          return refused("the tree is not the directory the apply wrote (moved or replaced since)");
        const journal = ApplyJournal.replayed(dirs, { dir: pinned(fd), real: staging }, read);
        if (end === "c") {
          journal.commit();
          return undefined;
        }
        const unrestored = journal.undo();
        const kept = unrestored.length > 0 ? journal.keptAside() : undefined;
        return { tree, undone: unrestored.length === 0, unrestored, ...(kept ? { kept } : {}) };
      } finally {
        dirs.close();
      }
    } finally {
      held.release();
    }
  } catch (error) {
    if (error instanceof JournalRefused) {
      tree = error.tree ?? tree;
      return refused(error.message);
    }
    return refused((error as Error).message);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The tree's folders for a reaper: each opened relative to its parent's fd, never through a link
 * (as TreeDirs does, but with no walk to check them against: each undo step checks the folder it
 * acts in against the inode its journal line names).
 */
class ReplayDirs implements TreePlaces {
  readonly #open = new Map<string, number>();
  #rootFd: number | undefined;

  constructor(
    readonly root: string,
    rootFd: number,
  ) {
    this.#rootFd = rootFd;
  }

  dir(rel: string): number {
    if (rel === "") {
      if (this.#rootFd === undefined) throw new TreeDirError("closed");
      return this.#rootFd;
    }
    const cached = this.#open.get(rel);
    if (cached !== undefined) {
      this.#open.delete(rel);
      this.#open.set(rel, cached);
      return cached;
    }
    const parentFd = this.dir(parentOf(rel));
    let fd: number;
    try {
      fd = fs.openSync(atTextPath(parentFd, path.posix.basename(rel)), DIR_FLAGS);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOTDIR" || code === "ELOOP")
        throw new TreeDirError(`${path.join(this.root, rel)} is not a directory; refusing to write below it`);
      throw error;
    }
    this.#open.set(rel, fd);
    if (this.#open.size > MAX_OPEN) {
      const [oldest, oldestFd] = this.#open.entries().next().value as [string, number];
      this.#open.delete(oldest);
      fs.closeSync(oldestFd);
    }
    return fd;
  }

  at(rel: string): string {
    return atTextPath(this.dir(parentOf(rel)), path.posix.basename(rel));
  }

  forget(rel: string): void {
    const prefix = `${rel}/`;
    for (const [key, fd] of [...this.#open]) {
      if (key !== rel && !key.startsWith(prefix)) continue;
      this.#open.delete(key);
      fs.closeSync(fd);
    }
  }

  made(): void {
    throw new TreeDirError("a reaper makes nothing");
  }

  close(): void {
    for (const fd of this.#open.values()) fs.closeSync(fd);
    this.#open.clear();
    if (this.#rootFd !== undefined) fs.closeSync(this.#rootFd);
    this.#rootFd = undefined;
  }
}

/** What a reaper did with a dead run's apply, in one sentence (gc's line; a run's `workspace.dead-apply` warning). */
export function deadApplySentence(a: DeadApply): string {
  const what = `the unfinished apply of ${a.tree} (its controller died during it)`;
  if (a.wouldUndo) return `would undo ${what}, putting the tree back as it was before the run`;
  if (a.undone) return `undid ${what}: it is as it was before the run`;
  if (a.waiting !== undefined)
    return `did not undo ${what} yet: ${a.waiting}; run gc again once it ends (until then its folder keeps the journal)`;
  if (a.refused !== undefined)
    return `did not undo ${what}: ${a.refused}; its originals and the run's files stay in ${a.kept ?? "?"}`;
  const listed = a.unrestored
    .slice(0, 5)
    .map((u) => `${u.path} (${u.problem})`)
    .join(", ");
  const more = a.unrestored.length > 5 ? ` and ${a.unrestored.length - 5} more` : "";
  const where = a.kept
    ? `the originals are in ${a.kept} (its manifest.json says where each belongs)`
    : "they wait where named";
  return `undid ${what} but for ${a.unrestored.length} path(s): ${listed}${more}; ${where}`;
}
