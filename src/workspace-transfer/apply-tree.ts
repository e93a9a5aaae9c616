// Copy out, last step: makes the host tree what the returned tree says, as the caller. It runs only
// after the container is gone and the checks passed, so nothing of the sandbox can race it; the
// tree on the host is still untrusted content (it may hold symlinks to anywhere), so no path is
// ever resolved through a symlink. All or nothing:
// 1. verify, writing nothing: the root and every directory a change happens in is still the real
//    directory the walk saw (lstat, same inode); every path to change or delete is still what was
//    sent (same inode, size, mtime); every new path is free; the caller may write there. Any
//    mismatch (the caller changed the workspace during the run) fails before anything is touched;
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
//    go away.
// A root caller gives replaced entries their original owner back; new ones are the caller's.
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { ApplyJournal, applyFailed } from "./apply-journal.js";
import type { HostFacts, HostTree } from "./host-tree.js";
import { EMPTY_FILE, type ReturnedTree } from "./returned-tar.js";
import { comparePaths, parentOf, type TreeEntry } from "./tree-entry.js";

interface ApplyResult {
  /** Directories that could not be removed because the host holds entries that were never sent. */
  keptDirectories: string[];
}

interface ApplyOptions {
  /**
   * A private directory on the tree's filesystem (the staging directory) where deleted and replaced
   * entries wait until the apply has succeeded; without it they wait under hidden names next to
   * where they were.
   */
  asideDir?: string;
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
  const root = before.root;
  const beforeByPath = new Map(before.entries.map((e) => [e.path, e]));
  const afterByPath = new Map(returned.after.map((e) => [e.path, e]));
  const removals: Step[] = [];
  const writes: Step[] = [];
  for (const entry of before.entries) {
    const now = afterByPath.get(entry.path);
    if (!now || now.kind !== entry.kind) removals.push({ path: entry.path, before: entry });
  }
  for (const entry of returned.after) {
    const was = beforeByPath.get(entry.path);
    const replaced = was && was.kind !== entry.kind;
    const contentChanged = returned.staged.has(entry.path);
    const modeChanged = was !== undefined && !replaced && was.mode !== entry.mode;
    if (!was || replaced || contentChanged || modeChanged)
      writes.push({ path: entry.path, after: entry, before: was, staged: returned.staged.get(entry.path) });
  }
  verify(root, before, beforeByPath, removals, writes, what);

  const journal = new ApplyJournal(root, options.asideDir);
  try {
    const keptDirectories = applySteps(root, before, removals, writes, journal);
    journal.commit();
    return { keptDirectories };
  } catch (error) {
    const unrestored = journal.undo();
    throw applyFailed(what, error, unrestored, journal.keptAside());
  }
}

/** Steps 2 and 3: every change goes through `journal`, so any failure can be undone. */
function applySteps(root: string, before: HostTree, removals: Step[], writes: Step[], journal: ApplyJournal): string[] {
  const keptDirectories: string[] = [];
  for (const step of removals.sort((a, b) => comparePaths(b.path, a.path))) {
    if (step.before!.kind === "directory" && journal.holdsEntries(step.path)) {
      keptDirectories.push(step.path);
      continue;
    }
    journal.moveAside(step.path, step.before!.kind === "directory");
  }
  const asRoot = process.geteuid?.() === 0;
  // Defence in depth (the reader already refuses an entry below anything but a directory): every
  // parent is lstat'ed once before anything is put in it, so no path ever resolves through a
  // symlink, whatever the returned list says.
  const realDirectories = new Set<string>();
  const inRealDirectory = (rel: string) => {
    const parent = parentOf(rel);
    if (realDirectories.has(parent)) return;
    if (!lstatOrUndefined(path.join(root, parent))?.isDirectory()) {
      throw new Error(`${path.join(root, parent)} is not a directory; refusing to write below it`);
    }
    realDirectories.add(parent);
  };
  const directoryModes: Step[] = [];
  for (const step of writes.sort((a, b) => comparePaths(a.path, b.path))) {
    const entry = step.after!;
    const file = path.join(root, step.path);
    if (step.path !== "") inRealDirectory(step.path);
    const kept = step.before && step.before.kind === entry.kind ? before.facts.get(step.path) : undefined;
    const staged = step.staged;
    if (entry.kind === "directory") {
      if (!kept) journal.mkdir(step.path);
      directoryModes.push(step);
      realDirectories.add(step.path);
      continue;
    }
    if (staged !== undefined) {
      // The host's entry waits aside until everything is in; the new one takes its path.
      if (kept) journal.moveAside(step.path, false);
      if (staged === EMPTY_FILE) journal.put(step.path, (to, temporary) => createEmptyFile(to, temporary, entry));
      else {
        if (entry.kind === "file") {
          fs.chmodSync(staged, entry.mode);
          const mtime = new Date(entry.mtimeMs);
          fs.utimesSync(staged, mtime, mtime);
        }
        journal.put(step.path, (to, temporary) => moveIntoPlace(staged, to, temporary, entry));
      }
    } else {
      // Same content, other permission bits: the path is the regular file verify() saw.
      journal.chmod(step.path, entry.mode);
    }
    if (asRoot && kept && (kept.uid !== 0 || kept.gid !== 0)) fs.lchownSync(file, kept.uid, kept.gid);
  }
  // Deepest first, once their entries are in: a directory made read-only still took them.
  for (const step of directoryModes.sort((a, b) => comparePaths(b.path, a.path))) {
    journal.chmod(step.path, step.after!.mode);
  }
  return keptDirectories;
}

function verify(
  root: string,
  before: HostTree,
  beforeByPath: ReadonlyMap<string, TreeEntry>,
  removals: Step[],
  writes: Step[],
  what: string,
): void {
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
    const file = path.join(root, rel);
    const stat = lstatOrUndefined(file);
    if (!stat?.isDirectory() || stat.ino !== facts.ino || stat.dev !== facts.dev) {
      conflicts.push(`${rel || "(the root)"} (changed on the host)`);
    } else if (!writable(file)) {
      conflicts.push(`${rel || "(the root)"} (not writable by this user)`);
    }
  };
  for (const step of removals) {
    if (step.path !== "") checkDirectory(parentOf(step.path));
    const file = path.join(root, step.path);
    if (!sameAsSent(lstatOrUndefined(file), step.before!, before.facts.get(step.path))) {
      conflicts.push(`${step.path} (changed on the host)`);
    } else if (step.before!.kind === "directory" && holdsUnsent(file, step.path, before)) {
      // The sandbox removed a directory that holds what never went in: keep it, unless the
      // returned tree needs something else at its path.
      if (writes.some((w) => w.path === step.path))
        conflicts.push(`${step.path} (holds files that were not copied in)`);
    }
  }
  for (const step of writes) {
    if (step.path !== "") checkDirectory(parentOf(step.path));
    const stat = lstatOrUndefined(path.join(root, step.path));
    if (!step.before || removed.has(step.path)) {
      // New here: nothing may be in the way (what was there is removed first, and was checked above).
      if (stat && !removed.has(step.path)) conflicts.push(`${step.path} (appeared on the host)`);
      continue;
    }
    const facts = before.facts.get(step.path);
    if (!sameAsSent(stat, step.before, facts)) conflicts.push(`${step.path} (changed on the host)`);
    else if (step.path === "" && !writable(root)) conflicts.push("(the root) (not writable by this user)");
    // A rename needs only the directory; changing permission bits in place needs the entry itself.
    else if (step.staged === undefined && euid !== 0 && facts!.uid !== euid)
      conflicts.push(`${step.path} (another user's)`);
  }
  if (conflicts.length === 0) return;
  const shown = conflicts.slice(0, 10).join(", ");
  const more = conflicts.length > 10 ? ` and ${conflicts.length - 10} more` : "";
  throw new SandboxRunError(
    "usage",
    `The run's changes to ${what} were not applied: ${shown}${more}. Nothing was changed.`,
    {
      hint: "Do not change a workspace on the host while a copy-mode run works on it, and give this user write access; then run again.",
    },
  );
}

/** An empty file: made under `temporary` (a fresh name in its directory), then renamed to `file`. */
function createEmptyFile(file: string, temporary: string, entry: TreeEntry): void {
  fs.closeSync(fs.openSync(temporary, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, entry.mode));
  fs.chmodSync(temporary, entry.mode);
  fs.utimesSync(temporary, new Date(entry.mtimeMs), new Date(entry.mtimeMs));
  fs.renameSync(temporary, file);
}

/**
 * Renames a staged entry to `file` (free by now: what was there waits aside). Across filesystems (a
 * mount inside the tree) it is copied to `temporary`, a fresh name in the target's directory,
 * first, then renamed: still never written through.
 */
function moveIntoPlace(staged: string, file: string, temporary: string, entry: TreeEntry): void {
  try {
    fs.renameSync(staged, file);
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
  }
  try {
    if (entry.kind === "symlink") fs.symlinkSync(fs.readlinkSync(staged), temporary);
    else {
      fs.copyFileSync(staged, temporary, fs.constants.COPYFILE_EXCL);
      fs.chmodSync(temporary, entry.mode);
      fs.utimesSync(temporary, new Date(entry.mtimeMs), new Date(entry.mtimeMs));
    }
    fs.renameSync(temporary, file);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw error;
  }
  fs.rmSync(staged, { force: true });
}

/** Still the entry that was sent: same kind and inode; files and links also same size and mtime. */
function sameAsSent(stat: fs.Stats | undefined, sent: TreeEntry, facts: HostFacts | undefined): boolean {
  if (!stat || !facts || stat.ino !== facts.ino || stat.dev !== facts.dev) return false;
  if (sent.kind === "directory") return stat.isDirectory();
  if (sent.kind === "symlink" ? !stat.isSymbolicLink() : !stat.isFile()) return false;
  return stat.size === facts.size && stat.mtimeMs === facts.mtimeMs;
}

/** Whether a host directory holds names the walk did not send (unreadable, special or new files). */
function holdsUnsent(dir: string, rel: string, before: HostTree): boolean {
  try {
    return fs.readdirSync(dir).some((name) => !before.facts.has(rel ? `${rel}/${name}` : name));
  } catch {
    return true;
  }
}

function writable(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function lstatOrUndefined(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch {
    return undefined;
  }
}
