// The PATH the host's own programs are found on (git for the checks, the branch and the record's
// patch, diff, tar and umount for image builds, the opener of `show --open`, a models.json
// `!command`'s shell). They ran by name on the caller's PATH, and a caller's PATH often holds a
// folder of a tree the sandbox writes: direnv's `PATH_add bin`, `npm run`'s `node_modules/.bin`, a
// CI step's `$GITHUB_PATH`, a relative or empty entry (the working directory, usually the
// workspace). The sandbox's `bin/git` then ran as the caller (root), with the controller's
// environment readable under /proc, during the run's own checks, before anything was put back
// (review, session 26). So the search path keeps only absolute folders that lie, links resolved,
// in no tree a run of this process has lent (remembered for the process's life: what a sandbox left
// there stays there after its run).
import path from "node:path";
import { passesThrough } from "./passes-through.js";
import { resolvedPath } from "./resolved-path.js";

/** Where a PATH holds nothing usable: the usual system folders. */
const FALLBACK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Real paths of every tree a run of this process has lent (process-wide: the trees are the host's). */
const lentTrees = new Set<string>();

/** Remembers trees a run lends to its sandbox (canonical paths), from before it holds them. */
export function rememberLentTrees(trees: readonly string[]): void {
  for (const tree of trees) lentTrees.add(resolvedPath(tree));
}

/**
 * The caller's PATH without relative or empty entries and without folders inside a lent tree (or
 * leading into one through a link); the system folders when nothing is left.
 */
export function hostSearchPath(callerPath: string | undefined = process.env.PATH): string {
  // Judged at every call, never cached: a link on the way may lead elsewhere since the last one.
  const kept = (callerPath ?? "")
    .split(path.delimiter)
    .filter((entry) => path.isAbsolute(entry) && !insideLentTree(entry));
  return kept.length > 0 ? [...new Set(kept)].join(path.delimiter) : FALLBACK_PATH;
}

/** The caller's environment with its PATH replaced by hostSearchPath(). */
export function hostProgramEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...env, PATH: hostSearchPath(env.PATH) };
}

function insideLentTree(entry: string): boolean {
  // Folder by folder: a link in a lent tree that leads out today (`.venv -> /opt/venv`) is the
  // sandbox's to point elsewhere before the next call (review, session 26).
  return passesThrough(entry, lentTrees);
}
