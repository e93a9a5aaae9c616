// The undo journal of copy mode's apply (apply-tree.ts): every change the apply makes goes through
// it, so that a failure half way can be undone in reverse. What is deleted or replaced is only
// renamed aside (the same inode: content, mode, owner and times kept) and removed for good only
// once everything is in; the times of every directory touched are taken before its first change
// and set back by an undo (as precisely as Node sets times: about a microsecond).
// Every step, and every undo, reaches its entry through the folder fds of `dirs` (tree-dirs.ts),
// never by a path the host could swap: a mode is set on an O_PATH fd whose kind and inode fstat
// confirmed, never by chmod(path), which follows a symlink put there since.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { O_PATH } from "../util/o-path.js";
import { atTextPath } from "../workspace/fd-walk.js";
import { removeAt } from "../workspace/remove-tree.js";
import { realStagingPath } from "./staging-dir.js";
import { type Identity, openEntry, pinned, sameInode, TreeDirError, type TreeDirs } from "./tree-dirs.js";
import { comparePaths, parentOf } from "./tree-entry.js";

/** Prefix of the hidden names entries wait under next to their place, when the aside folder cannot take them. */
const ASIDE_PREFIX = ".sandbox-run-aside-";

type Undo =
  /** Waits in the aside folder at `at` (a path in the private staging directory). */
  | { kind: "aside"; path: string; at: string }
  /** Waits next to its place, as `name` in the same folder. */
  | { kind: "beside"; path: string; name: string }
  | { kind: "created"; path: string; directory: boolean }
  | { kind: "mode"; path: string; mode: number; directory: boolean; identity: Identity };

/** Every change the apply makes, so that a failure can undo them in reverse (see the top of this file). */
export class ApplyJournal {
  readonly #undo: Undo[] = [];
  /** Times of every directory the apply changes an entry in, taken before the first change. */
  readonly #directoryTimes = new Map<string, { atime: number; mtime: number }>();
  #aside: string | undefined;
  /** Entries moved aside next to their place (see moveAside), as tree paths. */
  readonly #besideNames = new Set<string>();
  #count = 0;

  constructor(
    private readonly dirs: TreeDirs,
    private readonly asideParent: string | undefined,
  ) {}

  /**
   * Moves the entry `rel` aside; `identity`: the inode it must be (the walk's), else the step fails.
   * Returns where it waits now (valid while the apply runs).
   */
  moveAside(rel: string, directory: boolean, identity?: Identity): string {
    const parent = parentOf(rel);
    const name = path.posix.basename(rel);
    this.#noteTimes(parent);
    if (directory) this.#noteTimes(rel);
    const aside = this.#asideDir();
    let moved: string | undefined;
    if (aside) {
      const at = path.join(aside, String(++this.#count));
      try {
        fs.renameSync(this.dirs.at(rel), at);
        this.#undo.push({ kind: "aside", path: rel, at });
        moved = at;
      } catch (error) {
        // Across a mount inside the tree; a directory that cannot take a new `..` (not writable):
        // it waits next to where it was instead.
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "EXDEV" && code !== "EACCES") throw error;
      }
    }
    if (moved === undefined) {
      // Undo is in reverse order, so a directory moved aside later with this inside it is back in
      // its place before this comes back from `at`.
      const besideName = `${ASIDE_PREFIX}${crypto.randomBytes(8).toString("hex")}`;
      const fd = this.dirs.dir(parent);
      if (lstatOrUndefined(atTextPath(fd, besideName))) throw new Error(`${besideName} exists in ${parent}`);
      fs.renameSync(atTextPath(fd, name), atTextPath(fd, besideName));
      this.#besideNames.add(parent ? `${parent}/${besideName}` : besideName);
      this.#undo.push({ kind: "beside", path: rel, name: besideName });
      moved = atTextPath(fd, besideName);
    }
    // Its fds (and those below it) point where it went now; an undo opens them again.
    if (directory) this.dirs.forget(rel);
    // What went is what the walk saw, or the host changed it since the check: undone.
    const stat = identity ? lstatOrUndefined(moved) : undefined;
    if (identity && (!stat || !sameInode(stat, identity) || stat.isDirectory() !== directory)) {
      throw new TreeDirError(`${rel} changed on the host while the apply ran`);
    }
    return moved;
  }

  /**
   * Whether a directory holds anything but what this apply moved aside next to its place (that
   * goes with the directory when it is moved aside, and comes back with it).
   */
  holdsEntries(rel: string): boolean {
    const prefix = rel ? `${rel}/` : "";
    return fs.readdirSync(pinned(this.dirs.dir(rel))).some((name) => !this.#besideNames.has(prefix + name));
  }

  mkdir(rel: string): void {
    this.#noteTimes(parentOf(rel));
    fs.mkdirSync(this.dirs.at(rel), { mode: 0o700 });
    this.#undo.push({ kind: "created", path: rel, directory: true });
    this.dirs.made(rel);
  }

  /**
   * `make(file, temporary)` puts the new entry at `file`, free by now (`temporary`: a fresh name
   * next to it); both are named through the fd of their folder, valid during the call.
   */
  put(rel: string, make: (file: string, temporary: string) => void): void {
    this.#noteTimes(parentOf(rel));
    const fd = this.dirs.dir(parentOf(rel));
    make(
      atTextPath(fd, path.posix.basename(rel)),
      atTextPath(fd, `.sandbox-run-${crypto.randomBytes(6).toString("hex")}`),
    );
    this.#undo.push({ kind: "created", path: rel, directory: false });
  }

  /**
   * Sets the permission bits of the file or directory `rel` (`identity`: the inode it must be):
   * on an O_PATH fd fstat judged, so a symlink put in its place is never followed.
   */
  chmod(rel: string, mode: number, directory: boolean, identity?: Identity): void {
    this.#withEntry(rel, directory, identity, (fd, stat) => {
      const was = stat.mode & 0o7777;
      if (was === mode) return;
      fs.chmodSync(pinned(fd), mode);
      this.#undo.push({ kind: "mode", path: rel, mode: was, directory, identity: { dev: stat.dev, ino: stat.ino } });
    });
  }

  /**
   * Everything went in: what waited aside goes for good (through fds: no symlink below is followed).
   * Never throws: the apply is final by now. Returns where what could not be removed waits.
   */
  commit(): string[] {
    const left: string[] = [];
    // One that waits inside a folder that went aside itself goes with that folder.
    const gone = new Set(this.#undo.filter((u) => u.kind === "aside" || u.kind === "beside").map((u) => u.path));
    const inGone = (rel: string) => {
      for (let p = parentOf(rel); p !== ""; p = parentOf(p)) if (gone.has(p)) return true;
      return false;
    };
    for (const step of this.#undo) {
      if (step.kind !== "beside" || inGone(step.path)) continue;
      try {
        removeAt(this.dirs.dir(parentOf(step.path)), step.name);
      } catch {
        left.push(path.join(this.dirs.root, parentOf(step.path), step.name));
      }
    }
    if (this.#aside) {
      try {
        // The staging directory: a path pinned to its fd ("/proc/<pid>/fd/<fd>", itself a link
        // that must be followed), so opening it cannot reach anywhere else.
        const parent = fs.openSync(path.dirname(this.#aside), O_PATH | fs.constants.O_DIRECTORY);
        try {
          removeAt(parent, path.basename(this.#aside));
        } finally {
          fs.closeSync(parent);
        }
      } catch {
        left.push(this.#aside); // in the staging directory, removed with it when the run ends
      }
    }
    this.#undo.length = 0;
    return left;
  }

  /** Undoes every change in reverse; returns the paths that could not be put back (and where they wait). */
  undo(): Array<{ path: string; problem: string }> {
    const unrestored: Array<{ path: string; problem: string }> = [];
    for (const step of this.#undo.reverse()) {
      try {
        if (step.kind === "created") {
          if (step.directory) {
            this.dirs.forget(step.path);
            fs.rmdirSync(this.dirs.at(step.path));
          } else fs.unlinkSync(this.dirs.at(step.path));
        } else if (step.kind === "mode") {
          this.#withEntry(step.path, step.directory, step.identity, (fd) => fs.chmodSync(pinned(fd), step.mode));
        } else if (step.kind === "aside") fs.renameSync(step.at, this.dirs.at(step.path));
        else {
          const fd = this.dirs.dir(parentOf(step.path));
          fs.renameSync(atTextPath(fd, step.name), atTextPath(fd, path.posix.basename(step.path)));
        }
      } catch (error) {
        const where =
          step.kind === "aside"
            ? `; it waits at ${step.at}`
            : step.kind === "beside"
              ? `; it waits at ${path.join(this.dirs.root, parentOf(step.path), step.name)}`
              : "";
        unrestored.push({
          path: step.path,
          problem: `${(error as NodeJS.ErrnoException).code ?? (error as Error).message}${where}`,
        });
      }
    }
    this.#undo.length = 0;
    // Deepest first, so that setting a child's times does not move its parent's again.
    for (const rel of [...this.#directoryTimes.keys()].sort((a, b) => comparePaths(b, a))) {
      const times = this.#directoryTimes.get(rel)!;
      try {
        fs.utimesSync(pinned(this.dirs.dir(rel)), times.atime, times.mtime);
      } catch {
        // gone or not ours to change: its entries are back, which is what matters
      }
    }
    return unrestored;
  }

  /**
   * After an undo that could not put everything back: the aside folder, kept out of the staging
   * directory (which is removed when the run ends), so nothing of the caller's is lost.
   */
  keptAside(): string | undefined {
    if (!this.#aside || fs.readdirSync(this.#aside).length === 0) return undefined;
    const kept = path.join(
      path.dirname(realStagingPath(path.dirname(this.#aside))),
      `.sandbox-run-kept-${crypto.randomBytes(6).toString("hex")}`,
    );
    try {
      fs.renameSync(this.#aside, kept);
      return kept;
    } catch {
      return this.#aside;
    }
  }

  #asideDir(): string | undefined {
    if (!this.asideParent) return undefined;
    if (!this.#aside) {
      this.#aside = path.join(this.asideParent, "aside");
      fs.mkdirSync(this.#aside, { mode: 0o700 });
    }
    return this.#aside;
  }

  /**
   * Runs `change` on an O_PATH fd of the entry `rel`, of the kind (and inode) it must be: a folder's
   * own fd from `dirs` (checked when opened), a file's opened for the call.
   */
  #withEntry<T>(
    rel: string,
    directory: boolean,
    identity: Identity | undefined,
    change: (fd: number, stat: fs.Stats) => T,
  ): T {
    if (directory) {
      const fd = this.dirs.dir(rel);
      const stat = fs.fstatSync(fd);
      if (identity && !sameInode(stat, identity))
        throw new TreeDirError(
          `${path.join(this.dirs.root, rel)} is no longer the directory the apply checked (changed on the host)`,
        );
      return change(fd, stat);
    }
    const shown = path.join(this.dirs.root, rel);
    const { fd, stat } = openEntry(this.dirs.dir(parentOf(rel)), path.posix.basename(rel), "file", shown, identity);
    try {
      return change(fd, stat);
    } finally {
      fs.closeSync(fd);
    }
  }

  #noteTimes(rel: string): void {
    if (this.#directoryTimes.has(rel)) return;
    let stat: fs.Stats;
    try {
      stat = fs.fstatSync(this.dirs.dir(rel));
    } catch {
      return; // not a folder the apply may write in: the step itself fails
    }
    // In seconds, as precise as Node can set them (a double: to a fraction of a microsecond).
    this.#directoryTimes.set(rel, { atime: stat.atimeMs / 1000, mtime: stat.mtimeMs / 1000 });
  }
}

export function applyFailed(
  what: string,
  error: unknown,
  unrestored: Array<{ path: string; problem: string }>,
  keptAside: string | undefined,
): SandboxRunError {
  const cause = (error as NodeJS.ErrnoException)?.message ?? String(error);
  if (unrestored.length === 0) {
    return new SandboxRunError(
      "not-applied",
      `The run's changes to ${what} could not be applied (${cause}); every change made so far was undone. Nothing was changed.`,
      {
        hint: "Make the workspace writable for this user (no immutable or append-only files, room on the disk) and run again.",
        cause: error,
      },
    );
  }
  const listed = unrestored
    .slice(0, 10)
    .map((u) => `${u.path} (${u.problem})`)
    .join(", ");
  return new SandboxRunError(
    "not-applied",
    `The run's changes to ${what} could not be applied (${cause}), and undoing them failed for ${unrestored.length} path(s): ${listed}.`,
    {
      hint: `Put those paths back by hand${keptAside ? `: the originals are in ${keptAside}` : ""}; everything else is as it was.`,
      cause: error,
    },
  );
}

function lstatOrUndefined(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch {
    return undefined;
  }
}
