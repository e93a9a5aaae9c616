// Where a run record goes, and putting it there. A record is staged in the run's private folder
// while the run lasts and moved into place only once the run is over and the workspace has been
// judged and handed back, so nothing of the sandbox can race the writes. The target may lie
// outside every tree the sandbox held (an ordinary host folder: the caller's own symlinks are
// followed), or inside one (`--record test/records/review` in the workspace): then the path below
// that tree is never resolved, but opened one folder at a time without following links, and the
// record is written only when the sandbox left that path alone (plain folders the caller owns, a
// target folder it did not create, change or fill). Otherwise the record is refused and kept where
// the caller is told. Every file lands by rename or by an exclusive, no-follow create.
import fs from "node:fs";
import path from "node:path";
import { type DirIdentity, HostDir, HostDirError, type LocatedPath, locatePath } from "../util/host-dir.js";

/** A record folder sandbox-run makes: readable by its owner only. */
const RECORD_DIR_MODE = 0o700;

/** What the path to a target inside a held tree looked like before the run. */
interface HeldBefore {
  tree: string;
  parts: string[];
  /** The identity of each part that existed, in order (the rest did not exist). */
  existing: DirIdentity[];
}

export class RecordTargetError extends Error {}

export class RecordTarget {
  private constructor(
    /** The target as the caller named it (absolute), for messages. */
    readonly dir: string,
    private readonly located: LocatedPath,
    private readonly before: HeldBefore | undefined,
    private readonly held: readonly string[],
  ) {}

  /**
   * Checks the target before the run; creates nothing. `held`: the canonical trees the sandbox
   * will hold (workspace, writable roots, read-only mounts). Throws RecordTargetError when the
   * target cannot be used (a file, a folder that is not empty, a link inside a held tree).
   */
  static prepare(dir: string, held: readonly string[]): RecordTarget {
    const absolute = path.resolve(dir);
    let located: LocatedPath;
    try {
      located = locatePath(absolute, held);
    } catch (error) {
      throw new RecordTargetError(`${absolute}: ${(error as Error).message}`);
    }
    if (located.kind === "host") {
      if (located.missing.length === 0) checkEmptyFolder(() => HostDir.open(located.existing), absolute);
      else checkParent(located.existing);
      return new RecordTarget(absolute, located, undefined, held);
    }
    const before = heldPathBefore(located.tree, located.parts, absolute);
    return new RecordTarget(absolute, located, before, held);
  }

  /**
   * The folder the record goes into, as the host resolves it (the caller's links followed up to a
   * held tree): the run holds it too, so no other run's sandbox can shape it until it is published.
   */
  get folder(): string {
    const located = this.located;
    return located.kind === "host"
      ? path.join(located.existing, ...located.missing)
      : path.join(located.tree, ...located.parts);
  }

  /** Whether the target lies inside a tree the sandbox holds (and is written only if left alone). */
  get insideSandboxTree(): string | undefined {
    return this.located.kind === "held" ? this.located.tree : undefined;
  }

  /**
   * Moves the complete record from `stagingParent`/`name` into place, after the run. Throws
   * RecordTargetError (saying why) when the target may not be written; the staged record is then
   * untouched.
   */
  publish(stagingParent: HostDir, name: string): void {
    const located = this.located;
    const { parent, leaf, existingTarget } =
      located.kind === "host" ? this.openHostParent(located) : this.openHeldParent(located);
    try {
      if (existingTarget) {
        moveFiles(stagingParent, name, existingTarget);
        return;
      }
      if (parent.lstat(leaf)) {
        const who = located.kind === "held" ? "the sandbox made it" : "something else made it meanwhile";
        throw new RecordTargetError(`${this.dir} did not exist before the run and does now: ${who}`);
      }
      try {
        // One rename puts the whole folder in place (same filesystem). It stays the caller's alone:
        // a record holds what the tools printed, the workspace's secrets among them, and other
        // local users read it when it was 0755 (review, session 22).
        const staged = stagingParent.subdir(name);
        fs.fchmodSync(staged.fd, RECORD_DIR_MODE);
        staged.close();
        fs.renameSync(stagingParent.at(name), parent.at(leaf));
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
      }
      const target = parent.mkdir(leaf, RECORD_DIR_MODE);
      try {
        moveFiles(stagingParent, name, target);
      } catch (error) {
        // Emptied again by moveFiles: the folder made for it goes too, as if never begun.
        try {
          fs.rmdirSync(parent.at(leaf));
        } catch {
          // not empty after all (something else wrote there): it stays, and so does the error
        }
        throw error;
      } finally {
        target.close();
      }
    } finally {
      existingTarget?.close(); // may be `parent` itself: close() is idempotent
      parent.close();
    }
  }

  private openHostParent(located: Extract<LocatedPath, { kind: "host" }>) {
    const missing = located.missing;
    try {
      if (missing.length === 0) {
        const target = HostDir.open(located.existing, { outside: this.held });
        if (target.list().length > 0) throw new RecordTargetError(`${this.dir} is no longer empty`);
        return { parent: target, leaf: "", existingTarget: target };
      }
      const parent = HostDir.open(path.join(located.existing, ...missing.slice(0, -1)), {
        create: true,
        outside: this.held,
      });
      return { parent, leaf: missing.at(-1)!, existingTarget: undefined };
    } catch (error) {
      if (error instanceof RecordTargetError) throw error;
      throw new RecordTargetError((error as Error).message);
    }
  }

  private openHeldParent(located: Extract<LocatedPath, { kind: "held" }>) {
    const before = this.before!;
    const parts = located.parts;
    let root: HostDir | undefined;
    try {
      root = HostDir.open(located.tree);
      if (parts.length === 0) throw new RecordTargetError(`${this.dir} is a tree the sandbox held itself`);
      const parentParts = parts.slice(0, -1);
      const leaf = parts.at(-1)!;
      // Folders the sandbox made on the way are acceptable when plain and the caller's (after the
      // hand-back they are): a new name is then made inside them, exclusively.
      const parent = HostDir.openBelow(root, parentParts, { create: true });
      const targetExisted = before.existing.length === parts.length;
      if (!targetExisted) return { parent, leaf, existingTarget: undefined };
      try {
        const target = HostDir.openBelow(parent, [leaf]);
        const was = before.existing.at(-1)!;
        const now = target.identity();
        if (now.dev !== was.dev || now.ino !== was.ino) {
          target.close();
          throw new RecordTargetError(`${this.dir} was replaced during the run`);
        }
        if (target.list().length > 0) {
          target.close();
          throw new RecordTargetError(`${this.dir} is no longer empty: the sandbox put something there`);
        }
        return { parent, leaf, existingTarget: target };
      } catch (error) {
        parent.close();
        throw error;
      }
    } catch (error) {
      if (error instanceof RecordTargetError) throw error;
      throw new RecordTargetError((error as Error).message);
    } finally {
      root?.close();
    }
  }
}

/**
 * Every file of the staged folder `name` into `target` (empty, opened by fd), then the staged
 * folder removed: all or nothing. Across filesystems every file is copied before any staged one
 * goes, so a target that runs out of room is emptied again and the staging stays whole, a record
 * that replays (review, session 32: it was split between the two, and neither half replayed).
 */
function moveFiles(stagingParent: HostDir, name: string, target: HostDir): void {
  const staged = stagingParent.subdir(name);
  try {
    const files = staged.list();
    const moved: string[] = [];
    try {
      for (const file of files) {
        staged.moveTo(file, target);
        moved.push(file);
      }
    } catch (error) {
      for (const file of moved) target.moveTo(file, staged);
      if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
      const copied: string[] = [];
      try {
        for (const file of files) {
          staged.copyFileTo(file, target);
          copied.push(file);
        }
      } catch (failure) {
        for (const file of copied) fs.rmSync(target.at(file), { force: true });
        throw failure;
      }
      for (const file of files) fs.unlinkSync(staged.at(file));
    }
  } finally {
    staged.close();
  }
  fs.rmdirSync(stagingParent.at(name));
}

function checkEmptyFolder(open: () => HostDir, shown: string): void {
  let dir: HostDir;
  try {
    dir = open();
  } catch (error) {
    throw new RecordTargetError((error as Error).message);
  }
  try {
    if (dir.list().length > 0) throw new RecordTargetError(`the record folder ${shown} is not empty`);
  } finally {
    dir.close();
  }
}

function checkParent(existing: string): void {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(existing);
  } catch (error) {
    throw new RecordTargetError(`${existing}: ${(error as Error).message}`);
  }
  if (!stat.isDirectory()) throw new RecordTargetError(`${existing} is not a folder`);
  HostDir.open(existing).close();
}

/** The path below a held tree as it is before the run: every existing part a plain folder. */
function heldPathBefore(tree: string, parts: string[], shown: string): HeldBefore {
  if (parts.length === 0) throw new RecordTargetError(`${shown} is a tree the sandbox holds itself`);
  const existing: DirIdentity[] = [];
  let dir: HostDir;
  try {
    dir = HostDir.open(tree);
  } catch (error) {
    throw new RecordTargetError((error as Error).message);
  }
  try {
    for (const part of parts) {
      const stat = dir.lstat(part);
      if (!stat) break;
      if (!stat.isDirectory()) {
        throw new RecordTargetError(
          `${path.join(dir.path, part)} is ${stat.isSymbolicLink() ? "a symbolic link" : "not a folder"} inside ${tree}, which the sandbox holds`,
        );
      }
      let next: HostDir;
      try {
        next = HostDir.openBelow(dir, [part]);
      } catch (error) {
        if (error instanceof HostDirError) throw new RecordTargetError(error.message);
        throw error;
      }
      dir.close();
      dir = next;
      existing.push(dir.identity());
    }
    if (existing.length === parts.length && dir.list().length > 0) {
      throw new RecordTargetError(`the record folder ${shown} is not empty`);
    }
  } finally {
    dir.close();
  }
  return { tree, parts, existing };
}
