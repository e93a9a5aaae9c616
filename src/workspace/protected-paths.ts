// A policy's protectedPaths, enforced twice:
// 1. Prevention: a pattern that names an existing directory as a whole (".git/hooks/**") or an
//    existing file exactly (".git/config") has it mounted read-only inside the read-write
//    workspace, so writes fail with EROFS (and replacing a mounted file by rename with EBUSY):
//    the agent learns at once that the path is off limits.
// 2. Detection: the workspace is diffed after the run and any created, modified or deleted
//    path a pattern matches fails the run and is put back (workspace-rules.ts, restore-tree.ts).
//    This covers what a mount cannot: files that do not exist yet, wildcards, and renaming a
//    parent directory out of the way (`mv .github x && mkdir -p .github/workflows` is allowed by
//    the kernel; the diff catches it).
import fs from "node:fs";
import path from "node:path";
import { usageError } from "../errors.js";
import { literalPathOf } from "./path-glob.js";

/**
 * Existing directories and files (absolute, canonical) that protected patterns name as a
 * whole. Only real entries inside the workspace qualify: a symlink could point a read-only
 * mount at any host path.
 */
export function protectedMountPaths(workspace: string, patterns: readonly string[]): string[] {
  const found: string[] = [];
  for (const pattern of patterns) {
    const literal = literalPathOf(pattern);
    if (!literal) continue;
    const absolute = path.join(workspace, literal.path);
    let folderNamedBare: string | undefined;
    try {
      const real = fs.realpathSync(absolute);
      const stat = fs.statSync(real);
      if (real !== absolute || !real.startsWith(`${workspace}/`)) continue;
      // A bare folder name matches that one entry, not what is inside it: it protected nothing of
      // the folder's files, and the run said nothing (review, session 30).
      if (literal.kind !== "directory" && stat.isDirectory()) folderNamedBare = literal.path;
      else if (literal.kind === "directory" ? stat.isDirectory() : stat.isFile()) found.push(real);
    } catch {
      // absent: detection still covers it
    }
    if (folderNamedBare)
      throw usageError(
        `The policy's protectedPaths entry "${pattern}" names the folder ${folderNamedBare}: without "/**" it protects only the entry itself, none of the files inside it.`,
        `Write "${folderNamedBare}/**" to protect the folder and everything in it.`,
      );
  }
  // An entry inside another protected directory is already read-only.
  const unique = [...new Set(found)].sort();
  return unique.filter((d) => !unique.some((o) => o !== d && d.startsWith(`${o}/`)));
}

/**
 * The planned protected mounts that are no longer real entries inside the workspace: a run that
 * waited for another run on the same trees may find one swapped for a symlink (the other run's
 * rules may allow that), and the engine would mount whatever the link leads to.
 */
export function staleProtectedMounts(workspace: string, planned: readonly string[]): string[] {
  return planned.filter((entry) => {
    try {
      const real = fs.realpathSync(entry);
      const stat = fs.statSync(real);
      return real !== entry || !real.startsWith(`${workspace}/`) || !(stat.isDirectory() || stat.isFile());
    } catch {
      return true;
    }
  });
}
