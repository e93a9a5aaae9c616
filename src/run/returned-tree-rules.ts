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
import { isGitMetadata } from "../hand-back/git-paths.js";
import { timeSlices } from "../util/stepwise.js";
import { configEntriesOf, configuredTargets } from "../workspace/config-folders.js";
import { looksLikeGitDir } from "../workspace/fd-walk.js";
import { GitChecks } from "../workspace/git-checks.js";
import {
  type ConfigTarget,
  commandFoldersInTree,
  isBorrowedStoreDetail,
  repositoriesOf,
  targetsInTree,
} from "../workspace/git-config-paths.js";
import { ObjectChecker, PackTimeBudget } from "../workspace/git-object-check.js";
import { GitWork } from "../workspace/git-work.js";
import type { RuleConfig, Violation } from "../workspace/workspace-rules.js";
import {
  type EntryFacts,
  type EntryPair,
  isGitDirectory,
  isInside,
  RuleEvaluator,
} from "../workspace/workspace-rules.js";
import {
  comparePaths,
  type ReturnedTreeCheck,
  type ReturnedTreeFacts,
  type TreeEntry,
} from "../workspace-transfer/tree-entry.js";
import { copyGitAccess } from "./copy-mode/returned-git-access.js";

const TYPE_BITS = { file: 0o100000, directory: 0o040000, symlink: 0o120000 } as const;

interface ReturnedRulesConfig extends RuleConfig {
  /** Every tree the run was lent (absolute): the repositories they are in count for each of them. */
  lentRoots?: readonly string[];
  /**
   * A folder in the run's private folder for the git checks' scratch files (created when needed);
   * without it the checks use one in the system's temp folder.
   */
  scratch?: string;
  /**
   * The run's stop (the caller's signal): as in bind mode, new packs then get the stop's grace in
   * all, and those not verified by its end are refused unchecked.
   */
  signal?: AbortSignal;
  /** The run's budget for verifying packs (default: PackTimeBudget's), shared by all its trees. */
  packTime?: PackTimeBudget;
  /**
   * False for a branch or patch hand-back, which never carries the workspace's `.git` folders: their
   * objects and refs are not read (a pack's `index-pack` could hold the host up to 10 minutes for a
   * verdict thrown away; red-team review, round 3, session 39). Git directories under other names (a
   * bare `mirror.git/` in the worktree) and the writable roots are still checked: they are handed back.
   */
  handsBackGitFolders?: boolean;
}

export function workspaceRulesCheck(config: ReturnedRulesConfig): ReturnedTreeCheck {
  // One budget for verifying packs for the whole run, over all its returned trees (as bind mode's
  // watch): per tree, a run lending many trees multiplied the time the judgement could be held.
  const packTime = config.packTime ?? new PackTimeBudget();
  // What the configs of all lent trees name, read once per run from the host's files (as they were).
  let shared: SharedConfig | undefined;
  const check: ReturnedTreeCheck = async (before, after, root, returned, lent, leftOut) => {
    shared ??= sharedConfig(lent ?? [{ hostPath: root.hostPath, entries: before }], config);
    // The policy's own globs are workspace paths; the built-in protections apply to every root.
    const rules: RuleConfig = {
      ...config,
      ...gitConfigRules(before, root.hostPath, shared),
      ...(root.kind === "workspace" ? {} : { protectedPaths: [] }),
      // A branch or patch hand-back carries no git-named folder of the workspace (hand-back/git-paths.ts),
      // and a branch none of what it leaves out (ignored paths, nested repositories, submodules).
      ...(config.handsBackGitFolders === false && root.kind === "workspace"
        ? { neverHandedBack: leftOut ? (p: string) => isGitMetadata(p) || leftOut(p) : isGitMetadata }
        : {}),
    };
    const evaluator = new RuleEvaluator(rules);
    const violations: Violation[] = [];
    // Other runs of this controller go on meanwhile: 150,000 entries took over a second (review, session 37).
    const pause = timeSlices();
    for (const pair of pairsOf(before, after, returned)) {
      for (const v of evaluator.visit(pair)) violations.push(v);
      await pause();
    }
    // What only the whole tree shows: a link the run made onto a protected path, links leading out.
    for (const v of await evaluator.finish()) violations.push(v);
    const work =
      config.handsBackGitFolders === false && root.kind === "workspace"
        ? carried(evaluator.gitWork)
        : evaluator.gitWork;
    if (returned && (work.store.length > 0 || work.pointers.length > 0 || work.pointerOverflow.size > 0)) {
      // What git objects and refs came back, checked before anything reaches the host.
      const scratch = makeScratch(config.scratch);
      try {
        const refused = (gitRoot: string) => violations.some((v) => v.path === gitRoot || isInside(gitRoot, v.path));
        const access = copyGitAccess(root.hostPath, before, after, returned, scratch.dir);
        const objects = new ObjectChecker(packTime, config.signal);
        const borrowedChanged = violations.some(
          (v) => v.rule === "git-config-paths" && isBorrowedStoreDetail(v.detail),
        );
        const checked = await new GitChecks(rules, objects).run(work, access, refused, borrowedChanged);
        for (const v of checked.violations) violations.push(v);
        returned.leaveOut?.(checked.derived);
      } finally {
        scratch.remove();
      }
    }
    return {
      violations: violations.map(({ path, change, rule, detail }) => ({
        path,
        change,
        rule,
        ...(detail !== undefined ? { detail } : {}),
      })),
      hostRun: evaluator.hostRun,
      hostRunCount: evaluator.hostRunCount,
    };
  };
  // Before the copy-in: configs naming more than the budget refuse the run before it starts.
  check.prepare = (lent) => {
    shared ??= sharedConfig(lent, config);
  };
  return check;
}

/** The git work of the git directories a hand-back carries: those whose path names no `.git`. */
function carried(work: GitWork): GitWork {
  const out = new GitWork();
  for (const root of work.gitRoots) out.gitRoots.add(root);
  for (const change of work.store) if (!isGitMetadata(change.gitRoot)) out.addStore(change);
  for (const change of work.pointers) if (!isGitMetadata(change.gitRoot)) out.addPointer(change);
  for (const root of work.pointerOverflow) if (!isGitMetadata(root)) out.pointerOverflow.add(root);
  return out;
}

/** A private scratch folder for one check (removed after it). */
function makeScratch(parent: string | undefined): { dir: string; remove(): void } {
  if (parent) fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  const dir = fs.mkdtempSync(path.join(parent ?? os.tmpdir(), "git-checks-"));
  // Removed in the background: its folder goes with the run's private folder anyway.
  return { dir, remove: () => void fs.promises.rm(dir, { recursive: true, force: true }).catch(() => {}) };
}

interface SharedConfig {
  repositories: ReturnType<typeof repositoriesOf>;
  targets: ConfigTarget[];
  /** The host's command names, read once if a folder guards them. */
  hostCommands: ReadonlySet<string>;
}

/**
 * The repositories of all lent trees and what their git config, environment files and hook, agent
 * and editor configs name (at each tree's and worktree's top and in the folders below holding
 * one), once over all of them as bind mode's watch does: per tree, a workspace `.envrc`'s
 * `PATH_add ../toolchain/bin` left a lent toolchain/ unguarded in copy mode (review, session 25).
 */
function sharedConfig(
  lent: ReadonlyArray<{ hostPath: string; entries: readonly TreeEntry[] }>,
  config: ReturnedRulesConfig,
): SharedConfig {
  const gitDirs: string[] = [];
  const pointerFiles: string[] = [];
  const folders: string[] = [];
  const links: string[] = [];
  // The workspace and writable roots, as bind mode reads them: a read-only mount is copied too but
  // is no tree of the repository's, and a PATH folder in one (a toolchain lent read-only) must keep
  // the host's command names it holds (review, session 26: they were dropped, and a planted
  // node_modules/.bin/<that name> was applied).
  const lentRoots = config.lentRoots;
  const disabled = config.disabled?.includes("git-config-paths") === true;
  const trees = lentRoots ? lent.filter((t) => lentRoots.includes(t.hostPath)) : lent;
  for (const tree of trees) {
    const absolute = (rel: string) => (rel === "" ? tree.hostPath : path.join(tree.hostPath, rel));
    const found = gitDirectoriesOf(tree.entries);
    gitDirs.push(...found.gitDirs.map(absolute));
    pointerFiles.push(...found.pointerFiles.map(absolute));
    // Nothing reads the configs with git-config-paths off: their number refuses nothing then.
    if (disabled) continue;
    const configs = configEntriesOf(tree.hostPath, tree.entries);
    folders.push(...configs.folders.map(absolute));
    links.push(...configs.links.map(absolute));
  }
  const roots = [...new Set([...(lentRoots ?? []), ...trees.map((t) => t.hostPath)])];
  const repositories = repositoriesOf({ roots, gitDirs, pointerFiles });
  const worktrees = repositories.flatMap((r) => (r.worktree ? [r.worktree] : []));
  const { targets, hostCommands } = disabled
    ? { targets: [], hostCommands: new Set<string>() }
    : configuredTargets(repositories, [...roots, ...worktrees, ...folders], roots, links);
  return { repositories, targets, hostCommands };
}

/** The git directories only a pointer names, and the paths the lent trees' configs name, in this tree. */
function gitConfigRules(
  before: readonly TreeEntry[],
  hostPath: string,
  shared: SharedConfig,
): Pick<RuleConfig, "gitDirs" | "configPaths" | "commandFolders" | "hostCommands"> {
  const known = new Set(gitDirectoriesOf(before).gitDirs);
  const gitDirs: string[] = [];
  for (const repo of shared.repositories)
    for (const dir of new Set([repo.gitDir, repo.commonDir])) {
      const rel = dir === hostPath ? "" : dir.startsWith(`${hostPath}/`) ? dir.slice(hostPath.length + 1) : undefined;
      if (rel !== undefined && !known.has(rel)) {
        known.add(rel);
        gitDirs.push(rel);
      }
    }
  return {
    gitDirs,
    configPaths: targetsInTree(hostPath, shared.targets),
    commandFolders: commandFoldersInTree(hostPath, shared.targets),
    hostCommands: shared.hostCommands,
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
  // One entry per path on each side, or the walk's folder stack is judged wrong (the reader
  // refuses a name twice; this holds whoever built the lists).
  for (const list of [b, a])
    for (let k = 1; k < list.length; k++)
      if (list[k]!.path === list[k - 1]!.path) throw new Error(`"${list[k]!.path}" appears twice in a tree`);
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
