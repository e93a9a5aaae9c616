// Copy out, last step: makes the host tree what the returned tree says, as the caller. It runs only
// after the container is gone and the checks passed, so nothing of the sandbox can race it; the
// tree on the host is still untrusted content (it may hold symlinks to anywhere), so no path is
// ever resolved through a symlink. All or nothing:
// 1. verify, writing nothing: the root and every directory a change happens in is still the real
//    directory the walk saw (opened without following a link, same inode); every path to change
//    or delete is still what was sent (same inode, size, mtime); every new path is free; the
//    caller may write there. Any mismatch (the caller changed the workspace during the run) fails
//    before anything is touched;
// 2. move aside, deepest first, every entry that is deleted or replaced: renamed into the
//    `aside` folder of the staging directory (or, across a mount or out of a directory that
//    cannot take a new `..`, to a fresh hidden name next to it), never unlinked yet;
// 3. create and replace in walk order, parents first: directories are made, files and symlinks are
//    renamed from the staging directory over their path, so a file is replaced by a new inode and
//    never written through (a hard link to a file elsewhere keeps its content); directory modes
//    last, deepest first (a directory made read-only still takes its new entries);
// 4. any failure in 2-3 (an immutable file, a full disk, a directory changed under the apply) undoes
//    every step in reverse: what was put in is removed, what went aside is renamed back (the same
//    inodes, so content, modes and times are as they were), modes and the touched directories'
//    times are set back; the error says nothing was changed. Only on success does what went aside
//    go away. Each step is journaled in the staging directory before it is taken, so an apply
//    whose controller is killed half way is undone the same way by the next reaper (dead-apply.ts);
//    a commit point already written is cut from the journal before an undo (undoingAll).
// A root caller gives replaced entries their original owner back; new ones are the caller's.
// Nothing here is reached by a path from the root: another local user who owns a folder in the
// tree could swap it (or a file) for a symlink between a check and a write. Every step goes through
// folder fds opened without following a link and checked against the walk's inodes (tree-dirs.ts,
// the journal); a folder swapped anyway keeps what is written inside the real one, and the check
// after the last step (every folder written in still in its place) undoes the apply.
import fs from "node:fs";
import { SandboxRunError } from "../errors.js";
import { O_PATH } from "../util/o-path.js";
import { drain, drainYielding } from "../util/stepwise.js";
import { ApplyJournal, applyFailed, type StepHook, type Unrestored } from "./apply-journal.js";
import type { HostFacts, HostTree } from "./host-tree.js";
import { EMPTY_FILE, type ReturnedTree } from "./returned-tar.js";
import { realStagingPath } from "./staging-dir.js";
import { type Identity, pinned, sameInode, TreeDirError, TreeDirs } from "./tree-dirs.js";
import { comparePaths, parentOf, type TreeEntry } from "./tree-entry.js";

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

interface ApplyResult {
  /** Directories that could not be removed because the host holds entries that were never sent. */
  keptDirectories: string[];
  /** The host's old entries that could not be removed once the apply was done (where they wait). */
  leftAside: string[];
}

interface ApplyOptions {
  /**
   * A private directory on the tree's filesystem (the staging directory) where deleted and replaced
   * entries wait until the apply has succeeded; without it they wait under hidden names next to
   * where they were.
   */
  asideDir?: string;
  /**
   * Tests only: called before each step of step 3 writes (its folder already reached and checked),
   * to change the host tree exactly there.
   */
  beforeWrite?: (rel: string) => void;
  /** Tests only: called as each step is journaled and taken (a test kills the apply there). */
  onStep?: StepHook;
}

interface Step {
  path: string;
  after?: TreeEntry;
  before?: TreeEntry;
  /** Files and symlinks whose content or target changed: renamed from the staging directory. */
  staged?: string;
}

export function applyReturnedTree(
  before: HostTree,
  returned: ReturnedTree,
  what: string,
  options: ApplyOptions = {},
): ApplyResult {
  return drain(applyingTrees([{ before, returned, what, options }]))[0]!;
}

/**
 * applyReturnedTree for a controller that serves other runs meanwhile: the event loop gets a turn
 * every few milliseconds (util/stepwise.ts). Each step still goes through fds checked against the
 * walk's inodes, so a turn between two steps gives nothing away that the user's own edits
 * meanwhile would not; another run of this process never holds the same tree (tree-holds.ts).
 */
export async function applyReturnedTreeYielding(
  before: HostTree,
  returned: ReturnedTree,
  what: string,
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  return (await drainYielding(applyingTrees([{ before, returned, what, options }])))[0]!;
}

/** One tree to apply: the host's tree as walked before the run, what came back, how errors name it. */
export interface TreeToApply {
  before: HostTree;
  returned: ReturnedTree;
  what: string;
  options?: ApplyOptions;
}

/**
 * A run's returned trees (its workspace and writable directories), all or none, yielding as
 * applyReturnedTreeYielding does. Each is applied up to its commit point, the commit points are
 * written once every tree is in, and only then does any tree's old content go: a tree that cannot
 * be applied (a full disk, a conflict) undoes the ones applied before it. Before (review, session
 * 38), each tree was committed as it went, and a writable directory that filled its disk left the
 * workspace applied under an error that said nothing was changed.
 */
export function applyReturnedTreesYielding(trees: readonly TreeToApply[]): Promise<ApplyResult[]> {
  return drainYielding(applyingTrees(trees));
}

/** A tree applied up to its commit point: its folders and journal still open, to commit or undo. */
interface Pending {
  what: string;
  keptDirectories: string[];
  dirs: TreeDirs;
  journal: ApplyJournal;
}

function* applyingTrees(trees: readonly TreeToApply[]): Generator<void, ApplyResult[]> {
  const pending: Pending[] = [];
  try {
    try {
      for (const { before, returned, what, options } of trees)
        pending.push(yield* applyingUncommitted(before, returned, what, options ?? {}));
      // The commit points, written in the journals before anything aside goes; one that cannot be
      // written (the disk filled) fails the apply like any step: a reaper would undo it.
      for (const { journal } of pending) journal.commitPoint();
    } catch (error) {
      throw yield* undoingAll(pending, error);
    }
    // Final from here: what waited aside goes, as far as it can (never an undo now, which could no
    // longer bring back what already went).
    const results: ApplyResult[] = [];
    for (const { keptDirectories, journal } of pending)
      results.push({ keptDirectories, leftAside: yield* journal.committing() });
    return results;
  } finally {
    for (const { journal, dirs } of pending) {
      journal.close();
      dirs.close();
    }
  }
}

/** Undoes the trees applied before `error`, newest first; the error to throw. */
function* undoingAll(pending: readonly Pending[], error: unknown): Generator<void, unknown> {
  // A journal whose commit point is written says final to a reaper: it is cut back to before it
  // first, every one before any undo, so a controller killed during an undo leaves journals a
  // reaper undoes too. One that cannot be cut stays final, so it is committed, not undone (a reaper
  // would finish it anyway), and the error says so.
  const toUndo: Pending[] = [];
  const stays: Array<{ tree: Pending; why: string }> = [];
  for (const tree of [...pending].reverse()) {
    try {
      tree.journal.takeBackCommitPoint();
      toUndo.push(tree);
    } catch (cut) {
      stays.push({ tree, why: (cut as NodeJS.ErrnoException).code ?? (cut as Error).message });
    }
  }
  const unrestored: Unrestored[] = [];
  let kept: string | undefined;
  for (const { journal } of toUndo) {
    unrestored.push(...(yield* journal.undoing()));
    const keptHere = journal.keptAside();
    kept ??= keptHere;
  }
  for (const { tree } of stays) yield* tree.journal.committing();
  const whats = (trees: readonly Pending[]) => trees.map((p) => p.what).join(" and ");
  const cause = error instanceof SandboxRunError ? new Error(error.shortMessage) : error;
  if (stays.length > 0) {
    const applied = { whats: whats(stays.map((s) => s.tree).reverse()), why: stays[0]!.why };
    return applyFailed(whats([...toUndo].reverse()) || "the rest", cause, unrestored, kept, applied);
  }
  // A tree's own failure, itself undone: with the trees before it undone too, what it says holds.
  if (error instanceof SandboxRunError && unrestored.length === 0) return error;
  if (pending.length === 0) return error;
  return applyFailed(whats(pending), cause, unrestored, kept);
}

/** Steps 1-3 of one tree, up to its commit point; a failure there undoes this tree and throws. */
function* applyingUncommitted(
  before: HostTree,
  returned: ReturnedTree,
  what: string,
  options: ApplyOptions,
): Generator<void, Pending> {
  const root = before.root;
  const beforeByPath = new Map(before.entries.map((e) => [e.path, e]));
  const afterByPath = new Map(returned.after.map((e) => [e.path, e]));
  const removals: Step[] = [];
  const writes: Step[] = [];
  for (const entry of before.entries) {
    const now = afterByPath.get(entry.path);
    if (!now || now.kind !== entry.kind) removals.push({ path: entry.path, before: entry });
    yield;
  }
  for (const entry of returned.after) {
    const was = beforeByPath.get(entry.path);
    const replaced = was && was.kind !== entry.kind;
    const contentChanged = returned.staged.has(entry.path);
    const modeChanged = was !== undefined && !replaced && was.mode !== entry.mode;
    if (!was || replaced || contentChanged || modeChanged)
      writes.push({ path: entry.path, after: entry, before: was, staged: returned.staged.get(entry.path) });
    yield;
  }
  let dirs: TreeDirs;
  try {
    dirs = TreeDirs.open(root, directoryIdentities(before));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (error instanceof TreeDirError || code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP")
      throw conflictError(what, ["(the root) (changed on the host)"]);
    throw error;
  }
  let journal: ApplyJournal | undefined;
  let applied = false;
  try {
    yield* verifying(dirs, before, beforeByPath, removals, writes, what);
    const staging = options.asideDir ? { dir: options.asideDir, real: realStagingPath(options.asideDir) } : undefined;
    // Journaled in the staging directory as it goes: a reaper undoes it if this process dies.
    journal = new ApplyJournal(dirs, staging, options.onStep);
    try {
      const keptDirectories = yield* applyingSteps(dirs, before, removals, writes, journal, options.beforeWrite);
      // Every write went into the folder its fd held; one swapped meanwhile moved those writes
      // away from where the tree says: undone.
      const moved = dirs.moved();
      if (moved.length > 0) {
        throw new TreeDirError(
          `${moved.map((rel) => rel || "(the root)").join(", ")} changed on the host while the apply ran`,
        );
      }
      applied = true;
      return { what, keptDirectories, dirs, journal };
    } catch (error) {
      const unrestored = yield* journal.undoing();
      throw applyFailed(what, dirs.shown(error), unrestored, journal.keptAside());
    }
  } finally {
    if (!applied) {
      journal?.close();
      dirs.close();
    }
  }
}

/**
 * Why a new entry's path is taken on the host: an entry that never travels (a FIFO, socket or
 * device, a name that is not UTF-8) was there all along, not made meanwhile (review, session 29).
 */
function inTheWay(before: HostTree, rel: string): string {
  const skipped = before.skipped.find((s) => s.path === rel);
  return skipped ? `held on the host by an entry not copied in: ${skipped.reason}` : "appeared on the host";
}

/** The inode of every directory the walk saw: the apply writes only into these, or those it makes. */
function directoryIdentities(before: HostTree): Array<[string, Identity]> {
  const out: Array<[string, Identity]> = [];
  for (const entry of before.entries) {
    const facts = before.facts.get(entry.path);
    if (entry.kind === "directory" && facts) out.push([entry.path, { dev: facts.dev, ino: facts.ino }]);
  }
  return out;
}

/** Steps 2 and 3: every change goes through `journal`, so any failure can be undone. */
function* applyingSteps(
  dirs: TreeDirs,
  before: HostTree,
  removals: Step[],
  writes: Step[],
  journal: ApplyJournal,
  beforeWrite: ((rel: string) => void) | undefined,
): Generator<void, string[]> {
  const keptDirectories: string[] = [];
  for (const step of removals.sort((a, b) => comparePaths(b.path, a.path))) {
    if (step.before!.kind === "directory" && journal.holdsEntries(step.path)) {
      keptDirectories.push(step.path);
      continue;
    }
    journal.moveAside(step.path, step.before!.kind === "directory", identityOf(before.facts.get(step.path)));
    yield;
  }
  const asRoot = process.geteuid?.() === 0;
  // Defence in depth (the reader already refuses an entry below anything but a directory): every
  // parent is reached through fds that never follow a symlink, whatever the returned list says.
  const directoryModes: Step[] = [];
  for (const step of writes.sort((a, b) => comparePaths(a.path, b.path))) {
    yield;
    const entry = step.after!;
    if (step.path !== "") dirs.dir(parentOf(step.path));
    beforeWrite?.(step.path);
    const kept = step.before && step.before.kind === entry.kind ? before.facts.get(step.path) : undefined;
    const staged = step.staged;
    if (entry.kind === "directory") {
      if (!kept) journal.mkdir(step.path);
      directoryModes.push(step);
      continue;
    }
    if (staged !== undefined) {
      // The new entry is the original owner's before it takes its path (never chown a path).
      const owner = asRoot && kept && (kept.uid !== 0 || kept.gid !== 0) ? { uid: kept.uid, gid: kept.gid } : undefined;
      // The host's entry waits aside until everything is in; the new one takes its path.
      if (kept) journal.moveAside(step.path, false, identityOf(kept));
      if (staged === EMPTY_FILE)
        journal.put(step.path, (to, temporary) => createEmptyFile(to, temporary, entry, owner));
      else {
        // The staging directory is private: its paths are the controller's own.
        if (entry.kind === "file") {
          fs.chmodSync(staged, entry.mode);
          const mtime = new Date(entry.mtimeMs);
          fs.utimesSync(staged, mtime, mtime);
        }
        if (owner) fs.lchownSync(staged, owner.uid, owner.gid);
        journal.put(step.path, (to, temporary) => moveIntoPlace(staged, to, temporary, entry, owner));
      }
    } else if ((lstatIn(dirs, step.path)?.nlink ?? 1) > 1) {
      // Same content, other permission bits, but the inode has other names (a hard link an earlier
      // run made to a guarded hook): a chmod would change theirs too. A fresh copy takes this path.
      const owner = asRoot && kept && (kept.uid !== 0 || kept.gid !== 0) ? { uid: kept.uid, gid: kept.gid } : undefined;
      const from = journal.moveAside(step.path, false, identityOf(kept));
      journal.put(step.path, (to, temporary) =>
        writeFresh(to, temporary, entry, owner, (fd) => copyInto(from, fd, identityOf(kept))),
      );
    } else {
      // Same content, other permission bits: the regular file verify() saw (same inode, same owner).
      journal.chmod(step.path, entry.mode, false, identityOf(kept));
    }
  }
  // Deepest first, once their entries are in: a directory made read-only still took them.
  for (const step of directoryModes.sort((a, b) => comparePaths(b.path, a.path))) {
    journal.chmod(step.path, step.after!.mode, true);
    yield;
  }
  return keptDirectories;
}

function identityOf(facts: HostFacts | undefined): Identity | undefined {
  return facts && { dev: facts.dev, ino: facts.ino };
}

function* verifying(
  dirs: TreeDirs,
  before: HostTree,
  beforeByPath: ReadonlyMap<string, TreeEntry>,
  removals: Step[],
  writes: Step[],
  what: string,
): Generator<void, void> {
  const conflicts: string[] = [];
  const checkedDirs = new Set<string>();
  const euid = process.geteuid?.();
  const removed = new Set(removals.map((s) => s.path));
  // A directory changes happen in: the real one the walk saw, or one this apply creates.
  const checkDirectory = (rel: string) => {
    if (checkedDirs.has(rel)) return;
    checkedDirs.add(rel);
    if (rel !== "") checkDirectory(parentOf(rel));
    const facts = before.facts.get(rel);
    // Made (or re-made) by this apply: its own step is checked.
    if (!facts || beforeByPath.get(rel)?.kind !== "directory" || removed.has(rel)) return;
    let fd: number;
    try {
      fd = dirs.dir(rel); // the walk's inode, reached without following a link
    } catch {
      conflicts.push(`${rel || "(the root)"} (changed on the host)`);
      return;
    }
    if (!writable(fd)) conflicts.push(`${rel || "(the root)"} (not writable by this user)`);
  };
  for (const step of removals) {
    if (step.path !== "") checkDirectory(parentOf(step.path));
    if (!sameAsSent(lstatIn(dirs, step.path), step.before!, before.facts.get(step.path))) {
      conflicts.push(`${step.path} (changed on the host)`);
    } else if (step.before!.kind === "directory" && holdsUnsent(dirs, step.path, before)) {
      // The sandbox removed a directory that holds what never went in: keep it, unless the
      // returned tree needs something else at its path.
      if (writes.some((w) => w.path === step.path))
        conflicts.push(`${step.path} (holds files that were not copied in)`);
    }
    yield;
  }
  for (const step of writes) {
    yield;
    if (step.path !== "") checkDirectory(parentOf(step.path));
    const stat = step.path === "" ? fs.fstatSync(dirs.dir("")) : lstatIn(dirs, step.path);
    if (!step.before || removed.has(step.path)) {
      // New here: nothing may be in the way (what was there is removed first, and was checked above).
      if (stat && !removed.has(step.path)) conflicts.push(`${step.path} (${inTheWay(before, step.path)})`);
      continue;
    }
    const facts = before.facts.get(step.path);
    if (!sameAsSent(stat, step.before, facts)) conflicts.push(`${step.path} (changed on the host)`);
    else if (step.path === "" && !writable(dirs.dir(""))) conflicts.push("(the root) (not writable by this user)");
    // A rename needs only the directory; changing permission bits in place needs the entry itself.
    else if (step.staged === undefined && euid !== 0 && facts!.uid !== euid)
      conflicts.push(`${step.path} (another user's)`);
  }
  if (conflicts.length > 0) throw conflictError(what, conflicts);
}

function conflictError(what: string, conflicts: string[]): SandboxRunError {
  const shown = conflicts.slice(0, 10).join(", ");
  const more = conflicts.length > 10 ? ` and ${conflicts.length - 10} more` : "";
  return new SandboxRunError(
    "not-applied",
    `The run's changes to ${what} were not applied: ${shown}${more}. Nothing was changed.`,
    { hint: conflictHint(conflicts) },
  );
}

/**
 * What to do, by what stood in the way: a change on the host meanwhile, or what this user may not
 * write (a root-owned `dist/`), which no waiting fixes (review, session 29: both got the same hint,
 * which blamed the user for changing the workspace). Either way the run's work can be kept.
 */
function conflictHint(conflicts: readonly string[]): string {
  const onHost = conflicts.some((c) => /\((changed|appeared) on the host|held on the host/.test(c));
  const access = conflicts.some((c) => /\((not writable by this user|another user's)\)$/.test(c));
  const steps = [
    ...(onHost ? ["leave the workspace alone on the host while a copy-mode run works on it"] : []),
    ...(access ? ["give this user write access to what is named (or run as its owner)"] : []),
  ];
  const keep = "--hand-back branch or patch keeps a run's work without writing into the working tree";
  return `${steps.length > 0 ? `${steps.join("; ")}; then run again. ` : ""}${keep}.`.replace(/^./, (c) =>
    c.toUpperCase(),
  );
}

/** An empty file at `file`, made as writeFresh makes any file. */
function createEmptyFile(
  file: string,
  temporary: string,
  entry: TreeEntry,
  owner?: { uid: number; gid: number },
): void {
  writeFresh(file, temporary, entry, owner, () => {});
}

function finishFile(fd: number, entry: TreeEntry, owner?: { uid: number; gid: number }): void {
  if (owner) fs.fchownSync(fd, owner.uid, owner.gid);
  fs.fchmodSync(fd, entry.mode);
  fs.futimesSync(fd, new Date(entry.mtimeMs), new Date(entry.mtimeMs));
}

/**
 * Renames a staged entry to `file` (free by now: what was there waits aside). Across filesystems (a
 * mount inside the tree) it is copied to `temporary`, a fresh name in the target's folder, first,
 * then renamed: still never written through. `file` and `temporary` are named through their
 * folder's fd; the staged entry is already the original owner's (`owner`: for the copy).
 */
function moveIntoPlace(
  staged: string,
  file: string,
  temporary: string,
  entry: TreeEntry,
  owner?: { uid: number; gid: number },
): void {
  try {
    fs.renameSync(staged, file);
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
  }
  try {
    if (entry.kind === "symlink") {
      fs.symlinkSync(fs.readlinkSync(staged), temporary);
      if (owner) {
        // No lchown by name: the link itself, through an O_PATH fd fstat shows is still ours.
        const fd = fs.openSync(temporary, O_PATH | O_NOFOLLOW);
        try {
          const stat = fs.fstatSync(fd);
          if (!stat.isSymbolicLink() || stat.uid !== process.geteuid?.())
            throw new TreeDirError(`${temporary} changed on the host while the apply made it`);
          fs.chownSync(pinned(fd), owner.uid, owner.gid);
        } finally {
          fs.closeSync(fd);
        }
      }
      fs.renameSync(temporary, file);
    } else {
      writeFresh(file, temporary, entry, owner, (fd) => copyInto(staged, fd));
    }
  } catch (error) {
    try {
      fs.unlinkSync(temporary);
    } catch {
      // never made, or already gone
    }
    throw error;
  }
  fs.rmSync(staged, { force: true });
}

/**
 * A new file at `file` (free by now), filled by `fill` under `temporary` (a fresh name next to it,
 * O_EXCL|O_NOFOLLOW), its mode, times and owner set on its fd, then renamed into place.
 */
function writeFresh(
  file: string,
  temporary: string,
  entry: TreeEntry,
  owner: { uid: number; gid: number } | undefined,
  fill: (fd: number) => void,
): void {
  const fd = fs.openSync(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    try {
      fill(fd);
      finishFile(fd, entry, owner);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
  } catch (error) {
    fs.rmSync(temporary, { force: true }); // the temporary name is a plain file of ours, in a checked folder
    throw error;
  }
}

const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * Copies the file at `source` (the private staging copy, or the host's entry where it waits aside:
 * `identity`, the inode it must be) into the new file `to`. Zero runs stay holes: a sparse file
 * costs the host no more disk than it did.
 */
function copyInto(source: string, to: number, identity?: Identity): void {
  const from = fs.openSync(source, fs.constants.O_RDONLY | O_NOFOLLOW);
  try {
    const stat = fs.fstatSync(from);
    if (!stat.isFile() || (identity && !sameInode(stat, identity)))
      throw new TreeDirError(`${source} changed on the host while the apply ran`);
    const chunk = Buffer.alloc(ZEROS.length);
    let at = 0;
    for (let n = fs.readSync(from, chunk); n > 0; n = fs.readSync(from, chunk)) {
      if (!chunk.subarray(0, n).equals(ZEROS.subarray(0, n)))
        for (let off = 0; off < n; ) off += fs.writeSync(to, chunk, off, n - off, at + off);
      at += n;
    }
    fs.ftruncateSync(to, at);
  } finally {
    fs.closeSync(from);
  }
}

/** Still the entry that was sent: same kind and inode; files and links also same size and mtime. */
function sameAsSent(stat: fs.Stats | undefined, sent: TreeEntry, facts: HostFacts | undefined): boolean {
  if (!stat || !facts || !sameInode(stat, facts)) return false;
  if (sent.kind === "directory") return stat.isDirectory();
  if (sent.kind === "symlink" ? !stat.isSymbolicLink() : !stat.isFile()) return false;
  return stat.size === facts.size && stat.mtimeMs === facts.mtimeMs;
}

/** lstat of the entry `rel` through its folder's fd; undefined if it is not there (or its folder is not). */
function lstatIn(dirs: TreeDirs, rel: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(dirs.at(rel));
  } catch {
    return undefined;
  }
}

/** Whether a host directory holds names the walk did not send (unreadable, special or new files). */
function holdsUnsent(dirs: TreeDirs, rel: string, before: HostTree): boolean {
  try {
    // Read through its parent's fd: only names, judged by the walk's list.
    return fs.readdirSync(dirs.at(rel)).some((name) => !before.facts.has(rel ? `${rel}/${name}` : name));
  } catch {
    return true;
  }
}

/** Whether this user may make and remove entries in the folder an fd holds. */
function writable(dirFd: number): boolean {
  try {
    fs.accessSync(pinned(dirFd), fs.constants.W_OK | fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
