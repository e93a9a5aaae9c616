// The host trees a planned run's sandbox holds (the workspace, the writable roots, the read-only
// mounts): the host's own output (a run record, an events file) is never written inside one, where
// the sandbox may have left links. Pure and light: the public operations face hands it on.
import type { PlannedRun } from "./prepare-plan.js";

export function heldTrees(planned: PlannedRun): string[] {
  const { run } = planned;
  return [run.cwd, ...run.writableRoots, ...run.readOnlyMounts];
}
