// Where git in the sandbox will not find the workspace's repository: its `.git` is a file or a link
// naming a git directory outside what the run lends (a linked worktree, a submodule as the
// workspace, a bare repository's worktree), or its objects are borrowed from a store outside
// (`objects/info/alternates`: a `--shared` or `--reference` clone). The sandbox sees only the lent
// trees, so every git command there fails while the run goes on as if nothing were wrong (review,
// session 28). Read on the host before the run: a few small files, never followed past the tree.
import fs from "node:fs";
import path from "node:path";
import { atOrBelow } from "../util/path-inside.js";
import { readSmallFile } from "../util/read-fd.js";
import { realPathOr } from "../util/resolved-path.js";

const MAX_POINTER_BYTES = 4096;

/** A warning for the plan when the workspace's git directory or object store lies outside `lent`. */
export function gitDirOutsideWarning(
  workspace: string,
  lent: readonly string[],
  options: { mayLend?: boolean } = {},
): string | undefined {
  const inside = (p: string) => lent.some((root) => atOrBelow(p, root));
  const gitDir = gitDirOf(workspace);
  if (!gitDir) return undefined;
  // A branch or patch hand-back takes no writable roots: lending it is no way out there.
  const fix =
    options.mayLend === false
      ? "run in the main worktree (a branch or patch hand-back covers the workspace only, so the git directory cannot be lent too)"
      : "lend it too (--writable <dir>: its config, hooks and refs are then judged like the workspace's own .git), or run in the main worktree";
  if (!inside(gitDir))
    return `git inside the sandbox will not find this repository: the workspace's .git points to ${gitDir}, outside what the run lends (a linked worktree, a submodule, a gitdir elsewhere), so git status, add and commit fail there; ${fix}.`;
  const common = readSmall(path.join(gitDir, "commondir"))?.trim();
  const commonDir = common ? realPathOr(path.resolve(gitDir, common)) : gitDir;
  if (!inside(commonDir))
    return `git inside the sandbox will not find this repository's objects and refs: its common git directory ${commonDir} is outside what the run lends; ${fix}.`;
  const borrowed = (readSmall(path.join(commonDir, "objects/info/alternates")) ?? "")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => realPathOr(path.resolve(path.join(commonDir, "objects"), line)))
    .filter((store) => !inside(store));
  if (borrowed.length > 0)
    return `git inside the sandbox will not find this repository's history: its objects are borrowed from ${borrowed.join(", ")} (objects/info/alternates: a --shared or --reference clone), outside what the run lends, so git log and commit fail there; lend that store read-only through the policy's readOnlyMounts, or clone without --shared.`;
  return undefined;
}

/** The git directory `.git` names: itself (a folder), a link's target, or a gitdir: file's. */
function gitDirOf(workspace: string): string | undefined {
  const dotGit = path.join(workspace, ".git");
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(dotGit);
  } catch {
    return undefined;
  }
  if (stat.isDirectory()) return dotGit;
  if (stat.isSymbolicLink()) return realPathOr(path.resolve(workspace, fs.readlinkSync(dotGit)));
  if (!stat.isFile()) return undefined;
  const named = /^gitdir:\s*(.+?)\s*$/m.exec(readSmall(dotGit) ?? "")?.[1];
  return named ? realPathOr(path.resolve(workspace, named)) : undefined;
}

/** A small regular file's text, opened without following a link; undefined otherwise. */
function readSmall(file: string): string | undefined {
  try {
    return readSmallFile(file, MAX_POINTER_BYTES)?.toString("utf8");
  } catch {
    return undefined;
  }
}
