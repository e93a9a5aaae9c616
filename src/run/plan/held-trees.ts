// The host trees a planned run's sandbox holds (the workspace, the writable roots, the read-only
// mounts): the host's own output (a run record, an events file) is never written inside one, where
// the sandbox may have left links; and two runs of one process never hold a tree at once where
// either may write (run/tree-holds.ts). Pure and light: the public operations face hands it on.
import path from "node:path";
import { usageError } from "../../errors.js";
import { locatePath } from "../../util/host-dir.js";
import type { PlannedRun } from "./prepare-plan.js";

export function heldTrees(planned: PlannedRun): string[] {
  const { run } = planned;
  return [run.cwd, ...run.writableRoots, ...run.readOnlyMounts];
}

/** The same trees by what the sandbox may do in them (the workspace as its policy mounts it). */
export function treesByAccess(planned: PlannedRun): { writable: string[]; readOnly: string[] } {
  const { run } = planned;
  const workspaceWritable = run.policy.workspace === "read-write";
  return {
    writable: [...(workspaceWritable ? [run.cwd] : []), ...run.writableRoots],
    readOnly: [...(workspaceWritable ? [] : [run.cwd]), ...run.readOnlyMounts],
  };
}

/**
 * The agent's `recordTo` folder, checked against a call's trees: inside one, that call's sandbox
 * could leave a link at a later call's numbered folder (`<recordTo>/<n>`), and after the hand-back
 * the link is owned by the caller (or root) like any of the caller's own, so the later record, the
 * other call's prompt and tool output with it, would be written where the sandbox chose.
 */
export function refuseRecordToInsideTrees(recordTo: string, planned: PlannedRun): void {
  // The caller's own links on the way are followed, up to a tree (a link inside one is the sandbox's).
  let tree: string | undefined;
  try {
    const located = locatePath(path.resolve(recordTo), treesByAccess(planned).writable);
    tree = located.kind === "held" ? located.tree : undefined;
  } catch (error) {
    throw usageError(
      `Cannot use recordTo ${recordTo}: ${(error as Error).message}.`,
      "Give recordTo a folder of yours.",
    );
  }
  if (tree)
    throw usageError(
      `recordTo ${recordTo} lies inside ${tree}, which this call's sandbox may write: it could plant links there that later calls' records would be written through.`,
      "Keep recordTo outside every workspace and writable folder of the agent's calls (e.g. next to your program's own files).",
    );
}
