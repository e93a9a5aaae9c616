// The rules a run's changes to a writable tree must keep, as a pure function over entries: the
// same pairs (path; facts before; facts after) come from the bind-mode walk of the host tree or,
// in copy mode, from the host tree and a returned tar, so both judge alike. Nothing here
// touches the filesystem.
//
// Input is in walk order (`comparePaths`: pre-order, parents before children) and includes
// unchanged entries, so the evaluator knows each path's ancestors (which directory is a git
// directory, which protected scope existed before) with a stack as deep as the tree, never a
// table as big as it.

import {
  ancestorLinkWhy,
  builtinProtectionOf,
  foldCase,
  GIT_DIR_MARKERS,
  gitObjectStorePath,
  gitPathAllowed,
  hostRunReportOf,
  landingWhy,
  nestedProtectionParent,
  outwardLinkWhy,
  trickyNameReport,
} from "./builtin-protections.js";
import type { EntryKind } from "./fd-walk.js";
import {
  type CommandFolder,
  commandFolderGuarding,
  type GuardedAncestor,
  guardedAncestors,
  noLongerADirectory,
} from "./git-config-paths.js";
import {
  gitEntryProblem,
  POINTER_MAX_BYTES,
  pointerFormatOf,
  pointerProblem,
  UNSAFE_GIT_FILE_BITS,
} from "./git-plain-data.js";
import { OBJECT_RULE, REF_RULE } from "./git-rule-names.js";
import { GitWork, MAX_STORE_CHANGES, namesCommits } from "./git-work.js";
import { OutwardLinks } from "./outward-links.js";
import { compileGlobs, type PathMatcher } from "./path-glob.js";

export interface EntryFacts {
  kind: EntryKind;
  /** st_mode: type and permission bits. */
  mode: number;
  /** Apparent size in bytes. */
  size: number;
  /** sha256 of a small regular file's content, or a symlink's target, when known. */
  hash?: string;
  mtimeMs?: number;
  ctimeMs?: number;
  ino?: number;
  /** Number of hard links (the after side of a walk; absent where unknown). */
  nlink?: number;
  /** Directories: their names look like a git directory (HEAD + objects + refs, or HEAD + commondir). */
  gitLike?: boolean;
  /** The walk could not see this entry or below it (a violation). */
  problem?: string;
}

export interface EntryPair {
  path: string;
  before?: EntryFacts;
  after?: EntryFacts;
  /**
   * The after side's content, at most maxBytes (undefined when it cannot be read as the entry
   * walked): rules that judge a file by what it says (git pointers) ask for it.
   */
  content?: (maxBytes: number) => Buffer | undefined;
}

type Change = "created" | "modified" | "deleted";

/** Names host git opens in every folder of a worktree (status, diff, log). */
const GIT_READ_NAMES = new Set([".gitignore", ".gitattributes", ".mailmap"]);
const BLOCKING_KINDS = new Set(["fifo", "socket", "device", "unknown"]);

/** How a violation is undone on the host. */
export type RestoreStep =
  /**
   * The scope did not exist before: remove it (and all below). `objectStore`: a file of an object
   * store that failed its check; a revert of its git directory (which leaves the store alone) does
   * not cover it. `setAside`: a pack (or its .idx) this host could not check (its git could not
   * run): moved to the run's folder of unchecked packs instead (restore-tree.ts), for the user to
   * verify and put back.
   */
  | { action: "remove"; path: string; objectStore?: boolean; setAside?: boolean }
  /** The scope existed before: make it what the kept copy says (git: leave the object store alone). */
  | { action: "revert"; path: string }
  /** Set a directory's (or an object store file's) permission bits. */
  | { action: "mode"; path: string; mode: number };

export interface Violation {
  path: string;
  change: Change | "mode" | "unreadable";
  /** A built-in protection's name, "protectedPaths", or "walk" (the walk could not see it). */
  rule: string;
  restore: RestoreStep;
  /** What the walk said ("unreadable"), or why the entry breaks its rule (the git rules). */
  detail?: string;
}

/** A change to a file a host tool reads when a person runs it (HOST_RUN_REPORTED): reported, not refused. */
export interface HostRunChange {
  path: string;
  change: Change;
  why: string;
}

export interface RuleConfig {
  /** Built-in protections the policy turns off, by name (BUILTIN_PROTECTION_NAMES). */
  disabled?: readonly string[];
  /** The caller's protectedPaths globs; apply to the workspace, not to extra writable roots. */
  protectedPaths?: readonly string[];
  /**
   * Directories (relative) that are git directories because a `gitdir:` file or a `commondir`
   * inside the lent trees names them, though their names do not look like one.
   */
  gitDirs?: readonly string[];
  /**
   * Paths (relative) that the repository's git configuration, as it was before the run, makes
   * executable or configuration (git-config-paths.ts), each with why: protected as a whole.
   */
  configPaths?: ReadonlyMap<string, string>;
  /**
   * Folders (relative) on PATH where only the host's command names are guarded (`layout node`'s
   * node_modules/.bin), with `hostCommands`, those names: a file there named like one is
   * protected as a configPaths entry would be (git-config-paths.ts CommandFolder).
   */
  commandFolders?: ReadonlyMap<string, CommandFolder>;
  hostCommands?: ReadonlySet<string>;
  /**
   * Paths (relative) whose entries never reach the host (a branch or patch hand-back leaves every
   * git-named folder out): their links and names are not reported as host-run changes.
   */
  neverHandedBack?: (path: string) => boolean;
}

/** Bits that make a directory a place other local users can plant files in, or inherit a group from. */
const UNSAFE_DIRECTORY_BITS = 0o2000 | 0o020 | 0o002;
const PERMISSION_BITS = 0o7777;

/** Whether an entry that exists on both sides changed. Directories change only by kind or permissions. */
export function entryChanged(before: EntryFacts, after: EntryFacts): boolean {
  if (before.kind !== after.kind) return true;
  if ((before.mode & PERMISSION_BITS) !== (after.mode & PERMISSION_BITS)) return true;
  if (before.kind === "directory") return false;
  if (before.kind === "file" && before.size !== after.size) return true;
  if (before.hash !== undefined && after.hash !== undefined) return before.hash !== after.hash;
  return !sameMetadata(before, after);
}

/** Same size, times, inode and mode: what lets a second walk reuse the first walk's hash. */
export function sameMetadata(a: EntryFacts, b: EntryFacts): boolean {
  return (
    a.kind === b.kind &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ctimeMs === b.ctimeMs &&
    a.ino === b.ino &&
    a.mode === b.mode
  );
}

export function changeOf(pair: EntryPair): Change | undefined {
  if (!pair.before) return pair.after ? "created" : undefined;
  if (!pair.after) return "deleted";
  return entryChanged(pair.before, pair.after) ? "modified" : undefined;
}

interface Frame {
  path: string;
  existedBefore: boolean;
  /** Innermost directory at or above this one that was a git directory before the run. */
  gitRoot?: string;
  /** Inside something that is removed as a whole (a new repository): nothing below is judged again. */
  covered?: boolean;
  /** An existing directory that now looks like a git directory. */
  turnedGitLike?: boolean;
  /**
   * Setgid after the run as it may be: kept from before the run, or (a new directory) taken from a
   * parent that may be. Its new subdirectories get the bit from the kernel at mkdir.
   */
  setgid?: boolean;
}

export const lastName = (path: string) => path.slice(path.lastIndexOf("/") + 1);
export const isInside = (ancestor: string, path: string) =>
  ancestor === "" ? path !== "" : path.startsWith(ancestor) && path.charCodeAt(ancestor.length) === 47;

/** At most this many host-run changes of each kind are listed (`hostRunCount` counts all). */
export const MAX_LISTED_HOST_RUN = 100;

/** The kinds of host-run change, in the order they are listed. */
const HOST_RUN_KINDS = ["link", "name", "file"] as const;

/**
 * Host-run changes as they are found, listed up to MAX_LISTED_HOST_RUN of each kind, counted in
 * full: links out of the tree first, then names tools misread, then the config files a tool reads,
 * so that a hundred changed `package.json` files, or a hundred names `-o1`…, cannot push a link to
 * `/etc/shadow` out of the list or past the first ones a note or an event shows (fix reviews,
 * round 3, session 40).
 */
export class HostRunList {
  readonly list: HostRunChange[] = [];
  count = 0;
  private readonly listed = { link: 0, name: 0, file: 0 };

  add(change: HostRunChange, kind: (typeof HOST_RUN_KINDS)[number]): void {
    this.count++;
    if (this.listed[kind] >= MAX_LISTED_HOST_RUN) return;
    let at = 0;
    for (const k of HOST_RUN_KINDS) {
      at += this.listed[k];
      if (k === kind) break;
    }
    this.list.splice(at, 0, change);
    this.listed[kind]++;
  }
}

/**
 * Judges pairs one at a time, in walk order. `visit` returns the violations of that entry
 * (usually none); it keeps only a stack of ancestors.
 */
export class RuleEvaluator {
  private readonly stack: Frame[] = [];
  private readonly disabled: ReadonlySet<string>;
  private readonly callerProtected?: PathMatcher;
  private readonly extraGitDirs: ReadonlySet<string>;
  private readonly configPaths: ReadonlyMap<string, string>;
  private readonly commandFolders: ReadonlyMap<string, CommandFolder>;
  private readonly hostCommands: ReadonlySet<string>;
  private readonly neverHandedBack: (path: string) => boolean;
  /** Proper ancestors of the config paths (a command folder too) -> what is below them, and why. */
  private readonly configAncestors: ReadonlyMap<string, GuardedAncestor>;
  /** What the git checks beyond single entries look at (object-store files, pointers). */
  readonly gitWork = new GitWork();
  /** Changes to host-run files (HOST_RUN_REPORTED), links out of the tree and misread names. */
  private readonly hostRuns = new HostRunList();
  get hostRun(): HostRunChange[] {
    return this.hostRuns.list;
  }
  get hostRunCount(): number {
    return this.hostRuns.count;
  }
  /** Every link of the tree, to find those the run left leading out of it (finish). */
  private readonly links = new OutwardLinks();
  private finished = false;

  constructor(config: RuleConfig = {}) {
    this.disabled = new Set(config.disabled ?? []);
    const globs = config.protectedPaths ?? [];
    this.callerProtected = globs.length > 0 ? compileGlobs(globs) : undefined;
    this.extraGitDirs = new Set(config.gitDirs ?? []);
    this.configPaths = config.configPaths ?? new Map();
    this.commandFolders = config.commandFolders ?? new Map();
    this.hostCommands = config.hostCommands ?? new Set();
    this.neverHandedBack = config.neverHandedBack ?? (() => false);
    this.configAncestors = guardedAncestors(this.configPaths, this.commandFolders);
  }

  /**
   * After the last visit: the links the run made, retargeted or redirected that lead out of the
   * tree, reported as host-run changes (their targets are only known once the whole tree was seen).
   */
  async finish(): Promise<Violation[]> {
    if (this.finished) return [];
    this.finished = true;
    const { outward, landings } = await this.links.resolve();
    for (const link of outward) {
      this.hostRuns.add({ path: link.path, change: link.change, why: outwardLinkWhy(link.target, link.how) }, "link");
    }
    // A link the run made to a protected path: the host's next write through it writes that path.
    const out: Violation[] = [];
    for (const { path, change, lands } of landings) {
      const rule = this.protectionAt(lands);
      if (rule)
        out.push({
          path,
          change,
          rule,
          detail: `a link to ${lands || "the tree's top"}: a host write through it writes there`,
          restore: change === "created" ? { action: "remove", path } : { action: "revert", path },
        });
      // Onto a host-run file (reported, as a change of that file would be): a host write through the
      // link rewrites `.npmrc` or `.env`, and an upload that follows it publishes what the host later
      // keeps there (`dist/npmrc.txt -> ../.npmrc`; a link named like the file is reported as one already).
      else if (lands !== "" && !hostRunReportOf(path)) {
        const report = hostRunReportOf(lands);
        if (report) this.hostRuns.add({ path, change, why: landingWhy(lands, report.why) }, "link");
        else if (isInside(lands, path)) this.hostRuns.add({ path, change, why: ancestorLinkWhy(lands) }, "link");
      }
      // Onto the tree's top, or a folder holding the link: `tar -h` or `zip -r` of `dist/` then packs
      // everything above it, `.env` and `.git/config` too (fix review, round 3, session 41).
      else if (lands === "") this.hostRuns.add({ path, change, why: ancestorLinkWhy(lands) }, "link");
    }
    return out;
  }

  /** The rule that protects a tree path (built-in, the policy's, a config's, a git directory's), if any. */
  private protectionAt(path: string): string | undefined {
    const builtin = builtinProtectionOf(path, this.disabled);
    if (builtin) return builtin.rule;
    if (this.callerProtected?.(path)) return "protectedPaths";
    for (let end = path.length; end > 0; end = path.lastIndexOf("/", end - 1))
      if (this.configPaths.has(path.slice(0, end))) return "git-config-paths";
    const parts = path.split("/");
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join("/");
      if (parts[i - 1]!.toLowerCase() === ".git" || this.gitWork.gitRoots.has(prefix) || this.extraGitDirs.has(prefix))
        return "git-metadata";
    }
    return undefined;
  }

  private noteLinks(path: string, b: EntryFacts | undefined, a: EntryFacts | undefined, judged: boolean): void {
    if (b?.kind === "symlink" && b.hash !== undefined) this.links.addBefore(path, b.hash);
    // What is never handed back stays as the host has it, and host tools resolve through the host's
    // entry: a sandbox's `.git` swapped for a link to a deep folder made `dist/repo -> ../.git` land
    // there, not in the host's `.git` (fix review, round 3, session 41).
    if (this.neverHandedBack(path)) {
      if (b?.kind === "symlink" && b.hash !== undefined) this.links.addAfter(path, b.hash, undefined, false);
      return;
    }
    if (a?.kind !== "symlink" || a.hash === undefined) return;
    const change = !b ? "created" : b.kind !== "symlink" || b.hash !== a.hash ? "modified" : undefined;
    this.links.addAfter(path, a.hash, change, judged);
  }

  // The rule table for one entry, read top to bottom: the order is the rules' precedence.
  visit(pair: EntryPair): Violation[] {
    const { path, before: b, after: a } = pair;
    while (this.stack.length > 0 && !isInside(this.stack[this.stack.length - 1]!.path, path)) this.stack.pop();
    const parent = this.stack[this.stack.length - 1];
    const isDirBefore = b?.kind === "directory";
    const isDirAfter = a?.kind === "directory";
    if (parent?.covered) {
      if (isDirBefore || isDirAfter) this.stack.push({ path, existedBefore: false, covered: true });
      return [];
    }
    const out: Violation[] = [];
    const name = lastName(path);
    const lower = name.toLowerCase();
    const change = changeOf(pair);
    const on = (rule: string) => !this.disabled.has(rule);
    const gitBefore = isDirBefore && (this.isGitDir(lower, b!, parent) || this.extraGitDirs.has(path));
    const gitAfter = isDirAfter && this.isGitDir(lower, a!, parent);
    const frame: Frame = { path, existedBefore: b !== undefined, gitRoot: gitBefore ? path : parent?.gitRoot };
    // The kernel gives a directory made in a setgid one the bit (and its group): host mkdir and git
    // make the same, so it is not the run's choice (review, session 29: every new folder, and every
    // git commit's object folder, under a team's setgid folder failed the run, and the restore
    // stripped the bit).
    const inheritsSetgid =
      isDirAfter &&
      !isDirBefore &&
      parent?.setgid === true &&
      parent.path === path.slice(0, Math.max(0, path.lastIndexOf("/")));
    if (isDirAfter && (a!.mode & 0o2000) !== 0) frame.setgid = isDirBefore ? (b!.mode & 0o2000) !== 0 : inheritsSetgid;
    if (gitBefore) this.gitWork.gitRoots.add(path);
    // What git directories hold is the git rules' (a link made there is refused), while they are on
    // (fix review, round 3, session 41: with them off, nothing was said of what a bare repository
    // held), and what is never handed back reaches no host tool: neither is reported.
    const gitJudges = on("git-entry-kinds") && on("git-metadata");
    const inGit = parent?.gitRoot !== undefined || gitAfter;
    const hostReached = !(inGit && gitJudges) && !this.neverHandedBack(path);
    this.noteLinks(path, b, a, hostReached);

    if (a?.problem) {
      out.push({
        path,
        change: "unreadable",
        rule: "walk",
        detail: a.problem,
        // Put an existing directory's mode back (then it is walked again); remove what is new.
        restore:
          isDirBefore && isDirAfter
            ? { action: "mode", path, mode: b!.mode & PERMISSION_BITS }
            : { action: "remove", path },
      });
    }

    if (gitAfter && !gitBefore && on("new-repositories")) {
      if (isDirBefore) frame.turnedGitLike = true;
      else {
        out.push({ path, change: "created", rule: "new-repositories", restore: { action: "remove", path } });
        frame.covered = true;
      }
    }
    if (parent?.turnedGitLike && !b && GIT_DIR_MARKERS.has(foldCase(name)) && on("new-repositories")) {
      out.push({ path, change: "created", rule: "new-repositories", restore: { action: "remove", path } });
    }
    // A .git that is not a directory: a gitdir pointer (or a symlink) sends git elsewhere.
    if (lower === ".git" && a && !isDirAfter && change && on("new-repositories")) {
      out.push({
        path,
        change,
        rule: "new-repositories",
        restore: b ? { action: "revert", path } : { action: "remove", path },
      });
    }
    // Any other git directory (bare, a submodule's, a worktree's) swapped for something else.
    if (gitBefore && lower !== ".git" && a && !isDirAfter && on("git-entry-kinds")) {
      out.push({
        path,
        change: "modified",
        rule: "git-entry-kinds",
        detail: `a git directory replaced by ${a.kind === "file" ? "a file" : `a ${a.kind}`}`,
        restore: { action: "revert", path },
      });
    }
    if (parent?.gitRoot !== undefined) out.push(...this.gitDataOrRefused(pair, parent.gitRoot, change, on));

    if (isDirAfter && on("directory-modes")) {
      const added = a!.mode & UNSAFE_DIRECTORY_BITS & ~(isDirBefore ? b!.mode : 0) & ~(inheritsSetgid ? 0o2000 : 0);
      if (added) {
        const mode = isDirBefore ? b!.mode & PERMISSION_BITS : a!.mode & PERMISSION_BITS & ~UNSAFE_DIRECTORY_BITS;
        out.push({ path, change: "mode", rule: "directory-modes", restore: { action: "mode", path, mode } });
      }
    }

    // A protected file judged unchanged may have gained another name: judged as changed, put back.
    const judged = change ?? (gainedName(b, a) ? "modified" : undefined);
    if (judged) {
      const change = judged;
      const protection = builtinProtectionOf(path, this.disabled);
      if (protection) {
        const existed = protection.scope === path ? b !== undefined : this.frameAt(protection.scope)?.existedBefore;
        out.push({
          path,
          change,
          rule: protection.rule,
          restore: existed
            ? { action: "revert", path: protection.scope }
            : { action: "remove", path: protection.scope },
        });
      }
      // The parent of a two-level protection (.config of .config/mise.toml) swapped for a symlink.
      const nested = a && !isDirAfter ? nestedProtectionParent(lower, this.disabled) : undefined;
      if (nested) out.push({ path, change, rule: nested, restore: { action: "remove", path } });
      out.push(...this.configPathViolations(pair, change, on));
      // A FIFO, socket or device where git opens a file in every worktree folder: the host's
      // `git status` (in every shell prompt and editor) blocked on it (review, session 24).
      if (a && BLOCKING_KINDS.has(a.kind) && GIT_READ_NAMES.has(lower) && on("git-entry-kinds"))
        out.push({
          path,
          change,
          rule: "git-entry-kinds",
          detail: `a ${a.kind} where host git reads ${name}: its git status would block on it`,
          restore: { action: "remove", path },
        });
      const nonDirectory = (a && !isDirAfter) || (b && !isDirBefore);
      if (this.callerProtected && nonDirectory && this.callerProtected(path)) {
        const wasFile = b !== undefined && !isDirBefore;
        out.push({
          path,
          change,
          rule: "protectedPaths",
          restore: wasFile ? { action: "revert", path } : { action: "remove", path },
        });
      }
      // Not of what is never handed back: a branch leaves an ignored `.venv` the sandbox changed as the host has it.
      const fileReport =
        ((a && !isDirAfter) || (b && !isDirBefore)) && !this.neverHandedBack(path) ? hostRunReportOf(path) : undefined;
      const nameReport = !fileReport && change === "created" && hostReached ? trickyNameReport(path) : undefined;
      if (fileReport) this.hostRuns.add({ path, change, why: fileReport.why }, "file");
      else if (nameReport) this.hostRuns.add({ path, change, why: nameReport.why }, "name");
    }

    if (isDirBefore || isDirAfter) this.stack.push(frame);
    return out;
  }

  /**
   * Inside a git directory: what ordinary git work may change (git-metadata), and that what the
   * run created or changed is plain data (git-entry-kinds, git-modes) saying only what git
   * writes there (git-pointers). The object store is not kept, so its entries are removed or
   * get their mode back one by one; anything else reverts the whole git directory.
   */
  /**
   * gitData, and a git directory put back as a whole when judging one of its files threw: the
   * content checks parse what the sandbox wrote, and an exception there once skipped the whole
   * judgement's restore (a 10 KB index 5,000 folders deep overflowed the stack; review, session 24).
   */
  private gitDataOrRefused(
    pair: EntryPair,
    root: string,
    change: Change | undefined,
    on: (rule: string) => boolean,
  ): Violation[] {
    try {
      return this.gitData(pair, root, change, on);
    } catch (error) {
      return [
        {
          path: pair.path,
          change: change ?? "modified",
          rule: "git-metadata",
          detail: `could not be judged (${error instanceof Error ? error.message : String(error)})`,
          restore: { action: "revert", path: root },
        },
      ];
    }
  }

  private gitData(
    pair: EntryPair,
    root: string,
    change: Change | undefined,
    on: (rule: string) => boolean,
  ): Violation[] {
    const { path, before: b, after: a } = pair;
    const relative = root === "" ? path : path.slice(root.length + 1);
    const revert: RestoreStep = { action: "revert", path: root };
    const out: Violation[] = [];
    if (change && on("git-metadata") && !gitPathAllowed(relative)) {
      out.push({ path, change, rule: "git-metadata", restore: revert });
    }
    const wasFile = b?.kind === "file" || a?.kind === "file";
    if (change && wasFile && namesCommits(relative) && on(REF_RULE))
      this.gitWork.addPointer({ path, gitRoot: root, relative, change });
    if (!a) return out;
    const changed = change === "created" || change === "modified";
    const touched = b !== undefined && !sameMetadata(b, a);
    const problem = gitEntryProblem(relative, a, changed, touched);
    if (problem && on(problem.rule)) {
      const inStore = gitObjectStorePath(relative);
      const restore: RestoreStep = !inStore
        ? revert
        : problem.rule === "git-modes"
          ? { action: "mode", path, mode: a.mode & PERMISSION_BITS & ~UNSAFE_GIT_FILE_BITS }
          : { action: "remove", path, objectStore: true };
      out.push({ path, change: change ?? "modified", rule: problem.rule, detail: problem.detail, restore });
    }
    if (changed && a.kind === "file" && gitObjectStorePath(relative) && on(OBJECT_RULE)) {
      const listed = this.gitWork.addStore({ path, gitRoot: root, relative, change: change!, before: b, after: a });
      if (!listed)
        out.push({
          path,
          change: change!,
          rule: OBJECT_RULE,
          detail: `not checked: more than ${MAX_STORE_CHANGES} object files in one run`,
          restore: { action: "remove", path, objectStore: true },
        });
    }
    const format = changed && a.kind === "file" ? pointerFormatOf(relative) : undefined;
    if (format && on("git-pointers")) {
      const content = pair.content?.(POINTER_MAX_BYTES);
      const why =
        content === undefined
          ? `its content could not be read to check it (at most ${POINTER_MAX_BYTES / 1048576} MiB)`
          : pointerProblem(format, content);
      if (why) out.push({ path, change: change!, rule: "git-pointers", detail: why, restore: revert });
    }
    return out;
  }

  /** A path the repository's git config names (or a parent of one turned into a non-directory). */
  private configPathViolations(pair: EntryPair, change: Change, on: (rule: string) => boolean): Violation[] {
    if ((this.configPaths.size === 0 && this.commandFolders.size === 0) || !on("git-config-paths")) return [];
    const { path, before: b, after: a } = pair;
    const out: Violation[] = [];
    // The outermost named path wins: it is restored as a whole.
    let scope: string | undefined;
    for (let end = path.length; end > 0; end = path.lastIndexOf("/", end - 1))
      if (this.configPaths.has(path.slice(0, end))) scope = path.slice(0, end);
    let detail = scope === undefined ? undefined : this.configPaths.get(scope);
    // A host command's name in a command folder (node_modules/.bin/git): the file or link itself; a
    // folder of that name runs nothing (an agent's new `test/` in a workspace top on PATH was refused:
    // fix review, round 3, session 42).
    if (scope === undefined && (a ?? b)?.kind !== "directory") {
      const folder = commandFolderGuarding(path, this.commandFolders, this.hostCommands);
      if (folder) {
        scope = path;
        detail = folder.why;
      }
    }
    if (scope !== undefined) {
      const existed = scope === path ? b !== undefined : this.frameAt(scope)?.existedBefore;
      out.push({
        path,
        change,
        rule: "git-config-paths",
        detail,
        restore: existed ? { action: "revert", path: scope } : { action: "remove", path: scope },
      });
    }
    const below = this.configAncestors.get(path);
    if (below !== undefined && a && a.kind !== "directory") {
      out.push({
        path,
        change,
        rule: "git-config-paths",
        detail: noLongerADirectory(below),
        restore: { action: "remove", path },
      });
    }
    return out;
  }

  private isGitDir(lowerName: string, facts: EntryFacts, parent: Frame | undefined): boolean {
    return isGitDirectory(lowerName, facts, parent?.path, parent?.gitRoot);
  }

  private frameAt(path: string): Frame | undefined {
    for (let i = this.stack.length - 1; i >= 0; i--) if (this.stack[i]!.path === path) return this.stack[i];
    return undefined;
  }
}

/**
 * Whether a directory is a git directory: named .git (any case), or its names look like one
 * (a bare repository, .git/modules/<name>), or it is <gitdir>/worktrees/<name>.
 */
export function isGitDirectory(
  lowerName: string,
  facts: EntryFacts,
  parentPath: string | undefined,
  parentGitRoot: string | undefined,
): boolean {
  if (facts.kind !== "directory") return false;
  if (lowerName === ".git" || facts.gitLike) return true;
  if (parentGitRoot === undefined) return false;
  return parentPath === (parentGitRoot === "" ? "worktrees" : `${parentGitRoot}/worktrees`);
}

/**
 * A file the run gave another name (a hard link elsewhere in the tree: more than one link, and its
 * inode's status moved): same content, but the host's next write to the other name writes this
 * one (review, round 3, session 40: `ln .husky/pre-commit dist/notes.md`, then the host's `cp`
 * over dist/notes.md rewrote the hook, and the next commit ran it). Bind mode only: copy mode's
 * returned tree has no hard links.
 */
function gainedName(b: EntryFacts | undefined, a: EntryFacts | undefined): boolean {
  return a?.kind === "file" && b?.kind === "file" && (a.nlink ?? 1) > 1 && a.ctimeMs !== b.ctimeMs;
}

/** The rules over whole lists (copy mode: a returned tar against the host tree). */
export function evaluateWorkspaceRules(pairs: Iterable<EntryPair>, config: RuleConfig = {}): Violation[] {
  const evaluator = new RuleEvaluator(config);
  const out: Violation[] = [];
  for (const pair of pairs) for (const v of evaluator.visit(pair)) out.push(v);
  return out;
}

/**
 * Collects restore steps without repeats, so a million violations under one .git are one step.
 * Steps inside a scope that is removed or reverted as a whole are dropped.
 */
export class RestorePlan {
  private readonly steps = new Map<string, RestoreStep>();
  /** Steps beyond this are not kept; `overflowed` says so. */
  constructor(private readonly maxSteps = 100_000) {}
  overflowed = false;

  add(step: RestoreStep): void {
    const key = `${step.action === "mode" ? "mode" : "tree"}:${step.path}`;
    const existing = this.steps.get(key);
    // A revert also removes what is new; prefer it when two rules disagree about a path.
    if (existing && !(existing.action === "remove" && step.action === "revert")) return;
    if (!existing && this.steps.size >= this.maxSteps) {
      this.overflowed = true;
      return;
    }
    this.steps.set(key, step);
  }

  get size(): number {
    return this.steps.size;
  }

  /** Whether a step puts back or removes this path as a whole (or a folder above it). */
  covers(path: string): boolean {
    for (const step of this.steps.values())
      if (
        step.action !== "mode" &&
        !(step.action === "remove" && step.objectStore) &&
        (step.path === path || isInside(step.path, path))
      )
        return true;
    return false;
  }

  /**
   * Parents first (a directory's mode is put back before anything inside it is restored);
   * steps inside a scope that is removed or reverted as a whole are dropped.
   */
  ordered(): RestoreStep[] {
    const all = [...this.steps.values()].sort(
      (x, y) => x.path.length - y.path.length || Number(x.action === "mode") - Number(y.action === "mode"),
    );
    const trees = new Set<string>();
    const removed = new Set<string>();
    const out: RestoreStep[] = [];
    for (const step of all) {
      const inStore = step.action === "remove" && step.objectStore === true;
      if (coveredBy(inStore ? removed : trees, step.path)) continue;
      if (step.action !== "mode") trees.add(step.path);
      if (step.action === "remove") removed.add(step.path);
      out.push(step);
    }
    return out;
  }
}

function coveredBy(trees: ReadonlySet<string>, path: string): boolean {
  if (trees.size === 0) return false;
  if (trees.has(path) || (trees.has("") && path !== "")) return true;
  for (let i = path.indexOf("/"); i >= 0; i = path.indexOf("/", i + 1)) if (trees.has(path.slice(0, i))) return true;
  return false;
}
