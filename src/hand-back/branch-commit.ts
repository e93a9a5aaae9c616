// The branch hand-back: the host's own git commits the judged changes as one new commit on
// `sandbox-run/<run-id>`, parented on the commit HEAD named when the run started. Nothing of the
// sandbox is run or obeyed: its `.git` never comes back, content comes from the private staging
// directory (or the host's own file, checked by hash), blobs are written with
// `hash-object --no-filters`, the tree is built on a private index (read-tree of the base, then
// update-index --index-info), and commit-tree and update-ref do the rest, all with util/host-git.ts's
// configuration (no hooks, no fsmonitor, no signing program, no system or global config).
//
// What goes in: the base commit's tree, with every file and symlink the run created, changed or
// deleted taking its returned state (files 100644, or 100755 when the owner may execute them;
// symlinks 120000, their target as content). Files the run did not touch stay as in the base
// commit, even where the working tree had uncommitted changes when the run started (a file with
// such changes that the run also changed goes in whole). Left out, and reported: git metadata (any
// `.git` path), paths inside a submodule or a nested repository, files the base commit does not
// track that the repository's ignore rules exclude (its .gitignore files, .git/info/exclude and
// its own core.excludesFile: the rules of the working tree, which the sandbox never wrote; so
// `node_modules/` a run installed stays out, as `git add -A` would leave it; a path below a
// symlink of the working tree, which git cannot judge, goes in), and names git itself refuses.
// A git failure is a usage error that says nothing was written to the working tree.
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { HostGitError, type HostGitOptions, hostGit, hostGitText } from "../util/host-git.js";
import { LEFT_OUT_GIT_METADATA, LEFT_OUT_IGNORED } from "../util/left-out-reasons.js";
import type { HostTree } from "../workspace-transfer/host-tree.js";
import { copySentContent, type JudgedChange } from "../workspace-transfer/judged-changes.js";
import { parentOf } from "../workspace-transfer/tree-entry.js";
import { isGitMetadata, isGitName } from "./git-paths.js";
import { type HandBackBase, handBackBranch } from "./hand-back-base.js";

/** The identity of every hand-back commit: it is the host's commit of the sandbox's work, not the user's. */
export const HAND_BACK_IDENTITY = { name: "sandbox-run", email: "sandbox-run@localhost" } as const;
const LISTED_LEFT_OUT = 100;
const LISTED_FILES = 1000;

export interface BranchHandBack {
  mode: "branch";
  /** The new branch; absent when nothing the run changed goes into a commit. */
  branch?: string;
  /** The new commit. */
  commit?: string;
  /** The commit the run started from: the new commit's parent. */
  base: string;
  /** The repository's working tree. */
  repository: string;
  /** As `git diff --shortstat <base> <commit>`. */
  diffStat: { files: number; insertions: number; deletions: number };
  /** Per file (the first 1,000), as `git diff --numstat`; no line counts for a binary file. */
  files: Array<{ path: string; insertions?: number; deletions?: number; binary?: true }>;
  /** Changes left out of the commit, and why (the first 100; `leftOutCount` counts all). */
  leftOut: Array<{ path: string; reason: string }>;
  leftOutCount: number;
  /** Why `diffStat` and `files` hold no line counts (git's count of them ran past its deadline or failed). */
  uncounted?: string;
}

/** Which judged changes a branch commits and which it leaves out (with the reason), as branchSelection chose them. */
export interface BranchSelection {
  kept: readonly JudgedChange[];
  leftOut: ReadonlyArray<{ path: string; reason: string }>;
}

interface BranchCommitInput {
  base: HandBackBase;
  changes: readonly JudgedChange[];
  /**
   * The selection the returned tree's check was judged with (branchSelection): the commit leaves
   * out exactly what the check took for the host's own entries, and the ignore rules are not read
   * twice. Chosen here when absent.
   */
  selection?: BranchSelection;
  /** The tree as sent, and every path the returned tree has (for nested repositories). */
  sent: HostTree;
  returnedPaths: readonly string[];
  runId: string;
  /** The commit message. */
  message: string;
  /** A private folder of this run: the index, the content of links and mode-only changes. */
  privateDir: string;
  /** "the workspace /path", for messages. */
  what: string;
  now?: Date;
  /** The run's stop (the caller's Ctrl-C): no branch is left once it fired. */
  signal?: AbortSignal;
  /** Default LINE_COUNT_TIMEOUT_MS. */
  lineCountTimeoutMs?: number;
}

/**
 * How long git may count the new commit's lines. The branch exists by then: the count is for the
 * report only, and files of many short lines the sandbox rewrote make it slow (review, round 3,
 * session 39: one 16 MiB fixture, 141-508 s).
 */
export const LINE_COUNT_TIMEOUT_MS = 30_000;

/** A private work folder for host git over the repository (removed by the caller), and git's options there. */
function privateGit(input: { base: HandBackBase; privateDir: string; signal?: AbortSignal }): {
  work: string;
  git: HostGitOptions;
} {
  const work = fs.mkdtempSync(path.join(input.privateDir, "branch-"));
  const home = path.join(work, "home");
  const emptyTree = path.join(work, "work-tree");
  fs.mkdirSync(home, { mode: 0o700 });
  fs.mkdirSync(emptyTree, { mode: 0o700 });
  // The repository's objects and refs, a private index and an empty working tree: nothing of the
  // workspace is read by git but what is given to it.
  const git: HostGitOptions = {
    cwd: emptyTree,
    home,
    gitDir: input.base.gitDir,
    workTree: emptyTree,
    indexFile: path.join(work, "index"),
    ...(input.signal ? { signal: input.signal } : {}),
  };
  return { work, git };
}

/**
 * The changes a branch will commit and those it will leave out (git metadata, submodules, nested
 * repositories, untracked paths the repository ignores); commitChanges commits this selection. The returned
 * tree's check resolves links through the host's own entries there: after a checkout of the branch
 * the host has its own (second fix review, round 3, session 41: an ignored `node_modules` the
 * sandbox swapped for a link sent a committed link to `/etc/shadow`, judged inside the tree).
 */
export async function branchSelection(
  input: Pick<BranchCommitInput, "base" | "changes" | "sent" | "returnedPaths" | "privateDir" | "signal">,
): Promise<BranchSelection> {
  const { work, git } = privateGit(input);
  try {
    const leftOut: Array<{ path: string; reason: string }> = [];
    const kept = await selectChanges(input, git, leftOut);
    return { kept, leftOut };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

export async function commitChanges(input: BranchCommitInput): Promise<BranchHandBack> {
  const { work, git } = privateGit(input);
  try {
    return await commitWith(input, git, work);
  } catch (error) {
    input.signal?.throwIfAborted();
    if (!(error instanceof HostGitError)) throw error;
    throw new SandboxRunError(
      "not-applied",
      `The run's changes to ${input.what} could not be committed: ${error.message}. Nothing was written to the working tree.`,
      {
        hint: "Fix what git reports in the repository (a lock, the disk, its permissions) and run again.",
        cause: error,
      },
    );
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function commitWith(input: BranchCommitInput, git: HostGitOptions, work: string): Promise<BranchHandBack> {
  const { base } = input;
  const leftOut: Array<{ path: string; reason: string }> = [...(input.selection?.leftOut ?? [])];
  const kept = input.selection?.kept ?? (await selectChanges(input, git, leftOut));

  await hostGitText(["read-tree", base.commit], git);
  const blobs = await writeBlobs(kept, input, work, git);
  const zero = "0".repeat(base.objectFormat === "sha256" ? 64 : 40);
  const lines: string[] = [];
  for (const change of kept) if (!change.after) lines.push(`0 ${zero}\t${base.prefix}${change.path}`);
  kept.forEach((change, i) => {
    if (!change.after) return;
    const mode = change.after.kind === "symlink" ? "120000" : change.after.mode & 0o100 ? "100755" : "100644";
    lines.push(`${mode} ${blobs[i]}\t${base.prefix}${change.path}`);
  });
  const updated = await hostGit(["update-index", "-z", "--index-info"], {
    ...git,
    input: lines.map((l) => `${l}\0`).join(""),
  });
  if (updated.status !== 0) throw new HostGitError(["update-index"], updated);
  for (const line of updated.stderr.split("\n")) {
    const refused = /^Ignoring path (.*)$/.exec(line);
    if (refused) leftOut.push({ path: refused[1]!.slice(base.prefix.length), reason: "git refuses this path name" });
  }
  const tree = (await hostGitText(["write-tree"], git)).trim();
  const baseTree = (await hostGitText(["rev-parse", "--verify", `${base.commit}^{tree}`], git)).trim();
  const report: BranchHandBack = {
    mode: "branch",
    base: base.commit,
    repository: base.top,
    diffStat: { files: 0, insertions: 0, deletions: 0 },
    files: [],
    // The run's own work first (an edit inside a submodule), then the git metadata git's own work
    // leaves by the hundred: the list is cut, and what is lost must stay in it.
    leftOut: [
      ...leftOut.filter((l) => l.reason !== LEFT_OUT_GIT_METADATA),
      ...leftOut.filter((l) => l.reason === LEFT_OUT_GIT_METADATA),
    ].slice(0, LISTED_LEFT_OUT),
    leftOutCount: leftOut.length,
  };
  if (tree === baseTree) return report;

  const date = `@${Math.floor((input.now ?? new Date()).getTime() / 1000)} +0000`;
  const identity = {
    GIT_AUTHOR_NAME: HAND_BACK_IDENTITY.name,
    GIT_AUTHOR_EMAIL: HAND_BACK_IDENTITY.email,
    GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_NAME: HAND_BACK_IDENTITY.name,
    GIT_COMMITTER_EMAIL: HAND_BACK_IDENTITY.email,
    GIT_COMMITTER_DATE: date,
  };
  const commit = (
    await hostGitText(["commit-tree", "--no-gpg-sign", "-p", base.commit, "-F", "-", tree], {
      ...git,
      env: identity,
      input: input.message,
    })
  ).trim();
  const branch = handBackBranch(input.runId);
  input.signal?.throwIfAborted();
  // An empty old value: the ref must not exist yet, so no branch is ever overwritten.
  const created = await hostGit(
    ["update-ref", "-m", `sandbox-run: run ${input.runId}`, `refs/heads/${branch}`, commit, ""],
    git,
  );
  if (created.status !== 0) {
    throw new SandboxRunError(
      "not-applied",
      `The run's changes were committed (${commit.slice(0, 12)}), but the branch ${branch} could not be created: ${created.stderr.trim().split("\n").pop()}.`,
      {
        hint: `Nothing was overwritten. Create it yourself with \`git branch ${branch} ${commit}\` once the problem is fixed.`,
      },
    );
  }
  try {
    const stat = await numstat(base.commit, commit, base.prefix, {
      ...git,
      // No index: the private one holds the new commit, whose .gitattributes (the sandbox's: `*.sh
      // diff`) git would read, and a file with a NUL byte was counted as lines, not as binary
      // (review, session 45). The working tree is empty: no attributes are read at all.
      indexFile: path.join(work, "no-index"),
      timeoutMs: input.lineCountTimeoutMs ?? LINE_COUNT_TIMEOUT_MS,
    });
    input.signal?.throwIfAborted();
    return { ...report, branch, commit, ...stat };
  } catch (error) {
    if (input.signal?.aborted) {
      // Stopped after the branch was made: it goes again (only if it still names this commit).
      const { signal: _stopped, ...unstopped } = git;
      await hostGit(["update-ref", "-d", `refs/heads/${branch}`, commit], unstopped);
      throw input.signal.reason;
    }
    // The branch is made: its line counts are the report's, never a reason to call it not committed.
    const counted = { files: kept.filter((c) => !isGitMetadata(c.path)).length, insertions: 0, deletions: 0 };
    return { ...report, branch, commit, diffStat: counted, uncounted: (error as Error).message };
  }
}

/** The changes that go into the commit; the rest are added to `leftOut` with the reason. */
async function selectChanges(
  input: Pick<BranchCommitInput, "base" | "changes" | "sent" | "returnedPaths" | "signal">,
  git: HostGitOptions,
  leftOut: Array<{ path: string; reason: string }>,
): Promise<JudgedChange[]> {
  const { base } = input;
  // Nested repositories: a directory of the workspace holding a `.git` (other than the top's).
  const nested = new RootTree();
  for (const rel of [...input.sent.entries.map((e) => e.path), ...input.returnedPaths]) {
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    if (rel.includes("/") && isGitName(name)) nested.add(parentOf(rel));
  }
  const listing = await hostGit(
    ["ls-tree", "-r", "-z", "--full-tree", base.commit, ...(base.prefix ? [base.prefix] : [])],
    git,
  );
  if (listing.status !== 0) throw new HostGitError(["ls-tree"], listing);
  const tracked = new Set<string>();
  const submodules = new RootTree();
  for (const record of listing.stdout.toString("utf8").split("\0")) {
    const tab = record.indexOf("\t");
    if (tab < 0) continue;
    const repoPath = record.slice(tab + 1);
    if (!repoPath.startsWith(base.prefix)) continue;
    const rel = repoPath.slice(base.prefix.length);
    tracked.add(rel);
    if (record.startsWith("160000 ")) submodules.add(rel);
  }
  const candidates: JudgedChange[] = [];
  for (const change of input.changes) {
    const reason = isGitMetadata(change.path) ? LEFT_OUT_GIT_METADATA : leftOutFor(change.path, submodules, nested);
    if (reason) leftOut.push({ path: change.path, reason });
    else candidates.push(change);
  }
  // Files the base does not track that the repository's ignore rules exclude stay out, as `git add -A`
  // would leave them. git cannot judge a path below a symlink of the working tree (the run made a
  // directory where the host has a link): those go in, visible in the commit.
  const belowLink = belowWorkingTreeLink(base);
  const untracked = candidates.filter((c) => c.after && !tracked.has(c.path) && !belowLink(c.path));
  const ignored = new Set<string>();
  if (untracked.length > 0) {
    const checked = await hostGit(["check-ignore", "-z", "--stdin", "--no-index"], {
      ...git,
      cwd: base.top,
      workTree: base.top,
      input: untracked.map((c) => `${base.prefix}${c.path}\0`).join(""),
    });
    if (checked.status !== 0 && checked.status !== 1) throw new HostGitError(["check-ignore"], checked);
    for (const repoPath of checked.stdout.toString("utf8").split("\0")) {
      if (repoPath) ignored.add(repoPath.slice(base.prefix.length));
    }
  }
  return candidates.filter((change) => {
    if (!change.after || tracked.has(change.path) || !ignored.has(change.path)) return true;
    leftOut.push({ path: change.path, reason: LEFT_OUT_IGNORED });
    return false;
  });
}

/** Whether a workspace path lies below a symlink of the host's working tree (each folder lstat'ed once). */
function belowWorkingTreeLink(base: HandBackBase): (rel: string) => boolean {
  const isLink = new Map<string, boolean>();
  const linked = (dir: string): boolean => {
    if (dir === "") return false;
    let known = isLink.get(dir);
    if (known === undefined) {
      const stat = fs.lstatSync(path.join(base.top, base.prefix, dir), { throwIfNoEntry: false });
      known = linked(parentOf(dir)) || stat?.isSymbolicLink() === true;
      isLink.set(dir, known);
    }
    return known;
  };
  return (rel) => linked(parentOf(rel));
}

/** Why a branch leaves out the change at `rel`: inside a submodule or a nested repository. */
function leftOutFor(rel: string, submodules: RootTree, nested: RootTree): string | undefined {
  const submodule = submodules.containing(rel, true);
  if (submodule !== undefined) return `inside the submodule ${submodule}`;
  const repository = nested.containing(rel, false);
  return repository === undefined ? undefined : `inside the nested repository ${repository}`;
}

/**
 * The roots (nested repositories, submodules) as a tree of path segments: a path is looked up in
 * one pass over its own segments. A scan of every root for every change was quadratic (~4 minutes
 * on 50,000 nested repositories), and a lookup of every ancestor folder by its text was quadratic
 * in the path's length (13 s for 2,000 paths 1,000 folders deep; review, session 45).
 */
class RootTree {
  readonly #children = new Map<string, RootTree>();
  #root?: string;

  add(root: string): void {
    let node: RootTree = this;
    for (const segment of root.split("/")) {
      let child = node.#children.get(segment);
      if (!child) node.#children.set(segment, (child = new RootTree()));
      node = child;
    }
    node.#root = root;
  }

  /** The deepest root that `rel` lies inside (or at, when `orAt`), if any. */
  containing(rel: string, orAt: boolean): string | undefined {
    if (this.#children.size === 0) return undefined;
    const segments = rel.split("/");
    let node: RootTree | undefined = this;
    let found: string | undefined;
    for (let i = 0; i < segments.length && node; i++) {
      node = node.#children.get(segments[i]!);
      if (node && node.#root !== undefined && (orAt || i < segments.length - 1)) found = node.#root;
    }
    return found;
  }
}

/** Writes one blob per change that has content (in order; "" for deletions) with `hash-object --no-filters`. */
async function writeBlobs(
  changes: readonly JudgedChange[],
  input: BranchCommitInput,
  work: string,
  git: HostGitOptions,
): Promise<string[]> {
  const files: string[] = [];
  const content = path.join(work, "content");
  fs.mkdirSync(content, { mode: 0o700 });
  const privateFile = (i: number, data?: string) => {
    const file = path.join(content, String(i));
    if (data !== undefined) fs.writeFileSync(file, data, { flag: "wx", mode: 0o600 });
    return file;
  };
  changes.forEach((change, i) => {
    const source = change.content;
    if (!change.after || !source) return;
    if (source.from === "target") files.push(privateFile(i, source.target));
    else if (source.from === "empty") files.push(privateFile(i, ""));
    else if (source.from === "sent") {
      const file = privateFile(i);
      copySentContent(input.sent, change.before!, input.what, file);
      files.push(file);
    } else {
      // The staging directory is private and its files were created by this process; still, git
      // reads a path given to it through links, so only a regular file is passed (and a name
      // with a newline, which --stdin-paths cannot carry, is copied first).
      if (!fs.lstatSync(source.file).isFile()) throw new Error(`${source.file} is not a regular file`);
      if (source.file.includes("\n")) {
        const copy = privateFile(i);
        fs.copyFileSync(source.file, copy, fs.constants.COPYFILE_EXCL);
        files.push(copy);
      } else files.push(source.file);
    }
  });
  const ids =
    files.length === 0
      ? []
      : (
          await hostGitText(["hash-object", "-w", "--no-filters", "--stdin-paths"], {
            ...git,
            input: files.map((f) => `${f}\n`).join(""),
          })
        )
          .trim()
          .split("\n");
  if (ids.length !== files.length)
    throw new Error(`git hash-object returned ${ids.length} ids for ${files.length} files`);
  let next = 0;
  return changes.map((change) => (change.after && change.content ? ids[next++]! : ""));
}

async function numstat(
  from: string,
  to: string,
  prefix: string,
  git: HostGitOptions,
): Promise<Pick<BranchHandBack, "diffStat" | "files">> {
  const out = await hostGitText(
    ["diff-tree", "-r", "-z", "--numstat", "--no-renames", "--no-ext-diff", "--no-textconv", from, to],
    git,
  );
  const files: BranchHandBack["files"] = [];
  const diffStat = { files: 0, insertions: 0, deletions: 0 };
  for (const record of out.split("\0")) {
    const match = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(record);
    if (!match) continue;
    const insertions = match[1] === "-" ? undefined : Number(match[1]);
    const deletions = match[2] === "-" ? undefined : Number(match[2]);
    diffStat.files++;
    diffStat.insertions += insertions ?? 0;
    diffStat.deletions += deletions ?? 0;
    if (files.length < LISTED_FILES) {
      const repoPath = match[3]!;
      files.push({
        path: repoPath.startsWith(prefix) ? repoPath.slice(prefix.length) : repoPath,
        // Binary to git: `git log -p` and review tools show no content for it, whatever it runs as
        // (review, session 35: a script given a NUL byte showed as "Binary files differ").
        ...(insertions !== undefined ? { insertions, deletions } : { binary: true as const }),
      });
    }
  }
  return { diffStat, files };
}
