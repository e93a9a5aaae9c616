// A watched tree's root the sandbox made unreadable. A non-root caller's sandbox runs as the caller
// and owns the workspace root, so `chmod 000 .` (or 111, 444) left a root the after-run walk could not
// open or search: nothing was judged or put back, and a planted `.envrc` stayed (review, session 38).
// Its recorded mode is set back before the walk, through an O_PATH fd (which needs no permission on
// the root itself) checked by dev:ino against the tree the run held; the walk then judges the rest.
import fs from "node:fs";
import { O_PATH } from "../util/o-path.js";
import { errorCode } from "./fd-walk.js";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;

/**
 * Sets the root at `root` back to `recordedMode` if it is the tree `identity` ("dev:ino") names, this
 * process owns it, and cannot list or search it. Returns the mode the run left, when it was set back.
 */
export function restoreRootAccess(root: string, identity: string, recordedMode: number): number | undefined {
  const fd = fs.openSync(root, O_PATH | O_DIRECTORY | O_NOFOLLOW);
  try {
    const stat = fs.fstatSync(fd);
    if (`${stat.dev}:${stat.ino}` !== identity || stat.uid !== process.geteuid?.()) return undefined;
    if (!lacksAccess(fd)) return undefined;
    fs.chmodSync(`/proc/self/fd/${fd}`, recordedMode);
    return stat.mode & 0o7777;
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether the directory an O_PATH fd holds cannot be opened for listing, or its names looked up. */
function lacksAccess(pathFd: number): boolean {
  let dirFd: number;
  try {
    dirFd = fs.openSync(`/proc/self/fd/${pathFd}`, O_RDONLY | O_DIRECTORY);
  } catch (error) {
    if (errorCode(error) === "EACCES") return true;
    throw error;
  }
  try {
    fs.statSync(`/proc/self/fd/${dirFd}/.`);
    return false;
  } catch (error) {
    if (errorCode(error) === "EACCES") return true;
    throw error;
  } finally {
    fs.closeSync(dirFd);
  }
}
