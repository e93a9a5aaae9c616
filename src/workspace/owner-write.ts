// A change inside a folder the sandbox made read-only. A non-root caller's sandbox runs as the
// caller's uid, so it owns the folders it makes and may `chmod 555` them: the host's unlink,
// rename or create there then fails with EACCES, and a FIFO it left (review, session 38: `ro/.nvmrc`
// in a 0555 folder, `.nvmrc` in a 0555 workspace root) or a hook the restore must remove stayed.
// The caller owns the folder as well, so it may give itself write and search there for the change.
import fs from "node:fs";
import { errorCode } from "./fd-walk.js";

const OWNER_WRITE_SEARCH = 0o300;

/**
 * Runs `change`, a change to the entries of the folder `dirFd` holds (through
 * `/proc/self/fd/<dirFd>/<name>`). If it fails with EACCES or EPERM and this process owns the
 * folder without write or search, the folder gets them (fchmod of `dirFd` itself: the folder the
 * change names, never a path a link could redirect), `change` runs again, and the folder's mode is
 * set back to what it was (what the run left it, which the rules judged). Otherwise the error stands.
 * `change` must be safe to run again after it failed (each caller's is: it looks before it acts).
 */
export function withOwnerWrite<T>(dirFd: number, change: () => T): T {
  try {
    return change();
  } catch (error) {
    const code = errorCode(error);
    if (code !== "EACCES" && code !== "EPERM") throw error;
    const folder = fs.fstatSync(dirFd);
    const mode = folder.mode & 0o7777;
    if (
      !folder.isDirectory() ||
      folder.uid !== process.geteuid?.() ||
      (mode & OWNER_WRITE_SEARCH) === OWNER_WRITE_SEARCH
    )
      throw error;
    try {
      fs.fchmodSync(dirFd, mode | OWNER_WRITE_SEARCH);
    } catch {
      throw error; // not ours to change after all (an immutable folder): the first error says why
    }
    try {
      return change();
    } finally {
      fs.fchmodSync(dirFd, mode);
    }
  }
}
