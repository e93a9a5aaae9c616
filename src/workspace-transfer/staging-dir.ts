// Where a returned tree's changed content waits until it is checked and applied: a private (0700)
// directory made with mkdtemp on the same filesystem as the tree, so applying is a rename. Next to
// the tree when its parent is on the same filesystem and writable (the tree itself then stays
// untouched until the apply), else inside the tree (a mount point: its parent is elsewhere). The
// apply also moves what it deletes or replaces into its `aside` folder until it has succeeded.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const STAGING_PREFIX = ".sandbox-run-staging-";
/** The file in a run folder that lists the run's staging directories, for the reaper. */
export const STAGING_RECORD = "staging.json";

/** `.sandbox-run-staging-<tree's name>-<random>`: says whose it is to anyone who finds it. */
export function makeStagingDir(root: string): string {
  const parent = path.dirname(root);
  const name = `${STAGING_PREFIX}${path.basename(root).slice(0, 60)}-`;
  try {
    if (fs.statSync(parent).dev === fs.statSync(root).dev) return fs.mkdtempSync(path.join(parent, name));
  } catch {
    // parent not writable (or not visible): fall back to inside the tree
  }
  return fs.mkdtempSync(path.join(root, name));
}

/**
 * Removes a staging directory and whatever is still in it (never following a symlink). Entries an
 * apply cut off half way (a controller killed mid apply) moved aside are the caller's originals:
 * their folder is kept next to it, as `.sandbox-run-kept-<random>`.
 */
export function removeStagingDir(dir: string): void {
  const aside = path.join(dir, "aside");
  let held = false;
  try {
    held = fs.lstatSync(aside).isDirectory() && fs.readdirSync(aside).length > 0;
  } catch {
    // none: the usual case
  }
  if (held) {
    try {
      fs.renameSync(aside, path.join(path.dirname(dir), `.sandbox-run-kept-${crypto.randomBytes(6).toString("hex")}`));
    } catch {
      return; // then the whole staging directory stays
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Removes the staging directories a dead controller listed in its run folder's `record` file:
 * only directories named like ours and owned by this user; anything else stays where it is.
 */
export function removeListedStagingDirs(record: string): void {
  let listed: unknown;
  try {
    listed = JSON.parse(fs.readFileSync(record, "utf8"));
  } catch {
    return;
  }
  if (!Array.isArray(listed)) return;
  const uid = process.geteuid?.();
  for (const dir of listed) {
    if (typeof dir !== "string" || !path.isAbsolute(dir) || !path.basename(dir).startsWith(STAGING_PREFIX)) continue;
    try {
      const stat = fs.lstatSync(dir);
      if (stat.isDirectory() && stat.uid === uid) removeStagingDir(dir);
    } catch {
      // already gone
    }
  }
}

/** Adds `dir` to the list in `record` (a run folder's file), so a crash cannot leave it behind for good. */
export function recordStagingDir(record: string, dir: string): void {
  let listed: string[] = [];
  try {
    listed = JSON.parse(fs.readFileSync(record, "utf8")) as string[];
  } catch {
    // first one
  }
  fs.writeFileSync(record, JSON.stringify([...listed, dir]), { mode: 0o600 });
}
