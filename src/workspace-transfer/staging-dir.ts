// Where a returned tree's changed content waits until it is checked and applied: a private (0700)
// directory made with mkdtemp on the same filesystem as the tree, so applying is a rename. Next to
// the tree when its parent is on the same filesystem and writable (the tree itself then stays
// untouched until the apply), else inside the tree (a mount point: its parent is elsewhere). The
// apply also moves what it deletes or replaces into its `aside` folder until it has succeeded.
//
// The directory is used through a path pinned to its fd ("/proc/<pid>/fd/<fd>"), never by its name:
// its parent (next to the tree, or the tree itself) may be another local user's folder, and that
// user could rename the directory away and put a symlink in its place; a root controller writing
// staged content by name would then write it wherever the link points.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { O_PATH } from "../util/o-path.js";
import { drain, drainYielding } from "../util/stepwise.js";
import { removing } from "../workspace/remove-tree.js";
import { STAGING_RECORD } from "./staging-record.js";

export { STAGING_RECORD };

/** Staging directories in use: the pinned path handed out -> the directory's name and fd. */
const pinnedDirs = new Map<string, { real: string; fd: number }>();

export const STAGING_PREFIX = ".sandbox-run-staging-";

/**
 * `.sandbox-run-staging-<tree's name>-<random>`: says whose it is to anyone who finds it. Returns
 * the path to use it by, pinned to its fd (see the top); realStagingPath() gives its name.
 */
export function makeStagingDir(root: string): string {
  const parent = path.dirname(root);
  const name = `${STAGING_PREFIX}${path.basename(root).slice(0, 60)}-`;
  let real: string | undefined;
  try {
    if (fs.statSync(parent).dev === fs.statSync(root).dev) real = fs.mkdtempSync(path.join(parent, name));
  } catch {
    // parent not writable (or not visible): fall back to inside the tree
  }
  real ??= fs.mkdtempSync(path.join(root, name));
  const fd = fs.openSync(real, O_PATH | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
  const stat = fs.fstatSync(fd);
  // What mkdtemp made (0700, ours), not something put at its name in the moment since.
  if (stat.uid !== process.geteuid?.() || (stat.mode & 0o077) !== 0) {
    fs.closeSync(fd);
    throw new Error(`${real} changed while it was made (another user's folder holds it)`);
  }
  // By this process's pid, not "self": git and other children read staged files by this path too.
  const pinned = `/proc/${process.pid}/fd/${fd}`;
  pinnedDirs.set(pinned, { real, fd });
  return pinned;
}

/** The name of a staging directory makeStagingDir() handed out (for records and messages). */
export function realStagingPath(dir: string): string {
  return pinnedDirs.get(dir)?.real ?? dir;
}

/**
 * Removes a staging directory and whatever is still in it (never following a symlink). Entries
 * still aside (an apply journaled by no version that undoes it: see dead-apply.ts) are the caller's
 * originals: their folder is kept next to it, as `.sandbox-run-kept-<random>`.
 */
export function removeStagingDir(dir: string): void {
  drain(removingStagingDir(dir));
}

/** removeStagingDir for a controller that serves other runs meanwhile (util/stepwise.ts): a returned tree may hold 200,000 entries. */
export function removeStagingDirYielding(dir: string): Promise<void> {
  return drainYielding(removingStagingDir(dir));
}

function* removingStagingDir(dir: string): Generator<void, void> {
  const pinned = pinnedDirs.get(dir);
  const real = pinned?.real ?? dir;
  try {
    const aside = path.join(dir, "aside");
    let held = false;
    try {
      held = fs.lstatSync(aside).isDirectory() && fs.readdirSync(aside).length > 0;
    } catch {
      // none: the usual case
    }
    if (held) {
      try {
        fs.renameSync(
          aside,
          path.join(path.dirname(real), `.sandbox-run-kept-${crypto.randomBytes(6).toString("hex")}`),
        );
      } catch {
        return; // then the whole staging directory stays
      }
    }
    if (!pinned) {
      fs.rmSync(dir, { recursive: true, force: true });
      return;
    }
    // Emptied through its fd; the folder itself by name only while that name is still it.
    for (const name of fs.readdirSync(dir)) {
      yield* removing(pinned.fd, name);
      yield;
    }
    const now = fs.lstatSync(real);
    const same = fs.fstatSync(pinned.fd);
    if (now.isDirectory() && now.ino === same.ino && now.dev === same.dev) fs.rmdirSync(real);
  } catch {
    // what is left stays: a crash reaper or the user removes it
  } finally {
    if (pinned) {
      fs.closeSync(pinned.fd);
      pinnedDirs.delete(dir);
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
  fs.writeFileSync(record, JSON.stringify([...listed, realStagingPath(dir)]), { mode: 0o600 });
}
