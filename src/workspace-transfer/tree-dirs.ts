// The folders of a host tree as copy mode's apply reaches them (apply-tree.ts, apply-journal.ts):
// through directory fds, never by path. The workspace may hold folders another local user owns;
// between a check and a write such a user can swap a folder (or a file) for a symlink, and a root
// caller writing by path would then write, or chmod, anywhere. So the root is opened once, and each
// folder below it one name at a time relative to its parent's fd (O_DIRECTORY|O_NOFOLLOW), checked
// against the inode the walk saw (or the one this apply made). An entry is then named
// "/proc/self/fd/<folder fd>/<name>" (Node has no openat): its only followed part is the pinned fd.
// The fds are O_PATH: they open nothing and need no read permission, as a path would not; a mode,
// owner or time is set through "/proc/self/fd/<fd>" of such an fd (fchmodat(fd, "", AT_EMPTY_PATH)
// in effect: Node has neither, and fchmod refuses an O_PATH fd), after fstat judged its kind.
// Fds are cached per folder (an apply works folder by folder, in walk order), at most MAX_OPEN at
// once, the least recently used closed first; one opened again is checked against the same inode.
// An fd from `dir()` is valid until the next call into this class: one folder per syscall.
import fs from "node:fs";
import path from "node:path";
import { O_PATH } from "../util/o-path.js";
import { fdBudget } from "../util/open-files-limit.js";
import { atTextPath } from "../workspace/fd-walk.js";
import { parentOf } from "./tree-entry.js";

const { O_DIRECTORY, O_NOFOLLOW } = fs.constants;
const DIR_FLAGS = O_PATH | O_DIRECTORY | O_NOFOLLOW;
/** 128, or less under a low `ulimit -n` (each apply holds its own). */
const MAX_OPEN = fdBudget(128);

export interface Identity {
  dev: number;
  ino: number;
}

/** A folder of the tree is not (or no longer) the one the apply checked: nothing is written below it. */
export class TreeDirError extends Error {}

export class TreeDirs {
  /** Folder fds by path, least recently used first (the root's is held apart). */
  readonly #open = new Map<string, number>();
  /** The inode each folder must be: the walk's, or the one this apply made. */
  readonly #known = new Map<string, Identity>();
  /** Every folder opened (written in, or judged) and not left since: moved() checks them. */
  readonly #used = new Set<string>();
  /** The used folders by parent, so forget() costs what it closes. */
  readonly #children = new Map<string, Set<string>>();
  #rootFd: number | undefined;

  private constructor(
    readonly root: string,
    rootFd: number,
    known: Iterable<[string, Identity]>,
  ) {
    this.#rootFd = rootFd;
    for (const [rel, identity] of known) this.#known.set(rel, identity);
  }

  /** Opens the root (no symlink, the inode `known` gives for ""), or throws. */
  static open(root: string, known: Iterable<[string, Identity]>): TreeDirs {
    const fd = fs.openSync(root, DIR_FLAGS);
    const dirs = new TreeDirs(root, fd, known);
    const expected = dirs.#known.get("");
    if (!expected || !sameInode(fs.fstatSync(fd), expected)) {
      dirs.close();
      throw new TreeDirError(`${root} is not the directory the apply checked (changed on the host)`);
    }
    return dirs;
  }

  /** The fd of the folder `rel` ("" the root): opened as described at the top, or a TreeDirError. */
  dir(rel: string): number {
    if (rel === "") return this.#root();
    const cached = this.#open.get(rel);
    if (cached !== undefined) {
      this.#open.delete(rel);
      this.#open.set(rel, cached);
      return cached;
    }
    const parentFd = this.dir(parentOf(rel));
    const fd = this.#openChecked(parentFd, rel);
    this.#use(rel);
    this.#remember(rel, fd);
    return fd;
  }

  /** The path syscalls use for the entry `rel` (not the root): "/proc/self/fd/<its folder's fd>/<name>". */
  at(rel: string): string {
    if (rel === "") throw new TreeDirError("the root has no name in a folder");
    return atTextPath(this.dir(parentOf(rel)), path.posix.basename(rel));
  }

  /** The folder `rel` was just made by this apply: from now on it must be that inode. */
  made(rel: string): void {
    this.forget(rel);
    const parentFd = this.dir(parentOf(rel));
    const fd = openDirectory(parentFd, rel, this.root);
    const stat = fs.fstatSync(fd);
    // A folder this apply made is the caller's; another user's swapped in is not written into.
    // (Or its parent's owner: filesystems that force ownership, vfat or cifs with uid=, sshfs,
    // root_squash NFS, give every folder the mount's owner; another user's folder is its own.)
    if (stat.uid !== process.geteuid?.() && stat.uid !== fs.fstatSync(parentFd).uid) {
      fs.closeSync(fd);
      throw new TreeDirError(`${path.join(this.root, rel)} changed on the host while the apply made it`);
    }
    this.#known.set(rel, { dev: stat.dev, ino: stat.ino });
    this.#use(rel);
    this.#remember(rel, fd);
  }

  /** The folder `rel` left its place (moved aside, removed): its fd and those below it are closed. */
  forget(rel: string): void {
    if (!this.#used.has(rel)) return; // then nothing below it was opened either
    this.#children.get(parentOf(rel))?.delete(rel);
    const stack = [rel];
    for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
      this.#used.delete(next);
      const fd = this.#open.get(next);
      if (fd !== undefined) {
        this.#open.delete(next);
        fs.closeSync(fd);
      }
      const below = this.#children.get(next);
      if (below) for (const child of below) stack.push(child); // a spread of a huge folder overflows the stack
      this.#children.delete(next);
    }
  }

  /**
   * The folders opened so far that are no longer at their place (their fds kept every write
   * inside them; this finds a swap that happened meanwhile, so the apply can be undone).
   */
  moved(): string[] {
    const moved: string[] = [];
    try {
      if (!sameInode(fs.lstatSync(this.root), fs.fstatSync(this.#root()))) moved.push("");
    } catch {
      moved.push("");
    }
    for (const rel of [...this.#used]) {
      try {
        const stat = fs.lstatSync(this.at(rel));
        if (!stat.isDirectory() || !sameInode(stat, this.#known.get(rel)!)) moved.push(rel);
      } catch {
        moved.push(rel);
      }
    }
    return moved;
  }

  /**
   * An error whose message names entries as "/proc/self/fd/<fd>/<name>" (Node puts the syscall's
   * paths in it), with those names turned back into paths under the root, for the user to read.
   */
  shown(error: unknown): unknown {
    if (!(error instanceof Error)) return error;
    const folders = new Map<string, string>();
    if (this.#rootFd !== undefined) folders.set(String(this.#rootFd), this.root);
    for (const [rel, fd] of this.#open) folders.set(String(fd), path.join(this.root, rel));
    const message = error.message.replace(
      /\/proc\/self\/fd\/(\d+)(?=\/|'|$)/g,
      (text, fd: string) => folders.get(fd) ?? text,
    );
    if (message === error.message) return error;
    return Object.assign(new Error(message, { cause: error }), { code: (error as NodeJS.ErrnoException).code });
  }

  close(): void {
    for (const fd of this.#open.values()) fs.closeSync(fd);
    this.#open.clear();
    this.#used.clear();
    this.#children.clear();
    if (this.#rootFd !== undefined) fs.closeSync(this.#rootFd);
    this.#rootFd = undefined;
  }

  #root(): number {
    if (this.#rootFd === undefined) throw new TreeDirError(`${this.root}: the apply's folders are closed`);
    return this.#rootFd;
  }

  #use(rel: string): void {
    if (this.#used.has(rel)) return;
    this.#used.add(rel);
    const parent = parentOf(rel);
    const siblings = this.#children.get(parent);
    if (siblings) siblings.add(rel);
    else this.#children.set(parent, new Set([rel]));
  }

  #openChecked(parentFd: number, rel: string): number {
    const fd = openDirectory(parentFd, rel, this.root);
    const expected = this.#known.get(rel);
    if (!expected || !sameInode(fs.fstatSync(fd), expected)) {
      fs.closeSync(fd);
      throw new TreeDirError(
        `${path.join(this.root, rel)} is not the directory the apply checked (changed on the host); refusing to write below it`,
      );
    }
    return fd;
  }

  #remember(rel: string, fd: number): void {
    this.#open.set(rel, fd);
    if (this.#open.size <= MAX_OPEN) return;
    const [oldest, oldestFd] = this.#open.entries().next().value as [string, number];
    this.#open.delete(oldest);
    fs.closeSync(oldestFd);
  }
}

/** Opens the folder `rel` in the folder `parentFd` holds, never through a symlink. */
function openDirectory(parentFd: number, rel: string, root: string): number {
  try {
    return fs.openSync(atTextPath(parentFd, path.posix.basename(rel)), DIR_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP") {
      throw new TreeDirError(`${path.join(root, rel)} is not a directory; refusing to write below it`);
    }
    throw error;
  }
}

export function sameInode(stat: fs.Stats, identity: Identity): boolean {
  return stat.ino === identity.ino && stat.dev === identity.dev;
}

/**
 * Opens the entry `name` of the folder `dirFd` as an O_PATH fd (a symlink is the link itself),
 * and checks by fstat that it is of `kind` and, given `identity`, that inode. Undefined when
 * there is no such entry; a TreeDirError when it is something else.
 */
export function openEntry(
  dirFd: number,
  name: string,
  kind: "file" | "directory",
  shown: string,
  identity?: Identity,
): { fd: number; stat: fs.Stats } {
  let fd: number;
  try {
    fd = fs.openSync(atTextPath(dirFd, name), O_PATH | O_NOFOLLOW | (kind === "directory" ? O_DIRECTORY : 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP") {
      throw new TreeDirError(`${shown} is no longer the ${kind} the apply checked (changed on the host)`);
    }
    throw error;
  }
  const stat = fs.fstatSync(fd);
  const right = kind === "file" ? stat.isFile() : stat.isDirectory();
  if (!right || (identity && !sameInode(stat, identity))) {
    fs.closeSync(fd);
    throw new TreeDirError(`${shown} is no longer the ${kind} the apply checked (changed on the host)`);
  }
  return { fd, stat };
}

/** The path that sets a mode, owner or times of what an O_PATH fd holds (and nothing else). */
export function pinned(fd: number): string {
  return `/proc/self/fd/${fd}`;
}
