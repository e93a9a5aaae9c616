// Workspace changes as a patch, for run records: a copy of the workspace is taken before the
// run (only when a record is asked for) and diffed against a copy taken afterwards with
// `git diff --no-index` (binary-safe), or `diff -ruN` where git is missing. The top-level
// .git folder is left out: its contents are not source changes.
//
// The workspace is hostile (the sandbox wrote it): both copies go through the fd walk (no
// symlink followed, any depth), with a cap per file and in total judged by apparent size, so
// a sparse 2 GB file is skipped without being read; FIFOs, sockets and devices are skipped;
// paths too long for git are skipped. Every skip becomes a note. Nothing here throws: a record
// must not lose the run's outcome because its patch could not be made.
//
// The copies and the diff never hold the event loop: the controller (a batch, an agent running
// calls side by side) streams other runs' model replies and events meanwhile. The copy yields
// every COPY_YIELD_EVERY entries, and git runs as a child process that is waited for, not blocked on.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { type CappedProcessResult, OutputCapError, runCappedProcess } from "../util/capped-process.js";
import { HostDir, HostDirError } from "../util/host-dir.js";
import { hostSearchPath } from "../util/host-programs.js";
import { type WalkEntry, walkTree, yieldToEventLoop } from "../workspace/fd-walk.js";
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

interface WorkspacePatch {
  /** The unified diff ("" when nothing changed or it could not be made). */
  patch: string;
  /** What was left out of it, and why. */
  notes: string[];
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

export class WorkspaceBaseline {
  private readonly notes = new Notes();
  /** Paths either copy left out: left out of the other as well. */
  private readonly skipped = new Set<string>();

  private constructor(
    private readonly workspace: string,
    private readonly scratch: string | undefined,
  ) {}

  /**
   * Copies the workspace as it is now, into a new folder inside `scratchParent` (a private folder;
   * default: the temp dir). Never throws.
   */
  static async take(workspace: string, scratchParent = os.tmpdir()): Promise<WorkspaceBaseline> {
    let scratch: string | undefined;
    try {
      scratch = fs.mkdtempSync(path.join(scratchParent, "baseline-"));
    } catch (error) {
      const baseline = new WorkspaceBaseline(workspace, undefined);
      baseline.notes.add(`no patch: cannot make a scratch folder (${(error as Error).message})`);
      return baseline;
    }
    const baseline = new WorkspaceBaseline(workspace, scratch);
    await baseline.copy("a", "before");
    return baseline;
  }

  /** The diff from the baseline to the workspace now, and what was left out. Never throws. */
  async patch(): Promise<WorkspacePatch> {
    if (!this.scratch) return { patch: "", notes: this.notes.done() };
    if (!(await this.copy("b", "after"))) this.notes.add("no patch: the workspace could not be copied after the run");
    else if (!fs.existsSync(path.join(this.scratch, "a")))
      this.notes.add("no patch: there is no copy from before the run");
    else {
      this.dropSkippedFromBothSides();
      return { patch: await this.diff(), notes: this.notes.done() };
    }
    return { patch: "", notes: this.notes.done() };
  }

  dispose(): void {
    if (this.scratch) fs.rmSync(this.scratch, { recursive: true, force: true });
  }

  /** Whether the copy was made (perhaps in part: its notes say what is missing). */
  private async copy(side: "a" | "b", when: string): Promise<boolean> {
    const to = path.join(this.scratch!, side);
    try {
      await copyTree(
        this.workspace,
        to,
        (note) => this.notes.add(`${when}: ${note}`),
        (rel) => this.skipped.add(rel),
      );
    } catch (error) {
      this.notes.add(`${when}: the copy stopped early (${(error as Error).message})`);
    }
    return fs.existsSync(to);
  }

  /**
   * A file one copy left out (over 4 MiB, past the total, unreadable, a FIFO) and the other holds
   * would read as deleted or as new: a sandbox pads a changed file past the cap and the patch, and
   * every view made from it, says "deleted". Both sides leave it out, and the notes say why; a
   * folder one side could not read (chmod 000, too many entries) with all it holds.
   */
  private dropSkippedFromBothSides(): void {
    for (const side of ["a", "b"]) {
      const copy = HostDir.open(path.join(this.scratch!, side));
      try {
        for (const rel of this.skipped) if (rel !== "") removeFromCopy(copy, rel);
      } finally {
        copy.close();
      }
    }
  }

  private diff(): Promise<string> {
    return diffSides(this.scratch!, (line) => this.notes.add(line));
  }
}

/**
 * The patch from `scratch/a` to `scratch/b` (two folders the caller filled), in this format: git's
 * binary-safe diff with paths as a/<file>, b/<file>, or `diff -ruN` where git is missing. What
 * could not be made is noted; never throws. Also the hand-back's patch (hand-back/change-patch.ts).
 */
export async function diffSides(scratch: string, note: (line: string) => void): Promise<string> {
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
  const options = { cwd: scratch, env, maxOutputBytes: PATCH_OUTPUT_MAX_BYTES };
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
    ),
  );
  if ("status" in git && (git.status === 0 || git.status === 1)) return stripSidePrefixes(git.stdout.toString("utf8"));
  if ("error" in git && git.error instanceof OutputCapError) {
    note(`no patch: it is larger than ${PATCH_OUTPUT_MAX_BYTES / 1048576} MiB`);
    return "";
  }
  const diff = await settled(runCappedProcess("diff", ["-ruN", "--no-dereference", "a", "b"], options));
  if ("status" in diff && (diff.status === 0 || diff.status === 1)) return diff.stdout.toString("utf8");
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
function stripSidePrefixes(patch: string): string {
  let header = false;
  return patch
    .split("\n")
    .map((line) => {
      if (line.startsWith("diff --git ")) {
        header = true;
        // "<left> <right>": both name the same file, so both halves have the same length.
        const rest = line.slice("diff --git ".length);
        const half = (rest.length - 1) / 2;
        if (!Number.isInteger(half) || rest[half] !== " ") return line;
        return `diff --git ${stripSide(rest.slice(0, half))} ${stripSide(rest.slice(half + 1))}`;
      }
      if (line.startsWith("@@") || line.startsWith("GIT binary patch") || line.startsWith("Binary files"))
        header = false;
      if (header && (line.startsWith("--- ") || line.startsWith("+++ ")))
        return line.slice(0, 4) + stripSide(line.slice(4));
      return line;
    })
    .join("\n");
}

/** "a/b/<file>" -> "a/<file>" (also inside git's quotes); anything else (/dev/null) as it is. */
function stripSide(name: string): string {
  const quote = name.startsWith('"') ? 1 : 0;
  return /^[ab]\/[ab]\//.test(name.slice(quote)) ? name.slice(0, quote + 2) + name.slice(quote + 4) : name;
}

/**
 * Removes `rel` from a copy, never through a link on the way: the copies hold the workspace's links
 * as they were (a folder on one side can be a link to a host folder on the other, and the same
 * path removed through it deleted the host's file).
 */
function removeFromCopy(copy: HostDir, rel: string): void {
  const parts = rel.split("/");
  let parent: HostDir;
  try {
    parent = HostDir.openBelow(copy, parts.slice(0, -1));
  } catch (error) {
    if (error instanceof HostDirError) return; // a link or nothing there: this copy holds nothing at rel
    throw error;
  }
  try {
    fs.rmSync(parent.at(parts.at(-1)!), { recursive: true, force: true });
  } finally {
    parent.close();
  }
}

/** Copies `from` to `to` (created) through the fd walk, within the caps, yielding to the event loop as it goes. */
async function copyTree(
  from: string,
  to: string,
  note: (line: string) => void,
  skipped: (rel: string) => void,
): Promise<void> {
  let total = 0;
  let seen = 0;
  const descend = (e: WalkEntry) => {
    if (e.depth === 1 && e.name === ".git") return false;
    if (e.path !== "" && patchNameProblem(e.name)) return false; // noted with the entry itself
    if (Buffer.byteLength(e.path) > PATCH_PATH_MAX_BYTES) {
      note(`${e.path.slice(0, 80)}... skipped: path longer than ${PATCH_PATH_MAX_BYTES} bytes`);
      return false;
    }
    return e.fd !== undefined && !e.problem;
  };
  for (const entry of walkTree(from, { descend, maxDepth: Number.POSITIVE_INFINITY })) {
    // The walk holds its open folders between entries, so pausing here is safe.
    if (++seen % COPY_YIELD_EVERY === 0) await yieldToEventLoop();
    if (entry.depth === 1 && entry.name === ".git") continue;
    if (Buffer.byteLength(entry.path) > PATCH_PATH_MAX_BYTES) continue; // noted by descend, or below a noted one
    if (entry.problem) {
      note(`${entry.path} skipped: ${entry.problem}`);
      skipped(entry.path);
      continue;
    }
    const nameProblem = entry.path === "" ? undefined : patchNameProblem(entry.name);
    if (nameProblem) {
      note(`${notedPath(entry.path)} skipped: ${nameProblem}`);
      skipped(entry.path);
      continue;
    }
    try {
      const copied = copyEntry(entry, entry.path === "" ? to : path.join(to, entry.path), total, note);
      if (copied === undefined) skipped(entry.path);
      else total += copied;
    } catch (error) {
      note(`${entry.path} skipped: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      skipped(entry.path);
    }
  }
}

/** Copies one entry; returns the bytes of content copied, or undefined when it was left out (noted). */
function copyEntry(entry: WalkEntry, dest: string, total: number, note: (line: string) => void): number | undefined {
  const rel = entry.path;
  const stat = entry.stat!;
  if (entry.kind === "directory") fs.mkdirSync(dest, { mode: 0o700 });
  else if (entry.kind === "symlink") fs.symlinkSync(fs.readlinkSync(entry.at, "utf8"), dest);
  else if (entry.kind !== "file") {
    note(`${rel} skipped: a ${entry.kind}`);
    return undefined;
  } else {
    const allocated = stat.blocks * 512;
    const sparse = allocated < stat.size / 2 ? `, sparse: ${allocated} bytes allocated` : "";
    if (stat.size > PATCH_FILE_MAX_BYTES) {
      note(`${rel} skipped: ${stat.size} bytes${sparse} (more than ${PATCH_FILE_MAX_BYTES / 1048576} MiB)`);
      return undefined;
    }
    if (total + stat.size > PATCH_TOTAL_MAX_BYTES) {
      note(`${rel} skipped: the copy reached ${PATCH_TOTAL_MAX_BYTES / 1048576} MiB`);
      return undefined;
    }
    const content = readFileAt(entry.at, stat, PATCH_FILE_MAX_BYTES);
    if (!content) {
      note(`${rel} skipped: unreadable`);
      return undefined;
    }
    // Keeps the execute bits (a patch shows mode changes), never setuid/setgid.
    // A new file (O_EXCL: never through a name that is already there, link or not).
    fs.writeFileSync(dest, content, { mode: (stat.mode & 0o755) | 0o600, flag: "wx" });
    return content.length;
  }
  return 0;
}
