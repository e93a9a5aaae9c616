// The rules a run's changes to a writable tree must keep, as a pure function over entries: the
// same pairs (path; facts before; facts after) come from the bind-mode walk of the host tree or,
// in copy mode, from the host tree and a returned tar, so both judge alike. Nothing here
// touches the filesystem.
//
// Input is in walk order (`comparePaths`: pre-order, parents before children) and includes
// unchanged entries, so the evaluator knows each path's ancestors (which directory is a git
// directory, which protected scope existed before) with a stack as deep as the tree, never a
// table as big as it.
import { compileGlobs, type PathMatcher } from "./path-glob.js";
import { builtinProtectionOf, GIT_DIR_MARKERS, gitPathAllowed } from "./builtin-protections.js";
import type { EntryKind } from "./fd-walk.js";

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
  /** Directories: their names look like a git directory (HEAD + objects + refs, or HEAD + commondir). */
  gitLike?: boolean;
  /** The walk could not see this entry or below it (a violation). */
  problem?: string;
}

export interface EntryPair {
  path: string;
  before?: EntryFacts;
  after?: EntryFacts;
}

export type Change = "created" | "modified" | "deleted";

/** How a violation is undone on the host. */
export type RestoreStep =
  /** The scope did not exist before: remove it (and all below). */
  | { action: "remove"; path: string }
  /** The scope existed before: make it what the kept copy says (git: leave the object store alone). */
  | { action: "revert"; path: string }
  /** Set a directory's permission bits. */
  | { action: "mode"; path: string; mode: number };

export interface Violation {
  path: string;
  change: Change | "mode" | "unreadable";
  /** A built-in protection's name, "protectedPaths", or "walk" (the walk could not see it). */
  rule: string;
  restore: RestoreStep;
  /** For "unreadable": what the walk said. */
  detail?: string;
}

export interface RuleConfig {
  /** Built-in protections the policy turns off, by name (BUILTIN_PROTECTION_NAMES). */
  disabled?: readonly string[];
  /** The caller's protectedPaths globs; apply to the workspace, not to extra writable roots. */
  protectedPaths?: readonly string[];
}

/** Bits that make a directory a place other local users can plant files in, or inherit a group from. */
export const UNSAFE_DIRECTORY_BITS = 0o2000 | 0o020 | 0o002;
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
}

export const lastName = (path: string) => path.slice(path.lastIndexOf("/") + 1);
export const isInside = (ancestor: string, path: string) =>
  ancestor === "" ? path !== "" : path.startsWith(ancestor) && path.charCodeAt(ancestor.length) === 47;

/**
 * Judges pairs one at a time, in walk order. `visit` returns the violations of that entry
 * (usually none); it keeps only a stack of ancestors.
 */
export class RuleEvaluator {
  private readonly stack: Frame[] = [];
  private readonly disabled: ReadonlySet<string>;
  private readonly callerProtected?: PathMatcher;

  constructor(config: RuleConfig = {}) {
    this.disabled = new Set(config.disabled ?? []);
    const globs = config.protectedPaths ?? [];
    this.callerProtected = globs.length > 0 ? compileGlobs(globs) : undefined;
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
    const gitBefore = isDirBefore && this.isGitDir(lower, b!, parent);
    const gitAfter = isDirAfter && this.isGitDir(lower, a!, parent);
    const frame: Frame = { path, existedBefore: b !== undefined, gitRoot: gitBefore ? path : parent?.gitRoot };

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
    if (parent?.turnedGitLike && !b && GIT_DIR_MARKERS.has(name) && on("new-repositories")) {
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
    if (change && parent?.gitRoot !== undefined && on("git-metadata")) {
      const root = parent.gitRoot;
      const relative = root === "" ? path : path.slice(root.length + 1);
      if (!gitPathAllowed(relative)) {
        out.push({ path, change, rule: "git-metadata", restore: { action: "revert", path: root } });
      }
    }

    if (isDirAfter && on("directory-modes")) {
      const added = a!.mode & UNSAFE_DIRECTORY_BITS & ~(isDirBefore ? b!.mode : 0);
      if (added) {
        const mode = isDirBefore ? b!.mode & PERMISSION_BITS : a!.mode & PERMISSION_BITS & ~UNSAFE_DIRECTORY_BITS;
        out.push({ path, change: "mode", rule: "directory-modes", restore: { action: "mode", path, mode } });
      }
    }

    if (change) {
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
    }

    if (isDirBefore || isDirAfter) this.stack.push(frame);
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

  /**
   * Parents first (a directory's mode is put back before anything inside it is restored);
   * steps inside a scope that is removed or reverted as a whole are dropped.
   */
  ordered(): RestoreStep[] {
    const all = [...this.steps.values()].sort(
      (x, y) => x.path.length - y.path.length || Number(x.action === "mode") - Number(y.action === "mode"),
    );
    const trees = new Set<string>();
    const out: RestoreStep[] = [];
    for (const step of all) {
      if (coveredBy(trees, step.path)) continue;
      if (step.action !== "mode") trees.add(step.path);
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
