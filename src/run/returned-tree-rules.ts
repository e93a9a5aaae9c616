// Copy mode judges a returned tree with the same rules as bind mode's walk of the host tree
// (workspace/workspace-rules.ts: git safety, the built-in protections, the policy's protectedPaths,
// the paths the repositories' git config names): the tree sent in and the tree that came back
// become the rule engine's (before, after) pairs, so a violation is found before anything reaches
// the host. Entries the reader left out for their kind (FIFOs, devices) are judged as what they
// were, and a pointer file is judged by the content that came back.
//
// What the repositories' config names is resolved here, when the check runs, from the host's
// files: in copy mode the sandbox never wrote them, so they are still what they were before the
// run (a change the caller made meanwhile fails the apply anyway).
//
// Then the git checks that read content (workspace/git-checks.ts): the object-store files that came
// back are read from their private staged copies and checked against their names, the refs and
// index that came back are judged by what they make host git write (the host's git reading a
// private repository whose stores are the host's own objects and links to the staged new ones), and
// the caches derived from objects (commit-graph, ...) that came back new or changed are left out of
// the apply (the host's own copy is removed with them). Nothing of it touches the host tree.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { GitChecks } from "../workspace/git-checks.js";
import { objectFormatOf } from "../workspace/git-object-store.js";
import type { GitAccess, WorktreeEntry } from "../workspace/git-work.js";
import type { RuleConfig, Violation } from "../workspace/workspace-rules.js";
import {
  type EntryFacts,
  type EntryPair,
  isGitDirectory,
  isInside,
  RuleEvaluator,
} from "../workspace/workspace-rules.js";
import { looksLikeGitDir } from "../workspace/fd-walk.js";
import { configTargets, repositoriesOf, targetsInTree } from "../workspace/git-config-paths.js";
import {
  comparePaths,
  type ReturnedTreeCheck,
  type ReturnedTreeFacts,
  type TreeEntry,
} from "../workspace-transfer/tree-entry.js";

const TYPE_BITS = { file: 0o100000, directory: 0o040000, symlink: 0o120000 } as const;

export interface ReturnedRulesConfig extends RuleConfig {
  /** Every tree the run was lent (absolute): the repositories they are in count for each of them. */
  lentRoots?: readonly string[];
  /**
   * A folder in the run's private folder for the git checks' scratch files (created when needed);
   * without it the checks use one in the system's temp folder.
   */
  scratch?: string;
}

export function workspaceRulesCheck(config: ReturnedRulesConfig): ReturnedTreeCheck {
  return async (before, after, root, returned) => {
    // The policy's own globs are workspace paths; the built-in protections apply to every root.
    const rules: RuleConfig = {
      ...config,
      ...gitConfigRules(before, root.hostPath, config),
      ...(root.kind === "workspace" ? {} : { protectedPaths: [] }),
    };
    const evaluator = new RuleEvaluator(rules);
    const violations: Violation[] = [];
    for (const pair of pairsOf(before, after, returned)) violations.push(...evaluator.visit(pair));
    const work = evaluator.gitWork;
    if (returned && (work.store.length > 0 || work.pointers.length > 0 || work.pointerOverflow.size > 0)) {
      // What git objects and refs came back, checked before anything reaches the host.
      const scratch = makeScratch(config.scratch);
      try {
        const refused = (gitRoot: string) => violations.some((v) => v.path === gitRoot || isInside(gitRoot, v.path));
        const access = copyGitAccess(root.hostPath, before, after, returned, scratch.dir);
        const checked = await new GitChecks(rules).run(work, access, refused);
        violations.push(...checked.violations);
        returned.leaveOut?.(checked.derived);
      } finally {
        scratch.remove();
      }
    }
    return violations.map(({ path, change, rule, detail }) => ({
      path,
      change,
      rule,
      ...(detail !== undefined ? { detail } : {}),
    }));
  };
}

/** A private scratch folder for one check (removed after it). */
function makeScratch(parent: string | undefined): { dir: string; remove(): void } {
  if (parent) fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  const dir = fs.mkdtempSync(path.join(parent ?? os.tmpdir(), "git-checks-"));
  // Removed in the background: its folder goes with the run's private folder anyway.
  return { dir, remove: () => void fs.promises.rm(dir, { recursive: true, force: true }).catch(() => {}) };
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
/** What a worktree file before the run may be read up to, to compare it with a commit's blob. */
const WORKTREE_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Copy mode's way to the files the git checks read: the returned tree through its private staged
 * copies (or the host's own file where it came back unchanged), the tree before the run from the
 * host, which the sandbox never wrote.
 */
function copyGitAccess(
  hostPath: string,
  before: readonly TreeEntry[],
  after: readonly TreeEntry[],
  returned: ReturnedTreeFacts,
  scratch: string,
): GitAccess {
  const beforeOf = new Map(before.map((e) => [e.path, e]));
  const afterOf = new Map(after.map((e) => [e.path, e]));
  const hostFile = (rel: string, maxBytes: number) => readNoFollow(path.join(hostPath, rel), maxBytes);
  const access: GitAccess = {
    scratch,
    open(rel) {
      const entry = afterOf.get(rel);
      const file = entry?.kind === "file" ? returned.contentFile?.(rel) : undefined;
      return file === undefined ? undefined : openNoFollow(file);
    },
    before(rel, maxBytes) {
      const entry = beforeOf.get(rel);
      if (!entry) return null;
      return entry.kind === "file" && entry.size <= maxBytes ? hostFile(rel, maxBytes) : undefined;
    },
    beforeSize: (rel) => beforeOf.get(rel)?.size,
    listBefore(treePath) {
      const prefix = treePath === "" ? "" : `${treePath}/`;
      return before.filter((e) => e.kind === "file" && e.path.startsWith(prefix)).map((e) => e.path);
    },
    after(rel, maxBytes) {
      const entry = afterOf.get(rel);
      if (!entry) return null;
      return entry.kind === "file" ? returned.contentOf(rel, maxBytes) : undefined;
    },
    worktreeBefore(rel): WorktreeEntry | null | undefined {
      const entry = beforeOf.get(rel);
      if (!entry || entry.kind === "directory") return null;
      if (entry.kind === "symlink") return { mode: 0o120000, content: Buffer.from(entry.target ?? "") };
      const content = hostFile(rel, WORKTREE_MAX_BYTES);
      return content && { mode: entry.mode & 0o100 ? 0o100755 : 0o100644, content };
    },
    stores(gitRoot, changes) {
      // The run's new packs, linked by their names in a private folder; its loose objects, to be
      // added to the private repository; then the host's own store.
      const fileOf = (relative: string) => {
        const rel = gitRoot === "" ? relative : `${gitRoot}/${relative}`;
        return afterOf.get(rel)?.kind === "file" ? returned.contentFile?.(rel) : undefined;
      };
      const dir = fs.mkdtempSync(path.join(scratch, "new-packs-"));
      const loose: Array<{ oid: string; file: string }> = [];
      for (const change of changes) {
        const pack = /^objects\/pack\/(pack-[^/]+)\.(pack|idx)$/.exec(change.relative);
        const object = /^objects\/([0-9a-f]{2})\/([0-9a-f]{38}|[0-9a-f]{62})$/.exec(change.relative);
        if (pack) {
          fs.mkdirSync(path.join(dir, "pack"), { recursive: true, mode: 0o700 });
          for (const ext of ["pack", "idx"]) {
            const file = fileOf(`objects/pack/${pack[1]}.${ext}`);
            const at = path.join(dir, "pack", `${pack[1]}.${ext}`);
            if (file !== undefined && !fs.existsSync(at)) fs.symlinkSync(file, at);
          }
        } else if (object) {
          const file = fileOf(change.relative);
          if (file !== undefined) loose.push({ oid: object[1]! + object[2]!, file });
        }
      }
      const own = path.join(hostPath, gitRoot, "objects");
      return {
        stores: [{ path: dir }, ...(fs.existsSync(own) ? [{ path: own }] : [])],
        loose,
        close: () => {},
      };
    },
    format: (gitRoot) => objectFormatOf(access.before(gitRoot === "" ? "config" : `${gitRoot}/config`, 1024 * 1024)),
  };
  return access;
}

function openNoFollow(file: string): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  if (fs.fstatSync(fd).isFile()) return fd;
  fs.closeSync(fd);
  return undefined;
}

function readNoFollow(file: string, maxBytes: number): Buffer | null | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? null : undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    const buffer = Buffer.alloc(stat.size);
    let at = 0;
    while (at < buffer.length) {
      const n = fs.readSync(fd, buffer, at, buffer.length - at, at);
      if (n === 0) break;
      at += n;
    }
    return buffer.subarray(0, at);
  } finally {
    fs.closeSync(fd);
  }
}

/** The git directories only a pointer names, and the paths the repositories' config names, in this tree. */
function gitConfigRules(
  before: readonly TreeEntry[],
  hostPath: string,
  config: ReturnedRulesConfig,
): Pick<RuleConfig, "gitDirs" | "configPaths"> {
  const found = gitDirectoriesOf(before);
  const absolute = (rel: string) => (rel === "" ? hostPath : path.join(hostPath, rel));
  const repositories = repositoriesOf({
    roots: config.lentRoots ?? [hostPath],
    gitDirs: found.gitDirs.map(absolute),
    pointerFiles: found.pointerFiles.map(absolute),
  });
  const known = new Set(found.gitDirs);
  const gitDirs: string[] = [];
  for (const repo of repositories)
    for (const dir of new Set([repo.gitDir, repo.commonDir])) {
      const rel = dir === hostPath ? "" : dir.startsWith(`${hostPath}/`) ? dir.slice(hostPath.length + 1) : undefined;
      if (rel !== undefined && !known.has(rel)) {
        known.add(rel);
        gitDirs.push(rel);
      }
    }
  const disabled = config.disabled?.includes("git-config-paths") === true;
  return {
    gitDirs,
    configPaths: disabled ? new Map() : targetsInTree(hostPath, configTargets(repositories)),
  };
}

/** Git directories of a tree (by the same test as the walk's) and its `.git` files and `commondir` files. */
function gitDirectoriesOf(entries: readonly TreeEntry[]): { gitDirs: string[]; pointerFiles: string[] } {
  const sorted = [...entries].sort((x, y) => comparePaths(x.path, y.path));
  const gitLike = gitLikeDirectories(sorted);
  const stack: Array<{ path: string; gitRoot?: string }> = [];
  const gitDirs: string[] = [];
  const pointerFiles: string[] = [];
  for (const entry of sorted) {
    while (stack.length > 0 && !isInside(stack[stack.length - 1]!.path, entry.path)) stack.pop();
    const parent = stack[stack.length - 1];
    const name = entry.path.slice(entry.path.lastIndexOf("/") + 1).toLowerCase();
    if (entry.kind === "directory") {
      const facts: EntryFacts = { kind: "directory", mode: 0, size: 0, gitLike: gitLike.has(entry.path) };
      const isGit = isGitDirectory(name, facts, parent?.path, parent?.gitRoot);
      if (isGit) gitDirs.push(entry.path);
      stack.push({ path: entry.path, gitRoot: isGit ? entry.path : parent?.gitRoot });
    } else if (entry.kind === "file") {
      if (name === ".git") pointerFiles.push(entry.path);
      const root = parent?.gitRoot;
      if (root !== undefined && entry.path === (root === "" ? "commondir" : `${root}/commondir`))
        pointerFiles.push(entry.path);
    }
  }
  return { gitDirs, pointerFiles };
}

/** Both lists merged in walk order into (path; before; after), unchanged entries included. */
function* pairsOf(
  before: readonly TreeEntry[],
  after: readonly TreeEntry[],
  returned: ReturnedTreeFacts | undefined,
): Generator<EntryPair> {
  const b = [...before].sort((x, y) => comparePaths(x.path, y.path));
  // What the reader left out for its kind came back too: as a FIFO or a device.
  const refused = [...(returned?.refusedKinds ?? [])].map(([path, kind]) => ({ path, refusedKind: kind }));
  const a = [...after, ...refused].sort((x, y) => comparePaths(x.path, y.path));
  const gitLikeBefore = gitLikeDirectories(b);
  const gitLikeAfter = gitLikeDirectories(a);
  let i = 0;
  let j = 0;
  while (i < b.length || j < a.length) {
    const order = i >= b.length ? 1 : j >= a.length ? -1 : comparePaths(b[i]!.path, a[j]!.path);
    const path = order <= 0 ? b[i]!.path : a[j]!.path;
    const pair: EntryPair = { path };
    if (order <= 0) pair.before = factsOf(b[i++]!, gitLikeBefore);
    if (order >= 0) {
      const entry = a[j++]!;
      pair.after =
        "refusedKind" in entry ? { kind: entry.refusedKind, mode: 0, size: 0 } : factsOf(entry, gitLikeAfter);
      if (returned && pair.after.kind === "file") pair.content = (maxBytes) => returned.contentOf(path, maxBytes);
    }
    yield pair;
  }
}

function factsOf(entry: TreeEntry, gitLike: ReadonlySet<string>): EntryFacts {
  return {
    kind: entry.kind,
    mode: TYPE_BITS[entry.kind] | (entry.modeAsReturned ?? entry.mode),
    size: entry.size,
    ...(entry.hash !== undefined ? { hash: entry.hash } : {}),
    mtimeMs: entry.mtimeMs,
    ...(entry.kind === "directory" && gitLike.has(entry.path) ? { gitLike: true } : {}),
  };
}

/** Directories whose children look like a git directory (HEAD + objects + refs, or HEAD + commondir). */
function gitLikeDirectories(entries: ReadonlyArray<{ path: string }>): Set<string> {
  const children = new Map<string, string[]>();
  for (const { path } of entries) {
    if (path === "") continue;
    const slash = path.lastIndexOf("/");
    const parent = slash < 0 ? "" : path.slice(0, slash);
    const names = children.get(parent) ?? [];
    names.push(path.slice(slash + 1));
    children.set(parent, names);
  }
  const out = new Set<string>();
  for (const [dir, names] of children) if (looksLikeGitDir(names)) out.add(dir);
  return out;
}
