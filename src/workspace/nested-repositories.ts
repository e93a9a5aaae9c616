// The git repositories anywhere in a tree the sandbox will see: a checkout inside the workspace
// (`actions/checkout` with `path: vendor/lib` and its default persist-credentials, a `pr/` folder
// beside the base branch), a linked worktree or submodule's `.git` file, a `.git` that is a link, a
// bare repository (the tree itself too). Their config files are files the sandbox reads like any
// other, so a token one of them keeps is found before the run starts
// (run/plan/git-credentials.ts), not only the top repository's (review, session 34: a PAT in
// `vendor/lib/.git/config` reached the model, the PR comment and the step summary).
//
// Found by what a folder holds, as git finds them: the walk reads directory entries with their
// types (no stat per entry, no link followed), does not descend into a `.git` folder (the scan of
// its config reads its includes, `modules/` and `worktrees/`), looks inside a bare repository but
// for its objects (a folder that only looks bare, four files a change can commit, hid a checkout
// below it; review, session 34), and yields to the event loop now and then, since it runs in the
// controller beside other runs' streams. A folder it may enter but not list is refused, never
// passed over: the sandbox (the caller's uid, or one lent the tree) reads a path in it by name.
// The same walk lists the unix sockets it passes, `.git` folders and objects included, where it
// looks for no repository (run/plan/lent-sockets.ts: review, session 38).
import fs from "node:fs";
import path from "node:path";

export interface NestedRepository {
  /** The folder the repository's files are read within (its work tree, or the bare repository itself). */
  workTree: string;
  /** A bare repository's git directory (itself); absent for a work tree's `.git` (dir, file or link). */
  gitDir?: string;
}

export interface FoundRepositories {
  repositories: NestedRepository[];
  /** The walk stopped at its entry or repository budget: what lies past it is unknown. */
  cut: boolean;
  /** A folder the walk could enter but not list (its mode, a name too long): what it holds is unknown. */
  unlistable?: { dir: string; code: string };
  entries: number;
  /** Every unix socket in the folders it listed (paths). */
  sockets: string[];
}

/** Directory entries one walk reads at most (the snapshot of a tree holds at most 2,000,000 names too). */
export const MAX_WALKED_ENTRIES = 2_000_000;
/** Repositories one walk reports at most. */
export const MAX_REPOSITORIES = 10_000;
const YIELD_EVERY = 5_000;

/** git's own test of a git directory: HEAD, and objects and refs (or a commondir), of any kind (a link too). */
function isBareRepository(names: ReadonlySet<string>): boolean {
  return names.has("HEAD") && ((names.has("objects") && names.has("refs")) || names.has("commondir"));
}

/** Whether this process may enter `dir` (search permission): then so may a path in it be read by name. */
function enterable(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Every repository in `root` (its own top repository included, the root itself when bare), within
 * the budgets.
 */
export async function findRepositories(
  root: string,
  limits: {
    maxEntries?: number;
    maxRepositories?: number;
    signal?: AbortSignal;
    /** Walk git directories and bare repositories' objects too, for sockets (a bind-mode run's check). */
    intoGitDirs?: boolean;
  } = {},
): Promise<FoundRepositories> {
  const maxEntries = limits.maxEntries ?? MAX_WALKED_ENTRIES;
  const maxRepositories = limits.maxRepositories ?? MAX_REPOSITORIES;
  const repositories: NestedRepository[] = [];
  const sockets: string[] = [];
  // `findsRepositories` false: inside a git directory or a bare repository's objects, where only sockets are looked for.
  const stack = [{ dir: root, findsRepositories: true }];
  let entries = 0;
  let sinceYield = 0;
  while (stack.length > 0) {
    const { dir, findsRepositories } = stack.pop()!;
    let listed: fs.Dirent[];
    try {
      // Synchronous, in slices between yields: one readdir is short, and the async form cost twice
      // the time (73,000 entries: 0.7 s against 0.2 s here).
      listed = fs.readdirSync(dir, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "error";
      // Gone since its parent was listed, or a file (the root may be one): nothing to look into.
      if (code === "ENOENT" || code === "ENOTDIR") continue;
      // Neither listed nor entered: a path in it cannot be read by this uid either.
      if ((code === "EACCES" || code === "EPERM") && !enterable(dir)) continue;
      return { repositories, cut: false, unlistable: { dir, code }, entries, sockets };
    }
    entries += listed.length;
    sinceYield += listed.length;
    if (entries > maxEntries) return { repositories, cut: true, entries, sockets };
    if (sinceYield >= YIELD_EVERY) {
      sinceYield = 0;
      limits.signal?.throwIfAborted();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const bare = findsRepositories && isBareRepository(new Set(listed.map((d) => d.name)));
    if (bare) {
      repositories.push({ workTree: dir, gitDir: dir });
      if (repositories.length > maxRepositories) return { repositories, cut: true, entries, sockets };
    }
    for (const entry of listed) {
      if (entry.isSocket()) sockets.push(path.join(dir, entry.name));
      // Git's own name; on a case-insensitive disk `.GIT` is the same folder to the host's git.
      // A folder, a `gitdir:` file or a link to either: git follows all three. The scan of its
      // config reads its includes, `modules/` and `worktrees/`: here it is walked for sockets only.
      if (findsRepositories && entry.name.toLowerCase() === ".git") {
        if (entry.isDirectory() || entry.isFile() || entry.isSymbolicLink()) {
          repositories.push({ workTree: dir });
          if (repositories.length > maxRepositories) return { repositories, cut: true, entries, sockets };
        }
        if (entry.isDirectory() && limits.intoGitDirs)
          stack.push({ dir: path.join(dir, entry.name), findsRepositories: false });
        continue;
      }
      // A bare repository's objects are content, named by their hashes: no repository there.
      const content = bare && entry.name === "objects";
      if (content && !limits.intoGitDirs) continue;
      if (entry.isDirectory())
        stack.push({ dir: path.join(dir, entry.name), findsRepositories: findsRepositories && !content });
    }
  }
  return { repositories, cut: false, entries, sockets };
}
