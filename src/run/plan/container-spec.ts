// A run plan as the engine-neutral container description the engine seam takes.
import type { ContainerSpec } from "../../engine/engine.js";
import type { RunPlan } from "../../sandbox-contract.js";

export function containerSpecOf(plan: RunPlan): ContainerSpec {
  return {
    name: `sandbox-run-${plan.runId}`,
    image: plan.image,
    entrypoint: plan.entrypoint,
    cmd: plan.piArgs,
    env: plan.env,
    user: plan.user,
    workingDir: plan.workingDir,
    labels: plan.labels,
    runtime: plan.runtime,
    network: plan.network,
    mounts: plan.mounts.map(({ hostPath, containerPath, readOnly }) => ({ hostPath, containerPath, readOnly })),
    tmpfs: plan.tmpfs,
    limits: {
      memoryMb: plan.limits.memoryMb,
      cpus: plan.limits.cpus,
      pids: plan.limits.pids,
      // RLIMIT_FSIZE: no single file past the disk limit, at once and exactly (EFBIG); the total is
      // watched by the run (disk-watch).
      fileSizeMb: plan.limits.diskMb,
    },
    openStdin: true,
    init: true,
    ...(plan.platform ? { platform: plan.platform } : {}),
  };
}
