// Every file the controller writes on the host goes through a HostDir: a directory opened once,
// checked to be the caller's, and written relative to its file descriptor. Node has no openat(2),
// but "/proc/self/fd/<fd>/<name>" resolves <name> inside the directory the fd holds, whatever its
// path is now; so after the open no path component can be swapped under a write. Files are created
// with O_CREAT|O_EXCL|O_NOFOLLOW (a planted symlink or an existing file is an error, never written
// through) and replaced by renaming a freshly created file over the name (rename replaces a
// symlink, it does not follow it). A directory inside a tree the sandbox held (a lent workspace, a
// writable root) is refused before anything is created there: `outside` names those trees.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const NEW_FILE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;

export class HostDirError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

interface HostDirOptions {
  /** Create missing folders (mode 0o755 for the caller's own folders, or `mode`). */
  create?: boolean;
  mode?: number;
  /**
   * Trees the sandbox holds or held (canonical paths): a directory at or inside one is refused,
   * since the sandbox may have shaped any name in it.
   */
  outside?: readonly string[];
}

/** A single file name: no separator, not "." or "..", no NUL. */
function checkName(name: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new HostDirError(`not a plain file name: ${JSON.stringify(name)}`);
  }
}

/** Whether `inner` is `outer` or below it (both canonical, absolute). */
function isWithin(outer: string, inner: string): boolean {
  return inner === outer || inner.startsWith(outer.endsWith("/") ? outer : `${outer}/`);
}

export class HostDir {
  #fd: number | undefined;

  private constructor(
    /** The canonical path it had when opened (for messages; writes go through the fd). */
    readonly path: string,
    fd: number,
  ) {
    this.#fd = fd;
  }

  /**
   * Opens `dir`: canonicalised (symlinks the caller made are theirs), then every component opened
   * from "/" with O_NOFOLLOW, so nothing can turn into a link between the check and the open.
   * The result must be a directory owned by this user (or root) that no one else may write to
   * (sticky folders such as /tmp aside).
   */
  static open(dir: string, options: HostDirOptions = {}): HostDir {
    const absolute = path.resolve(dir);
    // Resolved only up to a held tree: a link inside one (a folder the sandbox swapped for a link
    // to anywhere) must not decide where the host writes, so reaching the tree is the refusal.
    const located = locatePath(absolute, options.outside ?? []);
    if (located.kind === "held") {
      throw new HostDirError(`${absolute} lies inside ${located.tree}, which the sandbox held`, "INSIDE_SANDBOX_TREE");
    }
    const { existing, missing } = located;
    const canonical = path.join(existing, ...missing);
    for (const tree of options.outside ?? []) {
      if (isWithin(tree, canonical)) {
        throw new HostDirError(`${canonical} lies inside ${tree}, which the sandbox held`, "INSIDE_SANDBOX_TREE");
      }
    }
    if (missing.length > 0 && !options.create) throw new HostDirError(`${absolute} does not exist`, "ENOENT");
    let fd = fs.openSync("/", DIR_FLAGS);
    // stepInto closes the folder it steps out of, also when it fails: then there is nothing to close.
    let held = true;
    try {
      const steps = [
        ...existing
          .split("/")
          .filter(Boolean)
          .map((part) => ({ part, create: false })),
        ...missing.map((part) => ({ part, create: true })),
      ];
      for (const { part, create } of steps) {
        held = false;
        fd = stepInto(fd, part, create, options.mode);
        held = true;
      }
      checkOwnedByCaller(fd, canonical);
      return new HostDir(canonical, fd);
    } catch (error) {
      if (held) fs.closeSync(fd);
      if (error instanceof HostDirError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new HostDirError(
        code === "ELOOP" || code === "ENOTDIR"
          ? `${canonical} changed while it was opened (a component is no longer a folder)`
          : `${canonical}: ${(error as Error).message}`,
        code,
      );
    }
  }

  get fd(): number {
    if (this.#fd === undefined) throw new HostDirError(`${this.path} is closed`);
    return this.#fd;
  }

  /** The path syscalls use for `name` inside this directory. */
  at(name: string): string {
    checkName(name);
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  /** A folder inside this one, created (mode 0o700 unless given) when `create` and missing. */
  subdir(name: string, options: { create?: boolean; mode?: number } = {}): HostDir {
    const fd = stepInto(
      fs.openSync(`/proc/self/fd/${this.fd}/.`, DIR_FLAGS),
      name,
      options.create ?? false,
      options.mode ?? 0o700,
    );
    return new HostDir(path.join(this.path, name), fd);
  }

  /** Makes a new folder `name` (it must not exist) and opens it. */
  mkdir(name: string, mode = 0o700): HostDir {
    fs.mkdirSync(this.at(name), { mode });
    return this.subdir(name);
  }

  /** A new file's fd: the name must not exist (nor be a symlink). */
  createFile(name: string, mode = 0o644): number {
    return fs.openSync(this.at(name), NEW_FILE_FLAGS, mode);
  }

  /** Writes a new file (exclusive: an existing name, link or not, is an error). */
  writeNew(name: string, data: string | Uint8Array, mode = 0o644): void {
    const fd = this.createFile(name, mode);
    try {
      fs.writeFileSync(fd, data);
    } finally {
      fs.closeSync(fd);
    }
  }

  /** writeNew in the folder at `dir` (opened as open() does, closed after). */
  static writeNewIn(dir: string, name: string, data: string | Uint8Array, mode = 0o644): void {
    const folder = HostDir.open(dir);
    try {
      folder.writeNew(name, data, mode);
    } finally {
      folder.close();
    }
  }

  /** A write stream on a new file (exclusive, as writeNew). */
  newWriteStream(name: string, mode = 0o644): fs.WriteStream {
    return fs.createWriteStream("", { fd: this.createFile(name, mode) });
  }

  /**
   * Puts a new file at `name`, replacing what is there (a file or a symlink: the link itself is
   * replaced, its target untouched). Returns the new file's fd, already in place, for writing.
   */
  replaceWith(name: string, mode = 0o644): number {
    const temporary = temporaryNameFor(name);
    const fd = this.createFile(temporary, mode);
    try {
      fs.renameSync(this.at(temporary), this.at(name));
    } catch (error) {
      fs.closeSync(fd);
      fs.rmSync(this.at(temporary), { force: true });
      throw error;
    }
    return fd;
  }

  /**
   * Writes `data` as the new content of `name`, replacing what is there as replaceWith does, but
   * only once all of it is written: a write that fails (a full disk) leaves the old file and no
   * half of the new one (review, session 32: a cut-off patch replaced the caller's earlier file).
   */
  replaceFile(name: string, data: string | Uint8Array, mode = 0o644): void {
    const temporary = temporaryNameFor(name);
    const fd = this.createFile(temporary, mode);
    try {
      try {
        writeAll(fd, typeof data === "string" ? Buffer.from(data) : data);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(this.at(temporary), this.at(name));
    } catch (error) {
      fs.rmSync(this.at(temporary), { force: true });
      throw error;
    }
  }

  /** lstat of `name`, or undefined when it does not exist. */
  lstat(name: string): fs.Stats | undefined {
    try {
      return fs.lstatSync(this.at(name));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  /** Names in this directory. */
  list(): string[] {
    return fs.readdirSync(`/proc/self/fd/${this.fd}/.`);
  }

  /** Moves `name` from this directory to `target`'s `newName` (same filesystem; replaces nothing). */
  moveTo(name: string, target: HostDir, newName = name): void {
    if (target.lstat(newName)) throw new HostDirError(`${path.join(target.path, newName)} already exists`, "EEXIST");
    fs.renameSync(this.at(name), target.at(newName));
  }

  /**
   * Moves the regular file `name` into `target` (a new name there, never replacing anything): a
   * rename on the same filesystem, else a copy into a new file (O_EXCL|O_NOFOLLOW) and an unlink.
   */
  moveFileTo(name: string, target: HostDir, newName = name): void {
    try {
      this.moveTo(name, target, newName);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
    }
    this.copyFileTo(name, target, newName);
    fs.unlinkSync(this.at(name));
  }

  /** Copies the regular file `name` into a new file `newName` of `target`; a copy that fails leaves none. */
  copyFileTo(name: string, target: HostDir, newName = name): void {
    const from = fs.openSync(this.at(name), fs.constants.O_RDONLY | O_NOFOLLOW);
    try {
      if (!fs.fstatSync(from).isFile()) throw new HostDirError(`${path.join(this.path, name)} is not a file`);
      const to = target.createFile(newName, fs.fstatSync(from).mode & 0o777);
      try {
        const chunk = Buffer.alloc(1024 * 1024);
        for (let n = fs.readSync(from, chunk); n > 0; n = fs.readSync(from, chunk)) writeAll(to, chunk.subarray(0, n));
      } catch (error) {
        fs.closeSync(to);
        fs.rmSync(target.at(newName), { force: true });
        throw error;
      }
      fs.closeSync(to);
    } finally {
      fs.closeSync(from);
    }
  }

  /** The directory's device and inode: which folder this is, whatever its name is now. */
  identity(): DirIdentity {
    const stat = fs.fstatSync(this.fd);
    return { dev: stat.dev, ino: stat.ino };
  }

  /**
   * Opens the folders `parts` below `root` one by one, never following a link and never
   * canonicalising (for paths inside a tree the sandbox held, where any name may be a link it
   * planted). Each must be a plain directory owned by this user (or root) that no one else may
   * write to; missing ones are created (mode 0o755, or `mode`) when `create`.
   */
  static openBelow(
    root: HostDir,
    parts: readonly string[],
    options: { create?: boolean; mode?: number } = {},
  ): HostDir {
    let fd = fs.openSync(`/proc/self/fd/${root.fd}/.`, DIR_FLAGS);
    let shown = root.path;
    let held = true; // see open()
    try {
      for (const part of parts) {
        shown = path.join(shown, part);
        held = false;
        fd = stepInto(fd, part, options.create ?? false, options.mode ?? 0o755);
        held = true;
        checkOwnedByCaller(fd, shown);
      }
      return new HostDir(shown, fd);
    } catch (error) {
      if (held) fs.closeSync(fd);
      if (error instanceof HostDirError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new HostDirError(
        code === "ELOOP" || code === "ENOTDIR"
          ? `${shown} is not a plain folder (a symbolic link, or not a directory)`
          : `${shown}: ${(error as Error).message}`,
        code,
      );
    }
  }

  close(): void {
    if (this.#fd === undefined) return;
    fs.closeSync(this.#fd);
    this.#fd = undefined;
  }
}

export interface DirIdentity {
  dev: number;
  ino: number;
}

/**
 * Where a host path the caller named really is, resolved one component at a time: the caller's own
 * symlinks outside the sandboxed trees are followed (they are the caller's), but once the path
 * reaches one of `held` (trees the sandbox holds or held: canonical paths), nothing below is
 * resolved, since any name there may be a link the sandbox planted. A path inside such a tree is
 * then only ever opened with HostDir.openBelow, component by component, without following links.
 */
export type LocatedPath =
  /** Outside every held tree: `existing` is canonical, `missing` the names below it that do not exist. */
  | { kind: "host"; existing: string; missing: string[] }
  /** At or inside the held tree `tree`: the names from it to the path, unresolved. */
  | { kind: "held"; tree: string; parts: string[] };

const MAX_LINK_HOPS = 40;

export function locatePath(absolute: string, held: readonly string[]): LocatedPath {
  const heldTree = (p: string) => held.find((tree) => isWithin(tree, p));
  const queue = path.resolve(absolute).split("/").filter(Boolean);
  let current = "/";
  let hops = 0;
  for (;;) {
    const tree = heldTree(current);
    if (tree) {
      const inside = current === tree ? [] : current.slice(tree.length + (tree.endsWith("/") ? 0 : 1)).split("/");
      return { kind: "held", tree, parts: [...inside, ...queue] };
    }
    const name = queue.shift();
    if (name === undefined) return { kind: "host", existing: current, missing: [] };
    if (name === ".") continue;
    if (name === "..") {
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, name);
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(next);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      return { kind: "host", existing: current, missing: [name, ...queue].filter((n) => n !== ".") };
    }
    if (stat.isSymbolicLink()) {
      if (++hops > MAX_LINK_HOPS) throw new HostDirError(`${absolute}: too many levels of symbolic links`, "ELOOP");
      checkLinkOwner(next, stat);
      const link = fs.readlinkSync(next, "utf8");
      queue.unshift(...link.split("/").filter(Boolean));
      if (link.startsWith("/")) current = "/";
      continue;
    }
    if (!stat.isDirectory() && queue.length > 0) throw new HostDirError(`${next} is not a folder`, "ENOTDIR");
    current = next;
  }
}

/**
 * A link on the way to a place the host writes is followed only when this user or root made it.
 * Another local user's link (in /tmp, in a folder of theirs) would choose where a root controller
 * writes; the kernel's own guard (fs.protected_symlinks) does not apply, since the links are
 * resolved here, one component at a time, not by the kernel.
 */
function checkLinkOwner(link: string, stat: fs.Stats): void {
  const uid = process.geteuid?.() ?? 0;
  if (stat.uid === uid || stat.uid === 0) return;
  throw new HostDirError(
    `${link} is a symbolic link made by uid ${stat.uid}, not by this user (${uid}) or root: sandbox-run does not follow it to write`,
    "NOT_OURS",
  );
}

/** Opens `name` under `parentFd` as a directory without following a link, closing `parentFd`. */
function stepInto(parentFd: number, name: string, create: boolean, mode = 0o755): number {
  try {
    checkName(name);
    const at = `/proc/self/fd/${parentFd}/${name}`;
    if (create) {
      try {
        fs.mkdirSync(at, { mode });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
    }
    return fs.openSync(at, DIR_FLAGS);
  } finally {
    fs.closeSync(parentFd);
  }
}

function checkOwnedByCaller(fd: number, shownAs: string): void {
  const stat = fs.fstatSync(fd);
  const uid = process.geteuid?.() ?? 0;
  if (stat.uid !== uid && stat.uid !== 0) {
    throw new HostDirError(`${shownAs} belongs to uid ${stat.uid}, not to this user (${uid})`, "NOT_OURS");
  }
  const othersMayWrite = (stat.mode & 0o022) !== 0 && (stat.mode & 0o1000) === 0;
  if (othersMayWrite) {
    throw new HostDirError(
      `${shownAs} may be written by other users (mode ${(stat.mode & 0o7777).toString(8)})`,
      "NOT_PRIVATE",
    );
  }
}

/**
 * Opens a file the caller named for writing, as the host's own output (the CLI's --events): a
 * pipe, terminal or other device is written as it is (`/dev/stderr`); anything else becomes a new
 * regular file renamed over the name, created in a checked folder without following a link there.
 * A path at or inside one of `held` (trees the sandbox holds or held), by its name or through a
 * link, is refused (HostDirError "INSIDE_SANDBOX_TREE"): a name there may be a link the sandbox planted.
 */
export function openOutputFile(file: string, held: readonly string[]): number {
  const { absolute, followed, special, located } = judgeOutputFile(file, held);
  if (special || !located) return openSpecialFile(absolute);
  const folder = located.missing.length === 0 ? path.dirname(located.existing) : located.existing;
  const name = located.missing.length === 0 ? path.basename(located.existing) : located.missing[0]!;
  if (located.missing.length > 1) throw new HostDirError(`${path.dirname(absolute)} does not exist`, "ENOENT");
  if (followed?.isDirectory()) throw new HostDirError(`${absolute} is a folder`, "EISDIR");
  const dir = HostDir.open(folder, { outside: held });
  try {
    return dir.replaceWith(name);
  } finally {
    dir.close();
  }
}

/** openOutputFile's refusals without opening anything (a dry run's yes is a run's yes). */
export function checkOutputFile(file: string, held: readonly string[]): void {
  judgeOutputFile(file, held);
}

/** Where an output file would go, refused (HostDirError) where openOutputFile refuses it. */
function judgeOutputFile(
  file: string,
  held: readonly string[],
): { absolute: string; followed?: fs.Stats; special: boolean; located?: Extract<LocatedPath, { kind: "host" }> } {
  const absolute = path.resolve(file);
  const inside = (p: string) => held.find((tree) => isWithin(tree, p));
  const lexical = inside(absolute);
  if (lexical)
    throw new HostDirError(`${absolute} lies inside ${lexical}, which the sandbox holds`, "INSIDE_SANDBOX_TREE");
  let followed: fs.Stats | undefined;
  try {
    followed = fs.statSync(absolute);
  } catch (error) {
    // Only a missing file is a new one: on any other error (EMFILE, EACCES) a device named here
    // would be taken for a file and replaced.
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    followed = undefined;
  }
  const special = followed && (followed.isFIFO() || followed.isCharacterDevice() || followed.isSocket());
  let located: LocatedPath | undefined;
  try {
    located = locatePath(absolute, held);
  } catch (error) {
    // /dev/stderr leads to /proc/self/fd/2, whose "pipe:[...]" names no path: fine for a device,
    // but not through another user's link.
    if (!special || (error instanceof HostDirError && error.code === "NOT_OURS")) throw error;
  }
  if (located?.kind === "held") {
    throw new HostDirError(`${absolute} leads into ${located.tree}, which the sandbox holds`, "INSIDE_SANDBOX_TREE");
  }
  return { absolute, followed, special: Boolean(special), located };
}

/**
 * A pipe, terminal or device the caller named, opened as it is. A FIFO must be this user's or
 * root's, or one of this process's own stdio (`/dev/stderr` piped by the user who ran sudo):
 * another user's FIFO planted at the name would read the run's events. Devices only root makes.
 */
function openSpecialFile(absolute: string): number {
  const fd = fs.openSync(absolute, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_NOCTTY);
  try {
    const stat = fs.fstatSync(fd);
    const uid = process.geteuid?.() ?? 0;
    if (stat.isFile() || stat.isDirectory())
      throw new HostDirError(`${absolute} changed while it was opened`, "CHANGED");
    if (stat.isFIFO() && stat.uid !== uid && stat.uid !== 0 && !isOwnStdio(stat))
      throw new HostDirError(`${absolute} belongs to uid ${stat.uid}, not to this user (${uid})`, "NOT_OURS");
    return fd;
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

function isOwnStdio(stat: fs.Stats): boolean {
  return [0, 1, 2].some((fd) => {
    try {
      const own = fs.fstatSync(fd);
      return own.ino === stat.ino && own.dev === stat.dev;
    } catch {
      return false;
    }
  });
}

/** All of `data` to `fd`: a write may take less than all (a disk filling up), and the rest follows or fails. */
export function writeAll(fd: number, data: Uint8Array): void {
  for (let done = 0; done < data.length; ) done += fs.writeSync(fd, data, done, data.length - done);
}

/**
 * A scratch name beside `name`: its first 100 bytes (whole characters), so any valid name's scratch
 * name is valid too (review, session 32: 100 UTF-16 units of CJK made it past NAME_MAX).
 */
function temporaryNameFor(name: string): string {
  let prefix = "";
  for (const char of name) {
    if (Buffer.byteLength(prefix + char) > 100) break;
    prefix += char;
  }
  return `.${prefix}.${crypto.randomBytes(6).toString("hex")}.tmp`;
}
