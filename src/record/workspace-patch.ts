// Workspace changes as a patch, for run records: a copy of the workspace is taken before the
// run (only when a record is asked for) and diffed against a copy taken afterwards with
// `git diff --no-index` (binary-safe), or `diff -ruN` where git is missing. The top-level
// .git folder is left out: its contents are not source changes. So is every node_modules folder,
// unwalked, with one note: installed packages spent the whole total before package.json and src/
// (which sort after them) were reached. The total goes to the top folder's own files first; once it
// is reached the copy stops, and what it left out is named in one note (a folder as one path), so
// that the other side leaves it out as well cheaply. What a patch misses of the run's changed files
// is said first in its notes (changedNotInPatch).
//
// The workspace is hostile (the sandbox wrote it): both copies go through the fd walk (no
// symlink followed, any depth), with a cap per file and in total judged by apparent size, so
// a sparse 2 GB file is skipped without being read; FIFOs, sockets and devices are skipped;
// paths too long for git are skipped. Every skip becomes a note. Nothing here throws: a record
// must not lose the run's outcome because its patch could not be made.
//
// The copies and the diff never hold the event loop: the controller (a batch, an agent running
// calls side by side) streams other runs' model replies and events meanwhile. The copy yields
// every COPY_YIELD_EVERY entries, git runs as a child process that is waited for, not blocked on,
// and so does the `rm -rf` that removes folders from the copies and the copies themselves.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { type CappedProcessResult, OutputCapError, runCappedProcess } from "../util/capped-process.js";
import { HostDir, HostDirError } from "../util/host-dir.js";
import { hostSearchPath } from "../util/host-programs.js";
import { comparePaths, type WalkEntry, walkTree, yieldToEventLoop } from "../workspace/fd-walk.js";
import { readFileAt } from "../workspace/workspace-snapshot.js";

export const PATCH_FILE_MAX_BYTES = 4 * 1024 * 1024;
export const PATCH_TOTAL_MAX_BYTES = 64 * 1024 * 1024;
/** Longer relative paths are skipped: git works with whole paths, and PATH_MAX is 4096. */
export const PATCH_PATH_MAX_BYTES = 3000;
const PATCH_OUTPUT_MAX_BYTES = 256 * 1024 * 1024;
const MAX_NOTES = 100;
/** Entries copied between two turns of the event loop: each is a file written, ~0.1-1 ms on a slow disk. */
export const COPY_YIELD_EVERY = 64;

/**
 * Why a path cannot go into a patch as it is, if it cannot: `git apply` refuses a whole patch where
 * a line break in a name makes it read as a `.git` path (so none of the run's other changes would
 * apply), control characters make the patch read differently than it applies, and GNU `patch` drops a name's trailing spaces and tabs, writing another file than
 * the one judged (`.pre-commit-config.yaml ` would become the protected `.pre-commit-config.yaml`).
 */
export function patchNameProblem(name: string): string | undefined {
  if (CONTROL.test(name)) return "a name with a line break or control character (git apply may refuse the whole patch)";
  if (/[ \t]$/.test(name)) return "a name ending in a space or tab (patch -p1 would write it without them)";
  return undefined;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/; // a tab inside a name applies as it is

/** A path for a note: JSON-quoted when it holds the line break that left it out. */
export function notedPath(rel: string): string {
  return CONTROL.test(rel) ? JSON.stringify(rel) : rel;
}

export interface WorkspacePatch {
  /** The unified diff ("" when nothing changed or it could not be made). */
  patch: string;
  /** What was left out of it, and why. */
  notes: string[];
  /**
   * Paths the patch holds nothing of, files or whole folders ("" for all: no patch), each with why
   * in a few words: what tells which of the run's changed files it misses (changedNotInPatch).
   */
  leftOut?: ReadonlyMap<string, string>;
}

class Notes {
  readonly lines: string[] = [];
  private count = 0;
  add(line: string): void {
    if (this.lines.length < MAX_NOTES) this.lines.push(line);
    this.count++;
  }
  done(): string[] {
    const extra = this.count - this.lines.length;
    return extra > 0 ? [...this.lines, `... and ${extra} more`] : this.lines;
  }
}

/**
 * Folders left out of both copies wherever they are, not walked, and why: what a run changes is
 * not in them, and one of them spent the whole total before anything else was copied (installed
 * packages sort before package.json and src/). One note says so for all of them.
 */
const BULK_FOLDERS: ReadonlyMap<string, string> = new Map([["node_modules", "installed packages"]]);

/** Copy limits; tests make them smaller. */
interface CopyLimits {
  /** Content copied into each side in all (default PATCH_TOTAL_MAX_BYTES). */
  totalBytes?: number;
}

export class WorkspaceBaseline {
  private readonly notes = new Notes();
  /** Paths either copy left out, with why (see WorkspacePatch.leftOut): left out of the other as well. */
  private readonly leftOut = new Map<string, string>();
  /** The BULK_FOLDERS either copy found (and left out). */
  private readonly bulk = new Set<string>();

  private constructor(
    private readonly workspace: string,
    private scratch: string | undefined,
    private readonly totalBytes: number,
  ) {}

  /**
   * Copies the workspace as it is now, into a new folder inside `scratchParent` (a private folder;
   * default: the temp dir). Never throws.
   */
  static async take(
    workspace: string,
    scratchParent = os.tmpdir(),
    limits: CopyLimits = {},
  ): Promise<WorkspaceBaseline> {
    const totalBytes = limits.totalBytes ?? PATCH_TOTAL_MAX_BYTES;
    let scratch: string | undefined;
    try {
      scratch = fs.mkdtempSync(path.join(scratchParent, "baseline-"));
    } catch (error) {
      const baseline = new WorkspaceBaseline(workspace, undefined, totalBytes);
      baseline.noPatch(`cannot make a scratch folder (${(error as Error).message})`);
      return baseline;
    }
    const baseline = new WorkspaceBaseline(workspace, scratch, totalBytes);
    await baseline.copy("a", "before");
    return baseline;
  }

  /**
   * The diff from the baseline to the workspace now, and what was left out. Never throws. `scrub`
   * takes credential values out of each copied file's bytes before the diff: git writes a binary
   * file compressed and encoded, where no scrub of the patch's text can find them (second fix
   * review, round 3, session 41: a policy secret in a binary copy of `.env` came back whole from
   * `git apply` of the record's patch).
   */
  async patch(scrub?: (bytes: Buffer) => Buffer): Promise<WorkspacePatch> {
    if (!this.scratch) return this.result("");
    if (!(await this.copy("b", "after"))) this.noPatch("the workspace could not be copied after the run");
    else if (!fs.existsSync(path.join(this.scratch, "a"))) this.noPatch("there is no copy from before the run");
    else {
      try {
        await this.dropLeftOutFromBothSides();
      } catch (error) {
        this.noPatch(`what one copy left out could not be left out of the other (${(error as Error).message})`);
        return this.result("");
      }
      try {
        if (scrub) for (const side of ["a", "b"]) await scrubFiles(path.join(this.scratch, side), scrub);
      } catch (error) {
        this.noPatch(`the copies could not be cleared of credential values (${(error as Error).message})`);
        return this.result("");
      }
      return this.result(await this.diff());
    }
    return this.result("");
  }

  /** Removes the copies, waited for (never holding the event loop). Never throws. */
  async dispose(): Promise<void> {
    const scratch = this.scratch;
    this.scratch = undefined;
    if (scratch) await removeFolders([scratch]).catch(() => undefined);
  }

  /** The patch with its notes: the folders left out whole (one note for all) first. */
  private result(patch: string): WorkspacePatch {
    const notes = [...this.notes.done()];
    const bulk = [...this.bulk].sort(comparePaths);
    if (bulk.length > 0) {
      const more = bulk.length > 1 ? ` (and ${bulk.length - 1} more such folders)` : "";
      const why = [...new Set(bulk.map((rel) => BULK_FOLDERS.get(path.posix.basename(rel))))].join(", ");
      notes.unshift(`${notedPath(bulk[0]!)}/${more} left out of the patch: ${why}`);
    }
    return { patch, notes, leftOut: this.leftOut };
  }

  /** No patch can be made: says why, and that it holds none of the run's changes. */
  private noPatch(why: string): void {
    this.notes.add(`no patch: ${why}`);
    if (!this.leftOut.has("")) this.leftOut.set("", "no patch could be made");
  }

  /** Whether the copy was made (perhaps in part: its notes say what is missing). */
  private async copy(side: "a" | "b", when: string): Promise<boolean> {
    const to = path.join(this.scratch!, side);
    try {
      await copyTree(this.workspace, to, this.totalBytes, (note) => this.notes.add(`${when}: ${note}`), {
        leftOut: (rel, why) => {
          if (!this.leftOut.has(rel)) this.leftOut.set(rel, why);
        },
        bulk: (rel) => this.bulk.add(rel),
      });
    } catch (error) {
      this.notes.add(`${when}: the copy stopped early (${(error as Error).message})`);
    }
    return fs.existsSync(to);
  }

  /**
   * A file one copy left out (over 4 MiB, past the total, unreadable, a FIFO) and the other holds
   * would read as deleted or as new: a sandbox pads a changed file past the cap and the patch, and
   * every view made from it, says "deleted". Both sides leave it out, and the notes say why; a
   * folder one side could not read (chmod 000, too many entries) or cut off at the total, with all
   * it holds: one removal each, waited for (never one synchronous call per file).
   */
  private async dropLeftOutFromBothSides(): Promise<void> {
    // Only the outermost paths, by folder: a folder cut off whole and an entry in it are one removal.
    const byParent = new Map<string, string[]>();
    for (const rel of this.leftOut.keys()) {
      if (rel === "" || hasAncestorIn(rel, this.leftOut)) continue;
      const slash = rel.lastIndexOf("/");
      const parent = slash < 0 ? "" : rel.slice(0, slash);
      const names = byParent.get(parent);
      if (names) names.push(rel.slice(slash + 1));
      else byParent.set(parent, [rel.slice(slash + 1)]);
    }
    for (const side of ["a", "b"]) {
      const copy = HostDir.open(path.join(this.scratch!, side));
      try {
        for (const [parentRel, names] of byParent) {
          let parent: HostDir;
          try {
            parent = HostDir.openBelow(copy, parentRel === "" ? [] : parentRel.split("/"));
          } catch (error) {
            if (error instanceof HostDirError) continue; // a link or nothing there: this copy holds nothing below it
            throw error;
          }
          try {
            await removeFromCopy(parent, names);
          } finally {
            parent.close();
          }
        }
      } finally {
        copy.close();
      }
    }
  }

  private diff(): Promise<string> {
    return diffSides(this.scratch!, (line) => {
      this.notes.add(line);
      if (line.startsWith("no patch") && !this.leftOut.has("")) this.leftOut.set("", "no patch could be made");
    });
  }
}

/** Every regular file below `dir` (a private copy: links are not followed) with `scrub` applied to its bytes. */
async function scrubFiles(dir: string, scrub: (bytes: Buffer) => Buffer): Promise<void> {
  for (const entry of await fs.promises.readdir(dir, { withFileTypes: true })) {
    const at = path.join(dir, entry.name);
    if (entry.isDirectory()) await scrubFiles(at, scrub);
    else if (entry.isFile()) {
      const bytes = await fs.promises.readFile(at);
      const scrubbed = scrub(bytes);
      if (!scrubbed.equals(bytes)) await fs.promises.writeFile(at, scrubbed);
    }
  }
}

/** Whether a folder above `rel` is in `paths` ("" aside: it stands for no patch at all). */
function hasAncestorIn(rel: string, paths: ReadonlyMap<string, string>): boolean {
  for (let i = rel.lastIndexOf("/"); i > 0; i = rel.lastIndexOf("/", i - 1))
    if (paths.has(rel.slice(0, i))) return true;
  return false;
}

/** Why the patch holds nothing of `rel` (itself, or a folder above it, left out), or undefined. */
function leftOutWhy(leftOut: ReadonlyMap<string, string>, rel: string): string | undefined {
  const own = leftOut.get(rel);
  if (own !== undefined) return own;
  for (let i = rel.lastIndexOf("/"); i > 0; i = rel.lastIndexOf("/", i - 1)) {
    const why = leftOut.get(rel.slice(0, i));
    if (why !== undefined) return why;
  }
  return leftOut.get("");
}

/** Changed paths named in one note line; the rest are counted. */
const MISSED_LISTED = 10;

/**
 * Notes naming the run's changed files (workspace paths, relative) that the patch holds nothing of,
 * grouped by why: "changed but not in the patch: package.json (the copy reached 64 MiB)". They go
 * first in its notes, so an empty or partial patch never reads as "no change". Folders left out
 * whole by name (installed packages) come last: a run that installs packages changes thousands of
 * files there. The top-level .git is never part of a patch and is not named.
 */
export function changedNotInPatch(changes: WorkspacePatch, changed: Iterable<string>): string[] {
  const leftOut = changes.leftOut;
  if (!leftOut || leftOut.size === 0) return [];
  const byWhy = new Map<string, string[]>();
  for (const rel of changed) {
    if (rel === "" || rel.startsWith("/") || rel === ".git" || rel.startsWith(".git/")) continue;
    const why = leftOutWhy(leftOut, rel);
    if (why === undefined) continue;
    const paths = byWhy.get(why) ?? [];
    paths.push(rel);
    byWhy.set(why, paths);
  }
  const bulkReasons = new Set(BULK_FOLDERS.values());
  return [...byWhy]
    .sort(([x], [y]) => Number(bulkReasons.has(x)) - Number(bulkReasons.has(y)))
    .map(([why, paths]) => {
      const listed = paths.slice(0, MISSED_LISTED).map(notedPath).join(", ");
      const more = paths.length > MISSED_LISTED ? ` and ${paths.length - MISSED_LISTED} more` : "";
      return `changed but not in the patch: ${listed}${more} (${why})`;
    });
}

/**
 * How long a patch's diff may take. Files of many short lines the sandbox rewrote make git's line
 * diff slow (review, round 3, session 39: eight 4 MiB fixtures, within the size caps, kept the host
 * busy 177 s after a run with a 60 s timeout): past this there is no patch, and a note says why.
 */
export const PATCH_DIFF_TIMEOUT_MS = 60_000;

/** What bounds a patch's diff: its deadline, and the run's stop (the caller's Ctrl-C). */
export interface DiffBounds {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * The patch from `scratch/a` to `scratch/b` (two folders the caller filled), in this format: git's
 * binary-safe diff with paths as a/<file>, b/<file>, or `diff -ruN` where git is missing. What
 * could not be made is noted; throws only when `signal` stopped it. Also the hand-back's patch
 * (hand-back/change-patch.ts).
 */
export async function diffSides(
  scratch: string,
  note: (line: string) => void,
  bounds: DiffBounds = {},
): Promise<string> {
  // The copies are the sandbox's files: no config, attributes or drivers of any repository apply.
  const env = {
    PATH: hostSearchPath(),
    HOME: scratch,
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_CEILING_DIRECTORIES: path.dirname(scratch),
  };
  const timeoutMs = bounds.timeoutMs ?? PATCH_DIFF_TIMEOUT_MS;
  const deadline = performance.now() + timeoutMs;
  const options = {
    cwd: scratch,
    env,
    maxOutputBytes: PATCH_OUTPUT_MAX_BYTES,
    timeoutMs,
    ...(bounds.signal ? { signal: bounds.signal } : {}),
  };
  const git = await settled(
    runCappedProcess(
      "git",
      [
        "-c",
        "core.attributesFile=/dev/null",
        "diff",
        "--no-index",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        // A rename would be written as `rename from a/<old>`, lines the side folders cannot be
        // taken out of safely: a delete and an add apply everywhere (git apply, patch -p1).
        "--no-renames",
        "a",
        "b",
      ],
      options,
      "git diff",
    ),
  );
  bounds.signal?.throwIfAborted();
  if ("status" in git && (git.status === 0 || git.status === 1))
    return stripSidePrefixes(git.stdout.toString("utf8"), bounds.signal);
  if ("error" in git && git.error instanceof OutputCapError) {
    note(`no patch: it is larger than ${PATCH_OUTPUT_MAX_BYTES / 1048576} MiB`);
    return "";
  }
  // `diff -ruN` where git could not run, in what is left of the time (none: the same slow files).
  const left = deadline - performance.now();
  if (left > 1000) {
    const diff = await settled(
      runCappedProcess("diff", ["-ruN", "--no-dereference", "a", "b"], { ...options, timeoutMs: left }),
    );
    bounds.signal?.throwIfAborted();
    if ("status" in diff && (diff.status === 0 || diff.status === 1)) return diff.stdout.toString("utf8");
  }
  note(`no patch: ${"error" in git ? (git.error as Error).message : git.stderr.trim() || "git diff failed"}`);
  return "";
}

/** The process's result, or why it failed to give one. */
function settled(run: Promise<CappedProcessResult>): Promise<CappedProcessResult | { error: unknown }> {
  return run.catch((error: unknown) => ({ error }));
}

/**
 * Paths come out as a/a/<file>, b/b/<file> (and a/b/<file> for new files): drop the side folder,
 * in header lines only (a content line may well contain "a/a/"), and only where git put it: a
 * file's own name may hold " a/b/" too (a name is the sandbox's choice), and dropping that would
 * make the patch write another path than the one judged.
 */
export async function stripSidePrefixes(patch: string, signal?: AbortSignal): Promise<string> {
  // One pass over line starts, copying the text between changed header lines as slices: a patch
  // of millions of short lines (64 MiB within the caps) split into an array took 1-3 GB and held
  // the event loop 8-13 s (review, round 3, session 39).
  const pieces: string[] = [];
  let header = false;
  let copiedTo = 0;
  let lines = 0;
  for (let start = 0; start < patch.length; ) {
    const newline = patch.indexOf("\n", start);
    const end = newline === -1 ? patch.length : newline;
    let rewritten: string | undefined;
    if (patch.startsWith("diff --git ", start)) {
      header = true;
      // "<left> <right>": both name the same file, so both halves have the same length.
      const rest = patch.slice(start + "diff --git ".length, end);
      const half = (rest.length - 1) / 2;
      if (Number.isInteger(half) && rest[half] === " ")
        rewritten = `diff --git ${stripSide(rest.slice(0, half))} ${stripSide(rest.slice(half + 1))}`;
    } else if (
      patch.startsWith("@@", start) ||
      patch.startsWith("GIT binary patch", start) ||
      patch.startsWith("Binary files", start)
    ) {
      header = false;
    } else if (header && (patch.startsWith("--- ", start) || patch.startsWith("+++ ", start))) {
      rewritten = patch.slice(start, start + 4) + stripSide(patch.slice(start + 4, end));
    }
    if (rewritten !== undefined) {
      pieces.push(patch.slice(copiedTo, start), rewritten);
      copiedTo = end;
    }
    start = end + 1;
    if (++lines % 65_536 === 0) {
      await yieldToEventLoop();
      signal?.throwIfAborted();
    }
  }
  pieces.push(patch.slice(copiedTo));
  return pieces.join("");
}

/** "a/b/<file>" -> "a/<file>" (also inside git's quotes); anything else (/dev/null) as it is. */
function stripSide(name: string): string {
  const quote = name.startsWith('"') ? 1 : 0;
  return /^[ab]\/[ab]\//.test(name.slice(quote)) ? name.slice(0, quote + 2) + name.slice(quote + 4) : name;
}

/**
 * Removes `names` from the folder `parent` of a copy (opened by HostDir.openBelow: never through a
 * link on the way; the copies hold the workspace's links as they were, and a folder on one side can
 * be a link to a host folder on the other, where the same path removed through it deleted the
 * host's file). A link or file is unlinked; a folder, with all it holds, by removeFolders.
 */
async function removeFromCopy(parent: HostDir, names: readonly string[]): Promise<void> {
  const folders: string[] = [];
  for (const name of names) {
    const stat = parent.lstat(name);
    if (!stat) continue; // this copy holds nothing there
    if (stat.isDirectory()) folders.push(name);
    else await fs.promises.rm(parent.at(name), { force: true });
  }
  await removeFolders(folders, parent);
}

/** Paths one `rm` is given at most: well within the kernel's argument limit (each under 4 KiB). */
const RM_BATCH = 256;

/**
 * Removes folders with all they hold (names in `parent`, or absolute paths of this process's own
 * scratch without it), in a child `rm -rf` that is waited for: Node's recursive rm handles the
 * completions of a folder's entries in one turn of the event loop (a copy of 50,000 files held it
 * ~1 s). The child reaches `parent` through its fd (its own fd 3), and rm removes links, never what
 * they lead to. Where rm cannot run, Node's fs.promises.rm does it. Throws only when neither can.
 */
async function removeFolders(targets: readonly string[], parent?: HostDir): Promise<void> {
  for (let i = 0; i < targets.length; i += RM_BATCH) {
    const batch = targets.slice(i, i + RM_BATCH);
    const args = parent ? batch.map((name) => `/proc/self/fd/3/${name}`) : batch;
    const rm = await settled(
      runCappedProcess("rm", ["-rf", "--", ...args], {
        cwd: "/",
        env: { PATH: hostSearchPath(), LC_ALL: "C" },
        fds: parent ? [parent.fd] : [],
        maxOutputBytes: 64 * 1024,
      }),
    );
    if ("status" in rm && rm.status === 0) continue;
    for (const target of batch)
      await fs.promises.rm(parent ? parent.at(target) : target, { recursive: true, force: true });
  }
}

/** Paths named in the note that says where a copy stopped at the total; the rest are counted. */
const CUT_LISTED = 5;

/** What a copy tells its baseline besides notes. */
interface CopySink {
  /** `rel` (a file, or a folder with all it holds) is not in this copy, for this reason. */
  leftOut(rel: string, why: string): void;
  /** `rel` is one of the BULK_FOLDERS (also left out). */
  bulk(rel: string): void;
}

/**
 * Copies `from` to `to` (created) through the fd walk, within the caps, yielding to the event loop
 * as it goes. The top folder's own files first (package.json, tsconfig.json: a big folder sorting
 * before them cannot spend the total they need), then the rest depth-first in the walk's order.
 * BULK_FOLDERS are not walked. Once the total is reached nothing more is walked or copied: the
 * folder it was reached in is cut off whole, and each later entry of the folders above it is left
 * out as one path (a folder with all it holds), listed in one note.
 */
async function copyTree(
  from: string,
  to: string,
  totalBytes: number,
  note: (line: string) => void,
  sink: CopySink,
): Promise<void> {
  let total = 0;
  let seen = 0;
  /** Where the total was reached: the file, the folder cut off whole (none in the top folder), what was left out. */
  let cut: { at: string; folder?: string; listed: string[]; count: number } | undefined;
  const totalShown = `${totalBytes / 1048576} MiB`;
  const reached = `the copy reached ${totalShown}`;
  const cutOff = (rel: string, folder: boolean) => {
    sink.leftOut(rel, reached);
    cut!.count++;
    if (cut!.listed.length < CUT_LISTED) cut!.listed.push(`${notedPath(rel)}${folder ? "/" : ""}`);
  };
  /** Leaves `rel` out for `why` (kept with the path), noted as `shown` with `detail`. */
  const skip = (rel: string, why: string, { shown = rel, detail = why } = {}) => {
    note(`${shown} skipped: ${detail}`);
    sink.leftOut(rel, why);
  };
  /** Whether the walk goes into the entry just visited: a folder copied (below the top one: before the total). */
  let walkInto = false;
  // The top folder is walked past the total too: each of its folders is then left out by name.
  const descend = (e: WalkEntry) => walkInto && (e.path === "" || !cut);

  /** Copies one entry (or says why not); sets walkInto. */
  const visit = (entry: WalkEntry): void => {
    walkInto = false;
    const rel = entry.path;
    if (entry.depth === 1 && entry.name === ".git") return;
    if (cut?.folder !== undefined && rel.startsWith(`${cut.folder}/`)) return; // cut off with its folder
    if (Buffer.byteLength(rel) > PATCH_PATH_MAX_BYTES) {
      // Nothing below it is visited: each noted path is the first one too long.
      skip(rel, `path longer than ${PATCH_PATH_MAX_BYTES} bytes`, { shown: `${rel.slice(0, 80)}...` });
      return;
    }
    if (entry.kind === "directory" && BULK_FOLDERS.has(entry.name)) {
      sink.bulk(rel);
      sink.leftOut(rel, BULK_FOLDERS.get(entry.name)!);
      return;
    }
    if (cut) {
      cutOff(rel, entry.kind === "directory");
      return;
    }
    if (entry.problem) {
      skip(rel, entry.problem);
      return;
    }
    const nameProblem = rel === "" ? undefined : patchNameProblem(entry.name);
    if (nameProblem) {
      skip(rel, nameProblem, { shown: notedPath(rel) });
      return;
    }
    try {
      const copied = copyEntry(entry, rel === "" ? to : path.join(to, rel), totalBytes - total);
      if (typeof copied === "number") {
        total += copied;
        walkInto = entry.kind === "directory" && entry.fd !== undefined;
      } else if (copied !== "total") skip(rel, copied.skipped, { detail: copied.detail });
      else {
        const slash = rel.lastIndexOf("/");
        cut = { at: rel, folder: slash > 0 ? rel.slice(0, slash) : undefined, listed: [], count: 0 };
        cutOff(cut.folder ?? rel, cut.folder !== undefined);
      }
    } catch (error) {
      skip(rel, (error as NodeJS.ErrnoException).code ?? (error as Error).message);
    }
  };

  // The top folder and its own files; its folders wait for the second walk.
  const topFiles = new Set<string>();
  // Depth 0: the top folder's folders are not even opened (each is a problem here, and skipped).
  for (const entry of walkTree(from, { descend: (e) => e.path === "" && walkInto, maxDepth: 0 })) {
    if (++seen % COPY_YIELD_EVERY === 0) await yieldToEventLoop();
    if (entry.path !== "" && entry.kind === "directory") continue;
    if (entry.path !== "") topFiles.add(entry.name);
    visit(entry);
    if (entry.path === "" && !walkInto) return; // the top folder itself could not be copied (noted)
  }
  for (const entry of walkTree(from, { descend, maxDepth: Number.POSITIVE_INFINITY })) {
    // The walk holds its open folders between entries, so pausing here is safe.
    if (++seen % COPY_YIELD_EVERY === 0) await yieldToEventLoop();
    if (entry.path === "") {
      walkInto = entry.fd !== undefined && !entry.problem; // copied by the first walk
      if (!walkInto) note(`the copy stopped early (${entry.problem ?? "the top folder could not be read again"})`);
      continue;
    }
    if (entry.depth === 1 && entry.kind !== "directory" && topFiles.has(entry.name)) continue;
    visit(entry);
  }
  if (cut) {
    const more = cut.count > cut.listed.length ? ` and ${cut.count - cut.listed.length} more` : "";
    note(
      `the copy stopped at ${totalShown} (at ${notedPath(cut.at)}): left out of the patch from there: ${cut.listed.join(", ")}${more}`,
    );
  }
}

/**
 * Copies one entry within `room` bytes of content: the bytes copied, why it was left out (the
 * note's words, and the shorter reason kept with the path), or "total" when it would pass the total.
 */
function copyEntry(
  entry: WalkEntry,
  dest: string,
  room: number,
): number | { skipped: string; detail?: string } | "total" {
  const stat = entry.stat!;
  if (entry.kind === "directory") fs.mkdirSync(dest, { mode: 0o700 });
  else if (entry.kind === "symlink") fs.symlinkSync(fs.readlinkSync(entry.at, "utf8"), dest);
  else if (entry.kind !== "file") return { skipped: `a ${entry.kind}` };
  else {
    const allocated = stat.blocks * 512;
    const sparse = allocated < stat.size / 2 ? `, sparse: ${allocated} bytes allocated` : "";
    if (stat.size > PATCH_FILE_MAX_BYTES) {
      const cap = `more than ${PATCH_FILE_MAX_BYTES / 1048576} MiB`;
      return { skipped: cap, detail: `${stat.size} bytes${sparse} (${cap})` };
    }
    if (stat.size > room) return "total";
    const content = readFileAt(entry.at, stat, PATCH_FILE_MAX_BYTES);
    if (!content) return { skipped: "unreadable" };
    // Keeps the execute bits (a patch shows mode changes), never setuid/setgid.
    // A new file (O_EXCL: never through a name that is already there, link or not).
    fs.writeFileSync(dest, content, { mode: (stat.mode & 0o755) | 0o600, flag: "wx" });
    return content.length;
  }
  return 0;
}
