// Turns an engine-neutral ContainerSpec into the Engine API's create options, adding the hardening
// every sandbox gets whatever the spec says (DESIGN.md section 5): read-only root, no capabilities,
// no-new-privileges, private IPC and cgroup namespaces, an init to reap the bash tool's orphans,
// no core dumps, no log driver (output is read through attach), and the OOM killer's first choice.
import type Docker from "dockerode";
import type { ContainerSpec } from "./engine.js";
import { RUNSC_SECCOMP_PROFILE } from "./runsc-seccomp.js";

/** The kernel's maximum: under memory pressure the sandbox dies before any host process. */
const OOM_SCORE_ADJ = 1000;

export function dockerCreateOptions(spec: ContainerSpec): Docker.ContainerCreateOptions {
  const { limits } = spec;
  const memory = limits.memoryMb * 1024 * 1024;
  const ulimits = [{ Name: "core", Soft: 0, Hard: 0 }];
  if (limits.fileSizeMb !== undefined) {
    const bytes = limits.fileSizeMb * 1024 * 1024;
    ulimits.push({ Name: "fsize", Soft: bytes, Hard: bytes });
  }
  return {
    ...(spec.name ? { name: spec.name } : {}),
    Image: spec.image,
    Entrypoint: spec.entrypoint,
    Cmd: spec.cmd,
    Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
    User: spec.user,
    ...(spec.workingDir ? { WorkingDir: spec.workingDir } : {}),
    Labels: spec.labels,
    AttachStdin: spec.openStdin,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: spec.openStdin,
    StdinOnce: spec.openStdin,
    Tty: false,
    NetworkDisabled: spec.network === "none",
    HostConfig: {
      Runtime: spec.runtime,
      Init: spec.init,
      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      SecurityOpt: [
        "no-new-privileges:true",
        // runc: the engine's default profile; runsc: ours (see runsc-seccomp.ts for why).
        ...(spec.runtime === "runsc" ? [`seccomp=${JSON.stringify(RUNSC_SECCOMP_PROFILE)}`] : []),
      ],
      NetworkMode: spec.network,
      Memory: memory,
      MemorySwap: memory,
      ...(limits.cpus !== undefined ? { NanoCpus: Math.round(limits.cpus * 1e9) } : {}),
      PidsLimit: limits.pids,
      OomScoreAdj: OOM_SCORE_ADJ,
      Tmpfs: spec.tmpfs,
      Mounts: spec.mounts.map((m) => ({
        Type: "bind" as const,
        Source: m.hostPath,
        Target: m.containerPath,
        ReadOnly: m.readOnly,
        BindOptions: { Propagation: "rprivate" as const },
      })),
      IpcMode: "private",
      // The engine's default on cgroup v1 is the host's cgroup namespace.
      CgroupnsMode: "private",
      Ulimits: ulimits,
      AutoRemove: false,
      LogConfig: { Type: "none", Config: {} },
    } as Docker.HostConfig,
  };
}
