// After a run with violations: puts each violated scope back as the kept copy says, removes
// what the run created there, and sets directory modes back. Everything goes through
// directory fds (fd-walk.ts): the container is stopped, but the tree is what it left, so no
// symlink is followed and no path is resolved twice.
import crypto from "node:crypto";
import fs from "node:fs";
import { atPath, errorCode, openDirAt, openRoot, walkTree } from "./fd-walk.js";
import { lstatBelow, lstatOrUndefined, removeAt } from "./remove-tree.js";
import type { KeptEntry, ProtectedCopy } from "./protected-copy.js";
import type { RestoreStep } from "./workspace-rules.js";
import { hashFileAt } from "./workspace-snapshot.js";

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

export interface RestoreReport {
  /** Scopes put back as they were before the run. */
  reverted: string[];
  /** Scopes the run created, removed. */
  removed: string[];
  /** Directory modes set back. */
  modes: string[];
  /** What could not be put back, with why. */
  notRestored: Array<{ path: string; why: string }>;
}

/** Applies the steps (parents first, see RestorePlan.ordered) to the tree at `root`. */
export function applyRestore(root: string, steps: readonly RestoreStep[], copy: ProtectedCopy): RestoreReport {
  const report: RestoreReport = { reverted: [], removed: [], modes: [], notRestored: [] };
  const kept = copy.load(steps.filter((s) => s.action === "revert").map((s) => s.path));
  const restorer = new Restorer(kept, copy, report);
  const rootFd = openRoot(root);
  try {
    restorer.rootFd = rootFd;
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
  /** Kept object-store path -> the name (in the root) it was moved aside to, to go back into place. */
  private readonly rescued = new Map<string, string>();
  rootFd?: number;

  constructor(
    private readonly kept: Map<string, KeptEntry>,
    private readonly copy: ProtectedCopy,
    private readonly report: RestoreReport,
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
      if (!row.objectStore) continue;
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
            fs.renameSync(atPath(fromFd, fromParts[fromParts.length - 1]!), atPath(rootFd, aside));
            this.rescued.set(row.path, aside);
          } finally {
            fs.closeSync(fromFd);
          }
        }
      } finally {
        fs.closeSync(parentFd);
      }
    }
  }

  /** Object stores moved aside whose git directory was not restored: removed with the rest. */
  dropUnusedRescues(rootFd: number): void {
    for (const aside of this.rescued.values()) removeAt(rootFd, aside);
    this.rescued.clear();
  }

  apply(rootFd: number, step: RestoreStep): void {
    const parts = step.path === "" ? [] : step.path.split("/");
    if (step.action === "mode") {
      // Through the parent: a directory made unreadable (0311) cannot be opened to fchmod it.
      const parentFd = parts.length === 0 ? undefined : this.openPath(rootFd, parts.slice(0, -1), false);
      if (parts.length > 0 && parentFd === undefined) return; // gone: nothing left to be unsafe
      try {
        const at = parentFd === undefined ? `/proc/self/fd/${rootFd}` : atPath(parentFd, parts[parts.length - 1]!);
        if (!lstatOrUndefined(at)?.isDirectory()) return;
        fs.chmodSync(at, step.mode); // lstat: a directory, and nothing moves the tree now
      } finally {
        if (parentFd !== undefined) fs.closeSync(parentFd);
      }
      this.report.modes.push(step.path || ".");
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
        if (removeAt(parentFd, name)) this.report.removed.push(step.path);
      } else {
        this.restoreEntry(parentFd, name, step.path);
        this.report.reverted.push(step.path);
      }
    } finally {
      fs.closeSync(parentFd);
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
        const code = errorCode(error);
        if (!create || !["ENOENT", "ENOTDIR", "ELOOP"].includes(code)) {
          fs.closeSync(fd);
          if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP") return undefined;
          throw error;
        }
        const at = atPath(fd, name);
        if (code !== "ENOENT") {
          removeAt(fd, name);
          this.report.notRestored.push({
            path: parts.slice(0, i + 1).join("/"),
            why: "was no longer a directory; replaced by an empty one",
          });
        }
        fs.mkdirSync(at, { mode: 0o755 });
        next = openDirAt(fd, name);
        if (this.asRoot) {
          const parent = fs.fstatSync(fd);
          fs.fchownSync(next, parent.uid, parent.gid);
        }
      }
      fs.closeSync(fd);
      fd = next;
    }
    return fd;
  }

  private restoreEntry(dirFd: number, name: string, path: string): void {
    const row = this.kept.get(path);
    const at = atPath(dirFd, name);
    const current = lstatOrUndefined(at);
    if (!row) {
      if (current) removeAt(dirFd, name);
      return;
    }
    if (row.kind === "directory") this.restoreDirectory(dirFd, name, path, row, current);
    else if (row.kind === "file") this.restoreFile(dirFd, name, path, row, current);
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

  private restoreDirectory(dirFd: number, name: string, path: string, row: KeptEntry, current?: fs.Stats): void {
    const at = atPath(dirFd, name);
    const aside = this.rescued.get(path);
    if (aside) {
      if (current) removeAt(dirFd, name);
      fs.renameSync(atPath(this.rootFd!, aside), at);
      this.rescued.delete(path);
      current = fs.lstatSync(at);
    }
    const isDirectory = current?.isDirectory() === true;
    if (current && !isDirectory) removeAt(dirFd, name);
    if (!isDirectory) fs.mkdirSync(at, { mode: 0o700 });
    else if ((current!.mode & 0o700) !== 0o700) fs.chmodSync(at, 0o700); // it may have been made unreadable
    const fd = openDirAt(dirFd, name);
    try {
      this.restoreChildren(fd, path, row.objectStore === true);
      if (this.asRoot) fs.fchownSync(fd, row.uid, row.gid);
      fs.fchmodSync(fd, row.mode & 0o7777);
    } finally {
      fs.closeSync(fd);
    }
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
      else removeAt(fd, raw); // a name that is not UTF-8 was never kept
    }
    for (const n of [...names].sort()) this.restoreEntry(fd, n, prefix + n);
  }

  private restoreFile(dirFd: number, name: string, path: string, row: KeptEntry, current?: fs.Stats): void {
    const at = atPath(dirFd, name);
    if (current?.isFile() && row.hash !== undefined && hashFileAt(at, current, row.size) === row.hash) {
      if (this.asRoot) fs.lchownSync(at, row.uid, row.gid);
      fs.chmodSync(at, row.mode & 0o7777); // lstat: a regular file; nothing moves it now
      return;
    }
    if (row.blob === undefined) {
      const unchanged =
        current?.isFile() &&
        current.size === row.size &&
        current.mtimeMs === row.mtimeMs &&
        current.ctimeMs === row.ctimeMs &&
        current.ino === row.ino;
      if (unchanged) return;
      if (row.gitAllowed) {
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
    const temp = `.sandbox-run-restore-${crypto.randomBytes(6).toString("hex")}`;
    const fd = fs.openSync(atPath(dirFd, temp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      fs.writeSync(fd, content);
      if (this.asRoot) fs.fchownSync(fd, row.uid, row.gid);
      fs.fchmodSync(fd, row.mode & 0o7777);
      fs.futimesSync(fd, row.atimeMs / 1000, row.mtimeMs / 1000);
    } finally {
      fs.closeSync(fd);
    }
    if (current?.isDirectory()) removeAt(dirFd, name);
    fs.renameSync(atPath(dirFd, temp), at);
  }
}

function kindName(stat: fs.Stats): string {
  return stat.isFIFO() ? "fifo" : stat.isSocket() ? "socket" : "device";
}
