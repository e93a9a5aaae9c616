// Where a returned tree's changed content waits until it is checked and applied: a private (0700)
// directory made with mkdtemp on the same filesystem as the tree, so applying is a rename. Next to
// the tree when its parent is on the same filesystem and writable (the tree itself then stays
// untouched until the apply), else inside the tree (a mount point: its parent is elsewhere).
import fs from "node:fs";
import path from "node:path";

export const STAGING_PREFIX = ".sandbox-run-staging-";

export function makeStagingDir(root: string): string {
  const parent = path.dirname(root);
  try {
    if (fs.statSync(parent).dev === fs.statSync(root).dev) {
      return fs.mkdtempSync(path.join(parent, STAGING_PREFIX));
    }
  } catch {
    // parent not writable (or not visible): fall back to inside the tree
  }
  return fs.mkdtempSync(path.join(root, STAGING_PREFIX));
}

/** Removes a staging directory and whatever is still in it (never following a symlink). */
export function removeStagingDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}
