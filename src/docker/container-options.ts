// Turns a run plan into the Engine API's create options: this is where the hardening of
// DESIGN.md section 5 becomes concrete (read-only root, no capabilities, no-new-privileges,
// limits, tmpfs, no network, init to reap the bash tool's orphans).
import type Docker from "dockerode";
import type { RunPlan } from "../run/run-plan.js";

export function containerCreateOptions(plan: RunPlan): Docker.ContainerCreateOptions {
  const { limits } = plan;
  const memory = limits.memoryMb * 1024 * 1024;
  return {
    name: `sandbox-run-${plan.runId}`,
    Image: plan.image,
    Entrypoint: plan.entrypoint,
    Cmd: plan.piArgs,
    Env: Object.entries(plan.env).map(([k, v]) => `${k}=${v}`),
    User: plan.user,
    WorkingDir: plan.workingDir,
    Labels: plan.labels,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: true,
    Tty: false,
    NetworkDisabled: plan.network === "none",
    HostConfig: {
      Runtime: plan.runtime,
      Init: true,
      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges:true"],
      NetworkMode: plan.network,
      Memory: memory,
      MemorySwap: memory,
      NanoCpus: Math.round(limits.cpus * 1e9),
      PidsLimit: limits.pids,
      Tmpfs: plan.tmpfs,
      Mounts: plan.mounts.map((m) => ({
        Type: "bind" as const,
        Source: m.hostPath,
        Target: m.containerPath,
        ReadOnly: m.readOnly,
        BindOptions: { Propagation: "rprivate" as const },
      })),
      IpcMode: "private",
      // Core dumps of a crashing tool would land in the workspace; nothing should write them.
      Ulimits: [{ Name: "core", Soft: 0, Hard: 0 }],
      AutoRemove: false,
      LogConfig: { Type: "none", Config: {} },
    },
  };
}
