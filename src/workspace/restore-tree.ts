// After a run with violations: puts each violated scope back as the kept copy says, removes
// what the run created there, and sets directory modes back. Everything goes through
// directory fds (fd-walk.ts): the container is stopped, but the tree is what it left, so no
// symlink is followed and no path is resolved twice. A change in a folder the run made read-only
// lends the caller owner write there for the change (owner-write.ts: a non-root caller's sandbox
// runs as its uid, owns the folders it makes, and may `chmod 555` them).
import crypto from "node:crypto";
import fs from "node:fs";
import nodePath from "node:path";
import { writeAll } from "../util/host-dir.js";
import { atPath, errorCode, openDirAt, openRoot, walkTree } from "./fd-walk.js";
import { withOwnerWrite } from "./owner-write.js";
import type { KeptEntry, ProtectedCopy } from "./protected-copy.js";
import { lstatBelow, lstatOrUndefined, removeAt } from "./remove-tree.js";
import type { RestoreStep } from "./workspace-rules.js";
import { hashFileAt } from "./workspace-snapshot.js";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

export interface RestoreReport {
  /** Scopes put back as they were before the run. */
  reverted: string[];
  /** Scopes the run created, removed. */
  removed: string[];
  /**
   * Object-store files that failed their check (or held a symlink), removed: git reports such an
   * object missing instead of reading the run's content.
   */
  objects: string[];
  /**
   * Packs (and their .idx) this host could not check (its git could not run), set aside instead of
   * removed: `keptAt` where they are now (the run's folder of unchecked packs); without it, the move
   * failed (`why`): a .pack then stays where it was without its .idx (git does not read a pack
   * without one; `git index-pack` makes it again, hashing every object), an .idx is removed.
   */
  setAside: Array<{ path: string; keptAt?: string; why?: string }>;
  /** Directory modes set back. */
  modes: string[];
  /** What could not be put back, with why. */
  notRestored: Array<{ path: string; why: string }>;
}

/**
 * Applies the steps (parents first, see RestorePlan.ordered) to the tree at `root`.
 * `movedStores`: object stores the walk found elsewhere than before the run (kept path ->
 * where it is now), to be moved back if their git directory is reverted. `setAsideDir`: a private
 * folder of the run, kept after it, where packs this host could not check are moved (steps with
 * `setAside`); without it they are removed like any refused object file.
 */
export function applyRestore(
  root: string,
  steps: readonly RestoreStep[],
  copy: ProtectedCopy,
  movedStores: ReadonlyMap<string, string> = new Map(),
  setAsideDir?: string,
): RestoreReport {
  const report: RestoreReport = { reverted: [], removed: [], objects: [], setAside: [], modes: [], notRestored: [] };
  const kept = copy.load(steps.filter((s) => s.action === "revert").map((s) => s.path));
  const restorer = new Restorer(kept, copy, report, setAsideDir);
  const rootFd = openRoot(root);
  try {
    restorer.rootFd = rootFd;
    restorer.rescueMovedStores(rootFd, steps, movedStores);
    restorer.rescueObjectStores(rootFd, steps);
    for (const step of steps) {
      try {
        restorer.apply(rootFd, step);
      } catch (error) {
        report.notRestored.push({ path: step.path || ".", why: errorCode(error) });
      }
    }
    restorer.dropUnusedRescues(rootFd);
  } finally {
    fs.closeSync(rootFd);
  }
  return report;
}

class Restorer {
  private readonly children = new Map<string, string[]>();
  private readonly asRoot = process.geteuid?.() === 0;
  /**
   * Kept object-store path -> the name (in the root) it was moved aside to, to go back into
   * place; `from`: where the run had put it (it goes back there if its git directory is not
   * restored after all).
   */
  private readonly rescued = new Map<string, { aside: string; from?: string }>();
  rootFd?: number;

  constructor(
    private readonly kept: Map<string, KeptEntry>,
    private readonly copy: ProtectedCopy,
    private readonly report: RestoreReport,
    private readonly setAsideDir?: string,
  ) {
    for (const p of kept.keys()) {
      const parent = p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : "";
      const list = this.children.get(parent);
      if (list) list.push(p.slice(parent === "" ? 0 : parent.length + 1));
      else this.children.set(parent, [p.slice(parent === "" ? 0 : parent.length + 1)]);
    }
  }

  /**
   * A git directory's object store is not copied (it is large), so if the run moved it (`mv
   * .git x`, then a gitdir: file) and x is about to be removed as a new repository, the user's
   * history would go with it. Found by inode among the scopes to remove, it is moved aside
   * first, and put back when its git directory is restored.
   */
  rescueObjectStores(rootFd: number, steps: readonly RestoreStep[]): void {
    const wanted = new Map<string, KeptEntry>();
    for (const row of this.kept.values()) {
      if (!row.objectStore || this.rescued.has(row.path)) continue;
      const now = lstatBelow(rootFd, row.path);
      if (!now || now.ino !== row.ino) wanted.set(`${row.ino}`, row);
    }
    if (wanted.size === 0) return;
    for (const step of steps) {
      if (step.action !== "remove" || wanted.size === 0) continue;
      const parts = step.path.split("/");
      const parentFd = this.openPath(rootFd, parts.slice(0, -1), false);
      if (parentFd === undefined) continue;
      try {
        const found: Array<{ row: KeptEntry; path: string }> = [];
        const scope = atPath(parentFd, parts[parts.length - 1]!);
        if (!lstatOrUndefined(scope)?.isDirectory()) continue;
        for (const entry of walkTree(scope, { maxDepth: Number.POSITIVE_INFINITY })) {
          const row = entry.kind === "directory" ? wanted.get(`${entry.stat!.ino}`) : undefined;
          if (row && entry.stat!.dev === row.dev) {
            found.push({ row, path: entry.path === "" ? step.path : `${step.path}/${entry.path}` });
            wanted.delete(`${row.ino}`);
          }
        }
        for (const { row, path } of found) {
          const aside = `.sandbox-run-rescue-${crypto.randomBytes(6).toString("hex")}`;
          const fromParts = path.split("/");
          const fromFd = this.openPath(rootFd, fromParts.slice(0, -1), false);
          if (fromFd === undefined) continue;
          try {
            moveBetween(fromFd, fromParts[fromParts.length - 1]!, rootFd, aside);
            this.rescued.set(row.path, { aside });
          } finally {
            fs.closeSync(fromFd);
          }
        }
      } finally {
        fs.closeSync(parentFd);
      }
    }
  }

  /**
   * An object store the run moved elsewhere in the tree (`mv .git/objects x`, then a symlink in
   * its place, found by inode during the walk) goes aside first when its git directory is about
   * to be reverted, and back into place with it.
   */
  rescueMovedStores(rootFd: number, steps: readonly RestoreStep[], moved: ReadonlyMap<string, string>): void {
    const reverted = steps.filter((s) => s.action === "revert").map((s) => s.path);
    for (const [keptPath, now] of moved) {
      if (!reverted.some((r) => r === keptPath || r === "" || keptPath.startsWith(`${r}/`))) continue;
      const parts = now.split("/");
      const fromFd = this.openPath(rootFd, parts.slice(0, -1), false);
      if (fromFd === undefined) continue;
      try {
        const aside = `.sandbox-run-rescue-${crypto.randomBytes(6).toString("hex")}`;
        moveBetween(fromFd, parts[parts.length - 1]!, rootFd, aside);
        this.rescued.set(keptPath, { aside, from: now });
      } finally {
        fs.closeSync(fromFd);
      }
    }
  }

  /**
   * Object stores moved aside whose git directory was not restored: one the run moved goes back
   * where the run put it; one found in a removed scope is removed with it.
   */
  dropUnusedRescues(rootFd: number): void {
    for (const { aside, from } of this.rescued.values()) {
      if (from !== undefined) {
        const parts = from.split("/");
        const parentFd = this.openPath(rootFd, parts.slice(0, -1), false);
        if (parentFd !== undefined) {
          try {
            moveBetween(rootFd, aside, parentFd, parts[parts.length - 1]!);
            continue;
          } catch {
            // its place is taken or gone: removed below
          } finally {
            fs.closeSync(parentFd);
          }
        }
      }
      removeIn(rootFd, aside);
    }
    this.rescued.clear();
  }

  apply(rootFd: number, step: RestoreStep): void {
    const parts = step.path === "" ? [] : step.path.split("/");
    if (step.action === "mode") {
      if (parts.length === 0) {
        // The root itself: its fd is held (a lstat of /proc/self/fd/<fd> would see the magic link).
        fs.fchmodSync(rootFd, step.mode);
        this.report.modes.push(".");
        return;
      }
      // Through the parent: a directory made unreadable (0311) cannot be opened to fchmod it.
      const parentFd = this.openPath(rootFd, parts.slice(0, -1), false);
      if (parentFd === undefined) return; // gone: nothing left to be unsafe
      try {
        const at = atPath(parentFd, parts[parts.length - 1]!);
        const current = lstatOrUndefined(at);
        if (!current?.isDirectory() && !current?.isFile()) return;
        fs.chmodSync(at, step.mode); // lstat: a directory or a file, and nothing moves the tree now
      } finally {
        fs.closeSync(parentFd);
      }
      this.report.modes.push(step.path);
      return;
    }
    if (parts.length === 0) {
      if (step.action === "remove") throw new Error("the root cannot be removed");
      this.restoreChildren(rootFd, "", false);
      this.report.reverted.push(".");
      return;
    }
    const parentFd = this.openPath(rootFd, parts.slice(0, -1), step.action === "revert");
    if (parentFd === undefined) return; // a parent is gone, so is the scope
    try {
      const name = parts[parts.length - 1]!;
      if (step.action === "remove") {
        if (step.setAside && this.setAsideDir !== undefined) this.setAside(parentFd, name, step.path);
        else if (removeIn(parentFd, name))
          (step.objectStore ? this.report.objects : this.report.removed).push(step.path);
      } else {
        this.restoreEntry(parentFd, name, step.path);
        this.report.reverted.push(step.path);
      }
    } finally {
      fs.closeSync(parentFd);
    }
  }

  /** Folders made in setAsideDir, by the tree path of the folder their packs came from. */
  private readonly asideFolders = new Map<string, string>();

  /**
   * A pack (or .idx) this host could not check, moved out of the object store into a folder of its
   * own in setAsideDir: not left where git reads it unchecked, not deleted (an honest `git gc` packed
   * the repository's history into it). Renamed when both are on one filesystem, else copied through
   * an fd opened without following a link into a file made exclusively, then unlinked.
   */
  private setAside(parentFd: number, name: string, treePath: string): void {
    const at = atPath(parentFd, name);
    const current = lstatOrUndefined(at);
    if (!current) return;
    if (!current.isFile()) {
      // Not a file (any more): nothing git reads as a pack, and nothing to keep.
      if (removeIn(parentFd, name)) this.report.objects.push(treePath);
      return;
    }
    let dest: string | undefined;
    try {
      const from = treePath.includes("/") ? treePath.slice(0, treePath.lastIndexOf("/")) : "";
      let folder = this.asideFolders.get(from);
      if (folder === undefined) {
        try {
          fs.mkdirSync(this.setAsideDir!, { mode: 0o700 });
        } catch (error) {
          if (errorCode(error) !== "EEXIST") throw error;
        }
        if (!fs.lstatSync(this.setAsideDir!).isDirectory()) throw new Error("ENOTDIR");
        folder = fs.mkdtempSync(nodePath.join(this.setAsideDir!, "pack-"));
        this.asideFolders.set(from, folder);
      }
      dest = nodePath.join(folder, name);
      moveFileOut(parentFd, name, dest);
      this.report.setAside.push({ path: treePath, keptAt: dest });
    } catch (error) {
      const why = `could not be moved to ${dest ?? this.setAsideDir} (${errorCode(error)})`;
      if (name.endsWith(".pack")) {
        // Its .idx goes (set aside or removed): git never reads a pack without one.
        this.report.setAside.push({ path: treePath, why: `${why}; left in place without its .idx` });
        return;
      }
      removeIn(parentFd, name);
      this.report.setAside.push({
        path: treePath,
        why: `${why}; removed (git index-pack makes it again from the pack)`,
      });
    }
  }

  /** An fd for the directory at `parts` below the root; with `create`, missing or replaced parents are made again. */
  private openPath(rootFd: number, parts: readonly string[], create: boolean): number | undefined {
    let fd = openDirAt(rootFd, ".");
    for (let i = 0; i < parts.length; i++) {
      const name = parts[i]!;
      let next: number | undefined;
      try {
        next = openDirAt(fd, name);
      } catch (error) {
        // A directory the run made unsearchable (chmod 000) is opened again after its mode is
        // set back (the container is gone: nothing swaps it meanwhile; lstat: not a link).
        if (errorCode(error) === "EACCES" && lstatOrUndefined(atPath(fd, name))?.isDirectory()) {
          try {
            fs.chmodSync(atPath(fd, name), 0o700);
            next = openDirAt(fd, name);
            fs.closeSync(fd);
            fd = next;
            continue;
          } catch {
            // as before: the error below
          }
        }
        const code = errorCode(error);
        if (!create || !["ENOENT", "ENOTDIR", "ELOOP"].includes(code)) {
          fs.closeSync(fd);
          if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP") return undefined;
          throw error;
        }
        try {
          next = this.makeAgain(fd, name, code, parts.slice(0, i + 1).join("/"));
        } catch (failure) {
          fs.closeSync(fd); // no fd outlives a failed restore (it held the tree's filesystem busy)
          throw failure;
        }
      }
      fs.closeSync(fd);
      fd = next;
    }
    return fd;
  }

  /**
   * One entry put back as kept. A write the host cannot make (the sandbox filled the disk: ENOSPC,
   * EDQUOT; review, session 32) must not leave the run's content at a protected path: the entry the
   * run left is removed, and reported as not restored. Each entry on its own, so one failure does
   * not leave the rest of its scope as the run left it.
   */
  /** A missing or replaced folder made again (empty) and opened. */
  private makeAgain(fd: number, name: string, code: string, path: string): number {
    const at = atPath(fd, name);
    if (code !== "ENOENT") {
      removeIn(fd, name);
      this.report.notRestored.push({ path, why: "was no longer a directory; replaced by an empty one" });
    }
    withOwnerWrite(fd, () => fs.mkdirSync(at, { mode: 0o755 }));
    const next = openDirAt(fd, name);
    if (this.asRoot) {
      const parent = fs.fstatSync(fd);
      fs.fchownSync(next, parent.uid, parent.gid);
    }
    return next;
  }

  private restoreEntry(dirFd: number, name: string, path: string): void {
    try {
      this.putBack(dirFd, name, path);
    } catch (error) {
      // A directory stays: its entries were put back (or failed) one by one, and a kept directory
      // may hold what was never copied (a git object store: removing it lost the history; review,
      // session 32).
      const current = lstatOrUndefined(atPath(dirFd, name));
      let outcome = "left as it is";
      if (current && !current.isDirectory()) {
        try {
          removeIn(dirFd, name);
          outcome = "what the run left there is removed";
        } catch {
          outcome = "what the run left there could not be removed either";
        }
      }
      this.report.notRestored.push({ path, why: `${errorCode(error)}; ${outcome}` });
    }
  }

  private putBack(dirFd: number, name: string, path: string): void {
    const row = this.kept.get(path);
    if (row?.kind === "directory") this.restoreDirectory(dirFd, name, path, row);
    // Each step below looks at what is there before it acts, so it may run again once owner write is lent.
    else withOwnerWrite(dirFd, () => this.putBackEntry(dirFd, name, path, row));
  }

  /** putBack of anything but a directory (whose entries are put back one by one). */
  private putBackEntry(dirFd: number, name: string, path: string, row: KeptEntry | undefined): void {
    const at = atPath(dirFd, name);
    const current = lstatOrUndefined(at);
    if (!row) {
      if (current) removeAt(dirFd, name);
      return;
    }
    if (row.kind === "file") this.restoreFile(dirFd, name, path, row, current);
    else if (row.kind === "symlink") {
      if (current?.isSymbolicLink() && fs.readlinkSync(at, "utf8") === row.hash) return;
      if (current) removeAt(dirFd, name);
      fs.symlinkSync(row.hash ?? "", at);
      if (this.asRoot) fs.lchownSync(at, row.uid, row.gid);
    } else if (!current || kindName(current) !== row.kind) {
      if (current) removeAt(dirFd, name);
      this.report.notRestored.push({ path, why: `a ${row.kind} cannot be made again` });
    }
  }

  private restoreDirectory(dirFd: number, name: string, path: string, row: KeptEntry): void {
    withOwnerWrite(dirFd, () => this.placeDirectory(dirFd, name, path));
    const fd = openDirAt(dirFd, name);
    try {
      this.restoreChildren(fd, path, row.objectStore === true);
      if (this.asRoot) fs.fchownSync(fd, row.uid, row.gid);
      fs.fchmodSync(fd, row.mode & 0o7777);
    } finally {
      fs.closeSync(fd);
    }
  }

  /** A directory at `name` (the rescued object store, or the one there, or a new one), open to its owner. */
  private placeDirectory(dirFd: number, name: string, path: string): void {
    const at = atPath(dirFd, name);
    let current = lstatOrUndefined(at);
    const aside = this.rescued.get(path)?.aside;
    if (aside) {
      if (current) removeAt(dirFd, name);
      withOwnerWrite(this.rootFd!, () => fs.renameSync(atPath(this.rootFd!, aside), at));
      this.rescued.delete(path);
      current = fs.lstatSync(at);
    }
    const isDirectory = current?.isDirectory() === true;
    if (current && !isDirectory) removeAt(dirFd, name);
    if (!isDirectory) fs.mkdirSync(at, { mode: 0o700 });
    else if ((current!.mode & 0o700) !== 0o700) fs.chmodSync(at, 0o700); // it may have been made unreadable
  }

  /** Every kept child restored, every other child removed; in an object store only the alternates files. */
  private restoreChildren(fd: number, path: string, objectStore: boolean): void {
    const prefix = path === "" ? "" : `${path}/`;
    const keptNames = this.children.get(path) ?? [];
    if (objectStore) {
      // objects/info/alternates and http-alternates are kept; the rest is left as it is.
      const info = `${prefix}info`;
      const infoChildren = this.children.get(info) ?? [];
      const present = lstatOrUndefined(atPath(fd, "info"));
      if (!present?.isDirectory() && infoChildren.length === 0) return;
      const infoFd = this.openPath(fd, ["info"], true)!;
      try {
        for (const n of ["alternates", "http-alternates"]) this.restoreEntry(infoFd, n, `${info}/${n}`);
      } finally {
        fs.closeSync(infoFd);
      }
      return;
    }
    const names = new Set(keptNames);
    for (const raw of fs.readdirSync(`/proc/self/fd/${fd}`, { encoding: "buffer" })) {
      const text = raw.toString("utf8");
      if (Buffer.from(text, "utf8").equals(raw)) names.add(text);
      else removeIn(fd, raw); // a name that is not UTF-8 was never kept
    }
    for (const n of [...names].sort()) this.restoreEntry(fd, n, prefix + n);
  }

  private restoreFile(dirFd: number, name: string, path: string, row: KeptEntry, current?: fs.Stats): void {
    const at = atPath(dirFd, name);
    // Same content is enough, unless another name links to it now (host git would write through both).
    const sameFile = current?.isFile() && current.nlink === 1;
    if (sameFile && row.hash !== undefined && hashFileAt(at, current!, row.size) === row.hash) {
      if (this.asRoot) fs.lchownSync(at, row.uid, row.gid);
      fs.chmodSync(at, row.mode & 0o7777); // lstat: a regular file; nothing moves it now
      return;
    }
    if (row.blob === undefined) {
      const unchanged =
        sameFile &&
        current!.size === row.size &&
        current!.mtimeMs === row.mtimeMs &&
        current!.ctimeMs === row.ctimeMs &&
        current!.ino === row.ino;
      if (unchanged) return;
      if (row.gitAllowed && current?.isFile()) {
        // Ordinary git data (a large index or reflog): its content stays, but not a second link to it.
        if (current.nlink > 1) this.unlinkByCopy(dirFd, name, current, row);
        this.report.notRestored.push({ path, why: `not kept (${row.notCopied}); left as the run left it` });
        return;
      }
      if (current) removeAt(dirFd, name);
      this.report.notRestored.push({
        path,
        why: `${current ? "changed" : "deleted"} by the run and not kept (${row.notCopied}): ${current ? "removed" : "left out"}`,
      });
      return;
    }
    const content = fs.readFileSync(this.copy.blobPath(row.blob));
    let temp: string;
    try {
      temp = this.writeTemp(dirFd, content, row);
    } catch (error) {
      // A full disk: the run's entry goes first (its blocks freed), then one more try.
      if (!current || !["ENOSPC", "EDQUOT"].includes(errorCode(error))) throw error;
      removeAt(dirFd, name);
      temp = this.writeTemp(dirFd, content, row);
    }
    if (current?.isDirectory()) removeAt(dirFd, name);
    fs.renameSync(atPath(dirFd, temp), at);
  }

  /** The kept content in a new file beside its name, made exclusively; nothing of it is left if the write fails. */
  private writeTemp(dirFd: number, content: Buffer, row: KeptEntry): string {
    const temp = `.sandbox-run-restore-${crypto.randomBytes(6).toString("hex")}`;
    const fd = fs.openSync(atPath(dirFd, temp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      writeAll(fd, content);
      if (this.asRoot) fs.fchownSync(fd, row.uid, row.gid);
      fs.fchmodSync(fd, row.mode & 0o7777);
      fs.futimesSync(fd, row.atimeMs / 1000, row.mtimeMs / 1000);
    } catch (error) {
      fs.closeSync(fd);
      fs.rmSync(atPath(dirFd, temp), { force: true });
      throw error;
    }
    fs.closeSync(fd);
    return temp;
  }

  /** Gives a hard-linked file a new inode of its own with the same content (renamed over its name). */
  private unlinkByCopy(dirFd: number, name: string, current: fs.Stats, row: KeptEntry): void {
    const temp = `.sandbox-run-restore-${crypto.randomBytes(6).toString("hex")}`;
    // lstat said a regular file, and nothing moves the tree now; the copy is created exclusively.
    try {
      fs.copyFileSync(atPath(dirFd, name), atPath(dirFd, temp), fs.constants.COPYFILE_EXCL);
      if (this.asRoot) fs.lchownSync(atPath(dirFd, temp), row.uid, row.gid);
      fs.chmodSync(atPath(dirFd, temp), current.mode & 0o777 & ~0o022);
    } catch (error) {
      fs.rmSync(atPath(dirFd, temp), { force: true });
      throw error;
    }
    fs.renameSync(atPath(dirFd, temp), atPath(dirFd, name));
  }
}

/**
 * Moves a regular file out of the tree to `dest` (a new name in a private folder of the run):
 * renamed, or across filesystems copied (source opened without following a link, `dest` made
 * exclusively, never through a link, synced) and then unlinked. Nothing is left at `dest` if it fails.
 */
function moveFileOut(parentFd: number, name: string, dest: string): void {
  const at = atPath(parentFd, name);
  try {
    withOwnerWrite(parentFd, () => fs.renameSync(at, dest));
    return;
  } catch (error) {
    if (errorCode(error) !== "EXDEV") throw error;
  }
  const src = fs.openSync(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const stat = fs.fstatSync(src);
    if (!stat.isFile()) throw new Error("not a regular file");
    const out = fs.openSync(dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      const buffer = Buffer.allocUnsafe(1024 * 1024);
      for (let n = fs.readSync(src, buffer); n > 0; n = fs.readSync(src, buffer)) writeAll(out, buffer.subarray(0, n));
      fs.fsyncSync(out);
      fs.fchmodSync(out, stat.mode & 0o444);
      fs.closeSync(out);
    } catch (error) {
      fs.closeSync(out);
      fs.rmSync(dest, { force: true });
      throw error;
    }
  } finally {
    fs.closeSync(src);
  }
  withOwnerWrite(parentFd, () => fs.unlinkSync(at));
}

/** removeAt, with owner write lent in a folder the run made read-only. */
function removeIn(dirFd: number, name: string | Buffer): boolean {
  return withOwnerWrite(dirFd, () => removeAt(dirFd, name));
}

/** A rename from one folder to another (each may be one the run made read-only). */
function moveBetween(fromFd: number, fromName: string, toFd: number, toName: string): void {
  withOwnerWrite(fromFd, () =>
    withOwnerWrite(toFd, () => fs.renameSync(atPath(fromFd, fromName), atPath(toFd, toName))),
  );
}

function kindName(stat: fs.Stats): string {
  return stat.isFIFO() ? "fifo" : stat.isSocket() ? "socket" : "device";
}
