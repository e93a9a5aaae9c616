// --patch-file: where the CLI puts a patch hand-back's patch. Checked and opened before the run (a
// folder of the caller's outside the workspace and the writable directories, through HostDir),
// written after it by renaming a new file over the name (a link there is replaced, never followed).
import path from "node:path";
import { SandboxRunError, usageError } from "../errors.js";
import type { PlannedRun } from "../index.js";
import { HostDir, HostDirError } from "../util/host-dir.js";
import { atOrBelow } from "../util/path-inside.js";

/** --patch-file and the hand-back mode agree, and a patch has somewhere to go. */
export function checkPatchFlags(planned: PlannedRun, flags: { patchFile?: string; record?: string }): void {
  const patchMode = planned.plan.handBack === "patch";
  if (flags.patchFile && !patchMode) {
    throw usageError(
      "--patch-file is only used with --hand-back patch.",
      "Add --hand-back patch, or drop --patch-file.",
    );
  }
  if (patchMode && planned.run.policy.workspace === "read-write" && !flags.patchFile && !flags.record) {
    throw usageError(
      "With --hand-back patch the run's changes go only into a patch, and no place for it was given.",
      "Pass --patch-file <file> (outside the workspace), or --record <dir> (the record's changes.patch).",
    );
  }
}

interface PatchTarget {
  dir: HostDir;
  name: string;
  /** The path as the caller wrote it (for messages). */
  shown: string;
}

/**
 * Opens the --patch-file's folder now, so a bad path is a usage error before anything starts: a
 * folder of the caller's, outside the workspace and the writable directories (the sandbox's copy
 * of them never reaches the host in this mode, but a patch inside the tree it changes is a trap).
 */
export function openPatchFile(file: string, planned: PlannedRun): PatchTarget {
  const absolute = path.resolve(file);
  const name = path.basename(absolute);
  const refuse = (why: string) =>
    usageError(
      `Cannot write the patch file ${file}: ${why}.`,
      "Pass --patch-file a new file in a folder of yours outside the workspace (e.g. $RUNNER_TEMP/changes.patch).",
    );
  let dir: HostDir;
  try {
    dir = HostDir.open(path.dirname(absolute), { outside: [planned.run.cwd, ...planned.run.writableRoots] });
  } catch (error) {
    // The folder's refusal named only the folder ("<ws> lies inside <ws>"): say where the file would go.
    if (error instanceof HostDirError && error.code === "INSIDE_SANDBOX_TREE") {
      const tree = [planned.run.cwd, ...planned.run.writableRoots].find((t) => atOrBelow(absolute, t));
      throw refuse(tree ? `${absolute} lies inside ${tree}, which the sandbox holds` : `its folder: ${error.message}`);
    }
    throw refuse(error instanceof HostDirError ? error.message : (error as Error).message);
  }
  const existing = dir.lstat(name);
  if (existing && !existing.isFile() && !existing.isSymbolicLink()) {
    dir.close();
    throw refuse("it is not a file");
  }
  return { dir, name, shown: file };
}

/** Replaces the patch file (a link there is replaced, never written through). */
export function writePatchFile(target: PatchTarget, patch: string): void {
  try {
    target.dir.replaceFile(target.name, patch);
  } catch (error) {
    throw new SandboxRunError(
      "usage",
      `The run succeeded, but its patch could not be written to ${target.shown}: ${(error as Error).message}.`,
      { hint: "Its changes are lost with it (the workspace was not changed): free the path and run again." },
    );
  }
}
