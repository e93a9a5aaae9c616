// A run plan as the engine-neutral container description the engine seam takes.
import type { ContainerSpec } from "../../engine/engine.js";
import { LABEL_CREATED_AT, LABEL_DEADLINE, type RunPlan } from "../../sandbox-contract.js";
import { isOwnInit } from "./no-setuid-filter.js";

/**
 * `now`: when the container is made. The plan's owner labels were counted from the plan, but a call
 * can wait long after it (for another run on the same trees, the engine's queue, an image build);
 * a deadline counted from the plan would let `gc` or any controller's reaping remove a live run.
 * `placed.copiedMb`: in copy mode, the size of the trees the run copies in (RunWorkspace.copiedMb).
 */
export function containerSpecOf(plan: RunPlan, now = new Date(), placed: { copiedMb?: number } = {}): ContainerSpec {
  return {
    name: `sandbox-run-${plan.runId}`,
    image: plan.image,
    entrypoint: plan.entrypoint,
    cmd: plan.piArgs,
    env: plan.env,
    user: plan.user,
    workingDir: plan.workingDir,
    labels: labelsAsOf(plan.labels, now),
    runtime: plan.runtime,
    network: plan.network,
    mounts: plan.mounts.map(({ hostPath, containerPath, readOnly }) => ({ hostPath, containerPath, readOnly })),
    tmpfs: plan.tmpfs,
    limits: {
      // Copy mode: the trees copied in live in tmpfs, whose pages the memory cgroup counts; they get
      // room of their own beside the policy's memory, or a large tree left the task none (review,
      // session 31: a 1.9 GB node_modules was OOM-killed before the first turn at 2048 MB).
      memoryMb: plan.limits.memoryMb + (placed.copiedMb ?? 0),
      cpus: plan.limits.cpus,
      pids: plan.limits.pids,
      // RLIMIT_FSIZE: no single file past the disk limit, at once and exactly (EFBIG); the total is
      // watched by the run (disk-watch).
      fileSizeMb: plan.limits.diskMb,
    },
    openStdin: true,
    // The engine's init, unless the no-setuid filter's perl is the init (it must come first).
    init: !isOwnInit(plan.entrypoint),
    ...(plan.platform ? { platform: plan.platform } : {}),
  };
}

/** The labels with the created-at and deadline labels moved to `now`, the run's timeout kept. */
function labelsAsOf(labels: Record<string, string>, now: Date): Record<string, string> {
  const planned = Date.parse(labels[LABEL_CREATED_AT] ?? "");
  const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
  if (!Number.isFinite(planned)) return labels;
  const moved: Record<string, string> = { ...labels, [LABEL_CREATED_AT]: now.toISOString() };
  if (Number.isFinite(deadline)) moved[LABEL_DEADLINE] = new Date(now.getTime() + deadline - planned).toISOString();
  return moved;
}
