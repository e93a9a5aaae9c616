// A run plan as the engine-neutral container description the engine seam takes.
import type { ContainerSpec } from "../engine/engine.js";
import type { RunPlan } from "../sandbox-contract.js";

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
    limits: { memoryMb: plan.limits.memoryMb, cpus: plan.limits.cpus, pids: plan.limits.pids },
    openStdin: true,
    init: true,
  };
}
