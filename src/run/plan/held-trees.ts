// The host trees a planned run's sandbox holds (the workspace, the writable roots, the read-only
// mounts): the host's own output (a run record, an events file) is never written inside one, where
// the sandbox may have left links; and two runs of one process never hold a tree at once where
// either may write (run/tree-holds.ts). Pure and light: the public operations face hands it on.
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
