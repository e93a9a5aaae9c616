// A host resource a run needed and did not get: a full disk or quota, a read-only filesystem, too
// many open files, the run's own folder removed from under it. The host's environment, not a bug of
// sandbox-run's: said as such, with what to do (review, session 32: each was "unexpected error ...
// This is a bug in sandbox-run", exit 1, no hint). A usage error, exit 2, as a TMPDIR that cannot be
// used already is; an error that is already a SandboxRunError keeps its own code.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { isSandboxRunError, SandboxRunError } from "../errors.js";
import { runDirsParent } from "./run-dirs.js";

const RESOURCE_CODES = new Set(["ENOSPC", "EDQUOT", "EROFS", "EMFILE", "ENFILE"]);

/** The SandboxRunError a host resource failure is, or undefined when `error` is anything else. */
export function hostTroubleError(error: unknown, tmpDir = os.tmpdir()): SandboxRunError | undefined {
  if (isSandboxRunError(error)) return undefined;
  const failure = error as NodeJS.ErrnoException;
  if (typeof failure?.code !== "string" || typeof failure.syscall !== "string") return undefined;
  const where = typeof failure.path === "string" ? failure.path : undefined;
  if (RESOURCE_CODES.has(failure.code)) {
    const at = where ? ` (${failure.syscall} ${where})` : ` (${failure.syscall})`;
    return new SandboxRunError("usage", `The host ${describe(failure.code)}${at}.`, {
      hint: hintFor(failure.code, where, tmpDir),
      cause: error,
    });
  }
  // The run's folders went away while it ran (a cleaner of TMPDIR, a removed TMPDIR).
  const parent = runDirsParent(tmpDir);
  if (failure.code === "ENOENT" && where && isInside(parent, where) && !fs.existsSync(parent)) {
    return new SandboxRunError(
      "usage",
      `The run's folder in ${tmpDir} was removed while the run went on (${failure.syscall} ${where}).`,
      {
        hint: `Keep ${parent} while runs go on (a TMPDIR cleaner must skip it), or point TMPDIR at a folder nothing else cleans; then run again.`,
        cause: error,
      },
    );
  }
  return undefined;
}

function describe(code: string): string {
  switch (code) {
    case "ENOSPC":
      return "ran out of disk space";
    case "EDQUOT":
      return "ran out of its disk quota";
    case "EROFS":
      return "could not write to a read-only filesystem";
    default:
      return "ran out of open files";
  }
}

function hintFor(code: string, where: string | undefined, tmpDir: string): string {
  const folder = where ? path.dirname(where) : `TMPDIR (${tmpDir}) or the workspace`;
  switch (code) {
    case "ENOSPC":
    case "EDQUOT":
      return where
        ? `Free space on the filesystem holding ${folder} (or point TMPDIR at one with room), then run again.`
        : `Free space where the run writes: TMPDIR (${tmpDir}) or the workspace's filesystem; then run again.`;
    case "EROFS":
      return `${folder} is on a read-only filesystem: point TMPDIR at a writable folder, then run again.`;
    default:
      return "Raise the limit of open files (`ulimit -n 4096`), then run again.";
  }
}

function isInside(parent: string, candidate: string): boolean {
  const relative = path.relative(parent, candidate);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}
