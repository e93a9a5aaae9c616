// The undo journal of copy mode's apply (apply-tree.ts): every change the apply makes goes through
// it, so that a failure half way can be undone in reverse. What is deleted or replaced is only
// renamed aside (the same inode: content, mode, owner and times kept) and removed for good only
// once everything is in; the times of every directory touched are taken before its first change
// and set back by an undo (as precisely as Node sets times: about a microsecond).
// With a staging directory the journal is also written to a file there (apply-journal-file.ts)
// before each step, so that a controller killed half way is undone by the next reaper
// (dead-apply.ts) with this same code: `ApplyJournal.replayed` rebuilds the steps, `undo()` and
// `commit()` take them as the live apply would. An undo takes back only what the apply left as it
// left it: a new entry is removed only while it is the inode the apply made (a new file takes its
// place only once its inode is journaled, so an entry whose inode the journal does not name is
// never removed), an entry comes back only to a free place, a mode only from the mode set; anything
// else is reported, never forced.
// Every step, and every undo, reaches its entry through the folder fds of `dirs` (tree-dirs.ts, or
// dead-apply.ts's), never by a path the host could swap: a mode is set on an O_PATH fd whose kind
// and inode fstat confirmed, never by chmod(path), which follows a symlink put there since.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { O_PATH } from "../util/o-path.js";
import { drain } from "../util/stepwise.js";
import { atTextPath } from "../workspace/fd-walk.js";
import { removing } from "../workspace/remove-tree.js";
import { JournalWriter, type ReadJournal } from "./apply-journal-file.js";
import { type Identity, openEntry, pinned, sameInode, TreeDirError, type TreeDirs } from "./tree-dirs.js";
import { comparePaths, parentOf } from "./tree-entry.js";

/** Prefix of the hidden names entries wait under next to their place, when the aside folder cannot take them. */
const ASIDE_PREFIX = ".sandbox-run-aside-";
/** The file in a kept aside folder that says where each entry in it belongs. */
export const KEPT_MANIFEST = "manifest.json";

/** The folders of the tree, by fd (TreeDirs while the apply runs; dead-apply.ts's for a reaper). */
export type TreePlaces = Pick<TreeDirs, "root" | "dir" | "at" | "forget" | "made">;

/** The private staging directory: the path to use it by (pinned to its fd) and its name. */
export interface StagingPlace {
  dir: string;
  real: string;
}

/**
 * Tests only: called as each step is journaled ("logged", not taken yet), once it is taken
 * ("done"), at the commit point ("committed": journaled, nothing removed yet), and as an undo
 * takes each step back ("undone": `step` counts them; a throw there stops the undo as a kill would).
 */
export type StepHook = (step: number, phase: "logged" | "done" | "committed" | "undone") => void;

type Undo =
  /** Waits in the aside folder as `n`. `parent`: the inode of its folder when it went. */
  | { kind: "aside"; path: string; n: string; directory: boolean; parent?: Identity }
  /** Waits next to its place, as `name` in the same folder. */
  | { kind: "beside"; path: string; name: string; directory: boolean; parent?: Identity }
  /**
   * Put there by the apply (`made`: the inode, and a file's size and mtime, once known;
   * `temporary`: the name a new file may be written under first; `arrival`: the name it is made
   * under, and renamed from into its place once `made` is journaled. A file with no `arrival` is
   * a version 1 journal's: `made` was journaled only once it was in its place).
   */
  | {
      kind: "created";
      path: string;
      directory: boolean;
      parent?: Identity;
      made?: Identity & { size?: number; mtimeMs?: number };
      temporary?: string;
      arrival?: string;
    }
  | { kind: "mode"; path: string; mode: number; to?: number; directory: boolean; identity: Identity };

/** An entry an undo could not put back, and where it waits. */
export interface Unrestored {
  path: string;
  problem: string;
}

/** Every change the apply makes, so that a failure can undo them in reverse (see the top of this file). */
export class ApplyJournal {
  readonly #undo: Undo[] = [];
  /** Times (and inode) of every directory the apply changes an entry in, taken before the first change. */
  readonly #directoryTimes = new Map<string, { atime: number; mtime: number; identity?: Identity }>();
  /** The inode of each folder the apply writes in now (those it moved aside leave it). */
  readonly #folders = new Map<string, Identity>();
  #aside: string | undefined;
  /** Entries moved aside next to their place (see moveAside), as tree paths. */
  readonly #besideNames = new Set<string>();
  #count = 0;
  #steps = 0;
  #file: JournalWriter | undefined;
  /** The last undo's reports of entries that wait in the aside folder, to say where once keptAside() moved it. */
  readonly #waitingAside: Array<{ unrestored: Unrestored; cause: string; n: string }> = [];
  /** The commit point is in the journal (commitPoint()). */
  #committed = false;
  /** Read from a dead run's journal on disk (dead-apply.ts), not kept by this process. */
  readonly #replayed: boolean;
  /** The journal's length before its commit record: takeBackCommitPoint() cuts it back to this. */
  #beforeCommit: number | undefined;

  constructor(
    private readonly dirs: TreePlaces,
    private readonly staging: StagingPlace | undefined,
    private readonly onStep?: StepHook,
    replaying = false,
  ) {
    this.#replayed = replaying;
    if (staging && !replaying) {
      const root = fs.fstatSync(dirs.dir(""));
      this.#file = new JournalWriter(staging.dir, path.resolve(dirs.root), { dev: root.dev, ino: root.ino });
    }
  }

  /** The journal a dead controller left (dead-apply.ts), with `dirs` reaching its tree and `staging` its folder. */
  static replayed(dirs: TreePlaces, staging: StagingPlace, read: ReadJournal): ApplyJournal {
    const journal = new ApplyJournal(dirs, staging, undefined, true);
    journal.#aside = path.join(staging.dir, "aside");
    const steps = journal.#undo;
    const last = () => steps[steps.length - 1];
    for (const r of read.records) {
      const parent = (dev: number, ino: number) => ({ dev, ino });
      switch (r[0]) {
        case "t":
          if (!journal.#directoryTimes.has(r[1]))
            journal.#directoryTimes.set(r[1], { atime: r[2], mtime: r[3], identity: parent(r[4], r[5]) });
          break;
        case "a":
          steps.push({ kind: "aside", path: r[1], n: r[2], directory: r[3] === 1, parent: parent(r[4], r[5]) });
          break;
        case "b":
          steps.push({ kind: "beside", path: r[1], name: r[2], directory: r[3] === 1, parent: parent(r[4], r[5]) });
          break;
        case "d":
          steps.push({ kind: "created", path: r[1], directory: true, parent: parent(r[2], r[3]) });
          break;
        case "f":
          steps.push({ kind: "created", path: r[1], directory: false, temporary: r[2], parent: parent(r[3], r[4]) });
          break;
        case "p":
          steps.push({
            kind: "created",
            path: r[1],
            directory: false,
            temporary: r[2],
            arrival: r[3],
            parent: parent(r[4], r[5]),
          });
          break;
        case "D":
        case "F":
        case "P": {
          const step = last();
          if (
            step?.kind !== "created" ||
            step.path !== r[1] ||
            step.directory !== (r[0] === "D") ||
            (step.arrival !== undefined) !== (r[0] === "P") ||
            step.made
          )
            throw new Error(`the journal says ${r[1]} was made, but not that it was to be`);
          step.made = r[0] === "D" ? parent(r[2], r[3]) : { ...parent(r[2], r[3]), size: r[4], mtimeMs: r[5] };
          break;
        }
        case "m":
          steps.push({
            kind: "mode",
            path: r[1],
            directory: r[2] === 1,
            mode: r[3],
            to: r[4],
            identity: parent(r[5], r[6]),
          });
          break;
      }
    }
    return journal;
  }

  /**
   * Moves the entry `rel` aside; `identity`: the inode it must be (the walk's), else the step fails.
   * Returns where it waits now (valid while the apply runs).
   */
  moveAside(rel: string, directory: boolean, identity?: Identity): string {
    const parent = parentOf(rel);
    const name = path.posix.basename(rel);
    this.#noteTimes(parent);
    if (directory) this.#noteTimes(rel);
    const folder = this.#folder(parent);
    const aside = this.#asideDir();
    let moved: string | undefined;
    if (aside) {
      const n = String(++this.#count);
      const at = path.join(aside, n);
      this.#log(["a", rel, n, directory ? 1 : 0, folder.dev, folder.ino]);
      try {
        fs.renameSync(this.dirs.at(rel), at);
        this.#undo.push({ kind: "aside", path: rel, n, directory, parent: folder });
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
      this.#log(["b", rel, besideName, directory ? 1 : 0, folder.dev, folder.ino]);
      fs.renameSync(atTextPath(fd, name), atTextPath(fd, besideName));
      this.#besideNames.add(parent ? `${parent}/${besideName}` : besideName);
      this.#undo.push({ kind: "beside", path: rel, name: besideName, directory, parent: folder });
      moved = atTextPath(fd, besideName);
    }
    this.#done();
    // Its fds (and those below it) point where it went now; an undo opens them again.
    if (directory) {
      this.dirs.forget(rel);
      this.#forgetFolders(rel);
    }
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
    const folder = this.#folder(parentOf(rel));
    this.#log(["d", rel, folder.dev, folder.ino]);
    fs.mkdirSync(this.dirs.at(rel), { mode: 0o700 });
    const step: Undo = { kind: "created", path: rel, directory: true, parent: folder };
    this.#undo.push(step);
    this.dirs.made(rel);
    const made = fs.fstatSync(this.dirs.dir(rel));
    step.made = { dev: made.dev, ino: made.ino };
    this.#folders.set(rel, step.made);
    this.#file?.append(["D", rel, made.dev, made.ino]);
    this.#done();
  }

  /**
   * Puts a new file (or symlink) at `rel`, free by now. `make(file, temporary)` makes it at `file`,
   * which is not its place but a fresh hidden name next to it (`temporary`: another, to write it
   * under first); both are named through the fd of their folder, valid during the call. Its inode
   * is journaled there, and only then is it renamed into its place (a rename keeps the inode, size
   * and mtime): so whatever is at a place the journal names no inode for is not the apply's
   * (review, session 36: a controller killed between the two lines of the version 1 journal left a
   * step a reaper replayed by removing whatever was at the path, a file the user wrote there since).
   */
  put(rel: string, make: (file: string, temporary: string) => void): void {
    this.#noteTimes(parentOf(rel));
    const folder = this.#folder(parentOf(rel));
    const temporary = hiddenName();
    const arrival = hiddenName();
    const fd = this.dirs.dir(parentOf(rel));
    const at = atTextPath(fd, arrival);
    this.#log(["p", rel, temporary, arrival, folder.dev, folder.ino]);
    const step: Undo & { kind: "created" } = {
      kind: "created",
      path: rel,
      directory: false,
      parent: folder,
      temporary,
      arrival,
    };
    this.#undo.push(step);
    make(at, atTextPath(fd, temporary));
    const stat = fs.lstatSync(at);
    if (stat.isDirectory()) throw new TreeDirError(`${path.join(this.dirs.root, rel)} was made as a directory`);
    step.made = { dev: stat.dev, ino: stat.ino, size: stat.size, mtimeMs: stat.mtimeMs };
    this.#file?.append(["P", rel, stat.dev, stat.ino, stat.size, stat.mtimeMs]);
    fs.renameSync(at, atTextPath(fd, path.posix.basename(rel)));
    this.#done();
  }

  /**
   * Sets the permission bits of the file or directory `rel` (`identity`: the inode it must be):
   * on an O_PATH fd fstat judged, so a symlink put in its place is never followed.
   */
  chmod(rel: string, mode: number, directory: boolean, identity?: Identity): void {
    this.#withEntry(rel, directory, identity, (fd, stat) => {
      const was = stat.mode & 0o7777;
      if (was === mode) return;
      this.#log(["m", rel, directory ? 1 : 0, was, mode, stat.dev, stat.ino]);
      fs.chmodSync(pinned(fd), mode);
      this.#undo.push({
        kind: "mode",
        path: rel,
        mode: was,
        to: mode,
        directory,
        identity: { dev: stat.dev, ino: stat.ino },
      });
      this.#done();
    });
  }

  /**
   * Everything went in: what waited aside goes for good (through fds: no symlink below is followed).
   * Never throws: the apply is final by now. Returns where what could not be removed waits.
   * The journal says so first (the commit point): a reaper then removes what is left, undoes nothing.
   */
  commit(): string[] {
    return drain(this.committing());
  }

  /**
   * The commit point: the journal says the apply is final, before anything that waited aside goes.
   * May throw (a full disk): the apply is then still whole to undo, and is undone.
   */
  commitPoint(): void {
    if (this.#committed) return;
    this.#beforeCommit = this.#file?.length;
    this.#file?.append(["c"]);
    this.#committed = true;
    this.onStep?.(++this.#steps, "committed");
  }

  /**
   * Takes the commit point back before an undo (another tree of the run failed after it): a
   * journal that still said final would have a reaper finish an undo this process was killed
   * during, deleting the originals still aside (review of session 38's fixes). Throws when the
   * journal cannot be cut: the apply must then be committed, not undone.
   */
  takeBackCommitPoint(): void {
    if (!this.#committed) return;
    if (this.#file && this.#beforeCommit !== undefined) this.#file.takeBack(this.#beforeCommit);
    this.#committed = false;
  }

  /** commit(), a step at a time (util/stepwise.ts). */
  *committing(): Generator<void, string[]> {
    this.commitPoint();
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
        const fd = this.dirs.dir(parentOf(step.path));
        if (step.parent && !sameInode(fs.fstatSync(fd), step.parent)) throw new TreeDirError("moved");
        yield* removing(fd, step.name);
      } catch {
        left.push(path.join(this.dirs.root, parentOf(step.path), step.name));
      }
      yield;
    }
    if (this.#aside) {
      try {
        // The staging directory: a path pinned to its fd ("/proc/<pid>/fd/<fd>", itself a link
        // that must be followed), so opening it cannot reach anywhere else.
        const parent = fs.openSync(path.dirname(this.#aside), O_PATH | fs.constants.O_DIRECTORY);
        try {
          yield* removing(parent, path.basename(this.#aside));
        } finally {
          fs.closeSync(parent);
        }
      } catch {
        left.push(this.#aside); // in the staging directory, removed with it when the run ends
      }
    }
    this.#undo.length = 0;
    this.close();
    return left;
  }

  /**
   * Undoes every change in reverse; returns the paths that could not be put back (and where they
   * wait). Those stay in the journal's list, for keptAside().
   */
  undo(): Unrestored[] {
    return drain(this.undoing());
  }

  /** undo(), a step at a time (util/stepwise.ts). */
  *undoing(): Generator<void, Unrestored[]> {
    if (this.#committed) throw new Error("an apply past its commit point cannot be undone");
    const unrestored: Unrestored[] = [];
    const left: Undo[] = [];
    this.#waitingAside.length = 0;
    let undone = 0;
    for (const step of [...this.#undo].reverse()) {
      try {
        this.#undoStep(step);
      } catch (error) {
        const cause = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
        const where =
          step.kind === "aside"
            ? `; it waits at ${this.#asideShown(step.n)}`
            : step.kind === "beside"
              ? `; it waits at ${path.join(this.dirs.root, parentOf(step.path), step.name)}`
              : "";
        const report = { path: step.path, problem: `${cause}${where}` };
        unrestored.push(report);
        if (step.kind === "aside") this.#waitingAside.push({ unrestored: report, cause, n: step.n });
        left.push(step);
      }
      this.onStep?.(++undone, "undone");
      yield;
    }
    this.#undo.length = 0;
    this.#undo.push(...left.reverse());
    // Deepest first, so that setting a child's times does not move its parent's again.
    for (const rel of [...this.#directoryTimes.keys()].sort((a, b) => comparePaths(b, a))) {
      const times = this.#directoryTimes.get(rel)!;
      try {
        const fd = this.dirs.dir(rel);
        if (times.identity && !sameInode(fs.fstatSync(fd), times.identity)) continue;
        fs.utimesSync(pinned(fd), times.atime, times.mtime);
      } catch {
        // gone or not ours to change: its entries are back, which is what matters
      }
      yield;
    }
    return unrestored;
  }

  /**
   * After an undo that could not put everything back: the aside folder, kept out of the staging
   * directory (which is removed when the run ends), so nothing of the caller's is lost, with a
   * manifest (KEPT_MANIFEST) saying where each entry in it, and each one left next to its place,
   * belongs. Then the journal says the undo is over.
   */
  keptAside(): string | undefined {
    const aside = this.#aside;
    let kept: string | undefined;
    if (aside && this.staging && lstatOrUndefined(aside) && fs.readdirSync(aside).length > 0) {
      const entries = this.#undo.filter((u) => u.kind === "aside").map((u) => ({ name: u.n, path: u.path }));
      const beside = this.#undo
        .filter((u) => u.kind === "beside")
        .map((u) => ({ at: path.join(this.dirs.root, parentOf(u.path), u.name), path: u.path }));
      try {
        // Written in the private folder, before it leaves it (its new place's parent may be another user's).
        const manifest = { tree: this.dirs.root, entries, beside };
        fs.writeFileSync(
          path.join(aside, KEPT_MANIFEST),
          `${JSON.stringify(manifest, null, 1)}
`,
          {
            mode: 0o600,
            flag: "wx",
          },
        );
      } catch {
        // the entries are kept all the same
      }
      kept = path.join(path.dirname(this.staging.real), `.sandbox-run-kept-${crypto.randomBytes(6).toString("hex")}`);
      try {
        fs.renameSync(aside, kept);
      } catch {
        kept = path.join(this.staging.real, "aside");
      }
      // The undo's reports named the aside folder: each entry waits in the kept one now.
      for (const { unrestored, cause, n } of this.#waitingAside)
        unrestored.problem = `${cause}; it waits at ${path.join(kept, n)}`;
    }
    this.#waitingAside.length = 0;
    try {
      this.#file?.append(["u"]);
    } catch {
      // The undo is done all the same; the staging directory, journal and all, goes when the run ends.
    }
    this.close();
    return kept;
  }

  /** Closes the journal's file (the apply is over, either way, or never began). */
  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }

  /** Takes one step back; throws when it cannot (see the top: nothing is forced). */
  #undoStep(step: Undo): void {
    if (step.kind === "mode") {
      // A journal on disk is never trusted with a file's set-uid and set-gid bits: the apply never
      // sets them (they do not travel), so only the undo of a forged line could, and as root a copy
      // of a shell made set-uid is root for anyone (review, round 3, session 41: a later sandbox
      // wrote a dead run's journal). A host file that had them loses them, and the report says so.
      const mode = this.#replayed && !step.directory ? step.mode & ~0o6000 : step.mode;
      let withoutSetId = false;
      this.#withEntry(step.path, step.directory, step.identity, (fd, stat) => {
        const now = stat.mode & 0o7777;
        if (now === step.mode) return; // never set (a controller killed first)
        if (step.to !== undefined && now !== step.to) throw new Error("its mode was changed since the apply");
        fs.chmodSync(pinned(fd), mode);
        withoutSetId = mode !== step.mode;
      });
      if (withoutSetId)
        throw new Error(
          `its mode was put back as ${mode.toString(8)}, without the set-uid or set-gid bit of ${step.mode.toString(8)} a dead run's journal asked for (never trusted from disk): set it again yourself if the file had it`,
        );
      return;
    }
    const fd = this.dirs.dir(parentOf(step.path));
    if (step.parent && !sameInode(fs.fstatSync(fd), step.parent))
      throw new TreeDirError(`${parentOf(step.path) || "(the root)"} is not the folder the apply changed`);
    const place = atTextPath(fd, path.posix.basename(step.path));
    if (step.kind === "created") {
      if (!step.directory && !this.#undoHidden(fd, step)) return; // it never took its place
      const stat = lstatOrUndefined(place);
      if (!stat) return; // never made (a controller killed first), or gone since
      const made = step.made;
      if (!step.directory && !made)
        // A version 1 journal's file, the controller killed before its inode was: whose it is
        // cannot be told, so it stays (and is reported).
        throw new Error(
          "the apply was killed while it put a file there, so what is there now cannot be told from one written since: left as it is",
        );
      if (
        made &&
        (!sameInode(stat, made) ||
          (made.size !== undefined && stat.size !== made.size) ||
          (made.mtimeMs !== undefined && stat.mtimeMs !== made.mtimeMs))
      )
        throw new Error("it was changed since the apply made it");
      if (step.directory) {
        if (!stat.isDirectory()) throw new Error("not the directory the apply made");
        this.dirs.forget(step.path);
        this.#forgetFolders(step.path);
        fs.rmdirSync(place);
      } else {
        if (stat.isDirectory()) throw new Error("not the file the apply made");
        fs.unlinkSync(place);
      }
      return;
    }
    if (step.kind === "aside" && !this.#aside) throw new Error("no aside folder");
    const from = step.kind === "aside" ? path.join(this.#aside!, step.n) : atTextPath(fd, step.name);
    if (!lstatOrUndefined(from)) return; // never went (a controller killed first), or back already
    if (lstatOrUndefined(place)) throw new Error("its place is taken");
    fs.renameSync(from, place);
    if (step.directory) this.dirs.forget(step.path);
  }

  /**
   * Removes what a new file left under its hidden names (`temporary`, `arrival`) next to its place.
   * Returns whether it may have taken its place: false when it had not (the journal names no inode
   * for it, or it still waits under `arrival`), so nothing at the place is the apply's.
   */
  #undoHidden(fd: number, step: Undo & { kind: "created" }): boolean {
    if (step.temporary) {
      const temporary = atTextPath(fd, step.temporary);
      const stat = lstatOrUndefined(temporary);
      if (stat && !stat.isDirectory()) fs.unlinkSync(temporary);
    }
    if (step.arrival === undefined) return true; // a version 1 journal's
    const arrival = atTextPath(fd, step.arrival);
    const stat = lstatOrUndefined(arrival);
    const made = step.made;
    if (stat && !stat.isDirectory() && (!made || sameInode(stat, made))) {
      fs.unlinkSync(arrival);
      return false;
    }
    return made !== undefined;
  }

  /** Where the entry `n` of the aside folder waits, by a path that means something after this process. */
  #asideShown(n: string): string {
    return path.join(this.staging ? path.join(this.staging.real, "aside") : (this.#aside ?? ""), n);
  }

  #asideDir(): string | undefined {
    if (!this.staging) return undefined;
    if (!this.#aside) {
      this.#aside = path.join(this.staging.dir, "aside");
      fs.mkdirSync(this.#aside, { mode: 0o700 });
    }
    return this.#aside;
  }

  /** Appends a step's record before it is taken (nothing without a staging directory). */
  #log(record: Parameters<JournalWriter["append"]>[0]): void {
    this.#file?.append(record);
    this.onStep?.(++this.#steps, "logged");
  }

  #done(): void {
    this.onStep?.(this.#steps, "done");
  }

  /** The inode of the folder `rel` the apply writes in (its fd's: the walk's, or made by it). */
  #folder(rel: string): Identity {
    let identity = this.#folders.get(rel);
    if (!identity) {
      const stat = fs.fstatSync(this.dirs.dir(rel));
      identity = { dev: stat.dev, ino: stat.ino };
      this.#folders.set(rel, identity);
    }
    return identity;
  }

  /** The folder `rel` left its place: it and those below it are no longer where the apply writes. */
  #forgetFolders(rel: string): void {
    if (this.#folders.size === 0) return;
    const prefix = `${rel}/`;
    for (const key of this.#folders.keys()) if (key === rel || key.startsWith(prefix)) this.#folders.delete(key);
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
    const times = {
      atime: stat.atimeMs / 1000,
      mtime: stat.mtimeMs / 1000,
      identity: { dev: stat.dev, ino: stat.ino },
    };
    this.#directoryTimes.set(rel, times);
    this.#file?.append(["t", rel, times.atime, times.mtime, stat.dev, stat.ino]);
  }
}

/** A fresh hidden name for a new file next to its place (TEMPORARY_NAME). */
function hiddenName(): string {
  return `.sandbox-run-${crypto.randomBytes(6).toString("hex")}`;
}

/**
 * The error of an apply that failed and was undone. `applied`: trees of the same run that stay
 * applied all the same (their commit point could not be taken back), and why.
 */
export function applyFailed(
  what: string,
  error: unknown,
  unrestored: Unrestored[],
  keptAside: string | undefined,
  applied?: { whats: string; why: string },
): SandboxRunError {
  const cause = (error as NodeJS.ErrnoException)?.message ?? String(error);
  if (applied) {
    const undone =
      unrestored.length === 0
        ? "were undone"
        : `were undone but for ${unrestored.length} path(s): ${unrestored
            .slice(0, 10)
            .map((u) => `${u.path} (${u.problem})`)
            .join(", ")}`;
    return new SandboxRunError(
      "not-applied",
      `The run's changes to ${what} could not be applied (${cause}) and ${undone}; its changes to ${applied.whats} are applied all the same (their commit point could not be taken back: ${applied.why}).`,
      {
        hint: `Check ${applied.whats} before running again: it holds the run's changes${keptAside ? `; the originals of what was not put back are in ${keptAside} (its ${KEPT_MANIFEST} says where each belongs)` : ""}.`,
        cause: error,
      },
    );
  }
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
      hint: `Put those paths back by hand${keptAside ? `: the originals are in ${keptAside} (its ${KEPT_MANIFEST} says where each belongs)` : ""}; everything else is as it was.`,
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
