// The undo journal of copy mode's apply (apply-tree.ts): every change the apply makes goes through
// it, so that a failure half way can be undone in reverse. What is deleted or replaced is only
// renamed aside (the same inode: content, mode, owner and times kept) and removed for good only
// once everything is in; the times of every directory touched are taken before its first change
// and set back by an undo (as precisely as Node sets times: about a microsecond).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { comparePaths, parentOf } from "./tree-entry.js";

/** Prefix of the hidden names entries wait under next to their place, when the aside folder cannot take them. */
const ASIDE_PREFIX = ".sandbox-run-aside-";

type Undo =
  | { kind: "aside"; path: string; at: string }
  | { kind: "created"; path: string; directory: boolean }
  | { kind: "mode"; path: string; mode: number };

/** Every change the apply makes, so that a failure can undo them in reverse (see the top of this file). */
export class ApplyJournal {
  readonly #undo: Undo[] = [];
  /** Times of every directory the apply changes an entry in, taken before the first change. */
  readonly #directoryTimes = new Map<string, { atime: number; mtime: number }>();
  #aside: string | undefined;
  /** Entries moved aside next to their place (see moveAside). */
  readonly #besideNames = new Set<string>();
  #count = 0;

  constructor(
    private readonly root: string,
    private readonly asideParent: string | undefined,
  ) {}

  moveAside(rel: string, directory: boolean): void {
    const file = path.join(this.root, rel);
    this.#noteTimes(parentOf(rel), rel === "");
    if (directory) this.#noteTimes(rel);
    const aside = this.#asideDir();
    if (aside) {
      const at = path.join(aside, String(++this.#count));
      try {
        fs.renameSync(file, at);
        this.#undo.push({ kind: "aside", path: rel, at });
        return;
      } catch (error) {
        // Across a mount inside the tree; a directory that cannot take a new `..` (not writable):
        // it waits next to where it was instead.
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "EXDEV" && code !== "EACCES") throw error;
      }
    }
    // Undo is in reverse order, so a directory moved aside later with this inside it is back in
    // its place before this comes back from `at`.
    const at = path.join(path.dirname(file), `${ASIDE_PREFIX}${crypto.randomBytes(8).toString("hex")}`);
    if (lstatOrUndefined(at)) throw new Error(`${at} exists`);
    fs.renameSync(file, at);
    this.#besideNames.add(at);
    this.#undo.push({ kind: "aside", path: rel, at });
  }

  /**
   * Whether a directory holds anything but what this apply moved aside next to its place (that
   * goes with the directory when it is moved aside, and comes back with it).
   */
  holdsEntries(rel: string): boolean {
    const dir = path.join(this.root, rel);
    return fs.readdirSync(dir).some((name) => !this.#besideNames.has(path.join(dir, name)));
  }

  mkdir(rel: string): void {
    this.#noteTimes(parentOf(rel));
    fs.mkdirSync(path.join(this.root, rel), { mode: 0o700 });
    this.#undo.push({ kind: "created", path: rel, directory: true });
  }

  /** `make(file, temporary)` puts the new entry at `file`, free by now (`temporary`: a fresh name next to it). */
  put(rel: string, make: (file: string, temporary: string) => void): void {
    const file = path.join(this.root, rel);
    this.#noteTimes(parentOf(rel));
    make(file, path.join(path.dirname(file), `.sandbox-run-${crypto.randomBytes(6).toString("hex")}`));
    this.#undo.push({ kind: "created", path: rel, directory: false });
  }

  chmod(rel: string, mode: number): void {
    const file = path.join(this.root, rel);
    const was = fs.lstatSync(file).mode & 0o7777;
    if (was === mode) return;
    fs.chmodSync(file, mode);
    this.#undo.push({ kind: "mode", path: rel, mode: was });
  }

  /** Everything went in: what waited aside goes for good. */
  commit(): void {
    for (const step of this.#undo) {
      if (step.kind === "aside" && !step.at.startsWith(`${this.#aside}/`))
        fs.rmSync(step.at, { recursive: true, force: true });
    }
    if (this.#aside) fs.rmSync(this.#aside, { recursive: true, force: true });
  }

  /** Undoes every change in reverse; returns the paths that could not be put back (and where they wait). */
  undo(): Array<{ path: string; problem: string }> {
    const unrestored: Array<{ path: string; problem: string }> = [];
    for (const step of this.#undo.reverse()) {
      const file = path.join(this.root, step.path);
      try {
        if (step.kind === "created") {
          if (step.directory) fs.rmdirSync(file);
          else fs.unlinkSync(file);
        } else if (step.kind === "mode") fs.chmodSync(file, step.mode);
        else fs.renameSync(step.at, file);
      } catch (error) {
        const where = step.kind === "aside" ? `; it waits at ${step.at}` : "";
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
        fs.utimesSync(path.join(this.root, rel), times.atime, times.mtime);
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
      path.dirname(path.dirname(this.#aside)),
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

  #noteTimes(rel: string, skip = false): void {
    if (skip || this.#directoryTimes.has(rel)) return;
    const stat = lstatOrUndefined(path.join(this.root, rel));
    // In seconds, as precise as Node can set them (a double: to a fraction of a microsecond).
    if (stat?.isDirectory()) this.#directoryTimes.set(rel, { atime: stat.atimeMs / 1000, mtime: stat.mtimeMs / 1000 });
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
      "usage",
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
    "usage",
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
