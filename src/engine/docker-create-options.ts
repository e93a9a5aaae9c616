// Turns an engine-neutral ContainerSpec into the Engine API's create options, adding the hardening
// every sandbox gets whatever the spec says (DESIGN.md section 5): read-only root, no capabilities,
// no-new-privileges, private IPC and cgroup namespaces, an init to reap the bash tool's orphans
// (the engine's, unless the spec's entrypoint is its own: run/plan/no-setuid-filter.ts),
// no core dumps, no log driver (output is read through attach), and the OOM killer's first choice.
import type Docker from "dockerode";
import type { ContainerSpec } from "./engine.js";
import type { Ulimit } from "./podman-compat.js";
import { RUNSC_SECCOMP_PROFILE } from "./runsc-seccomp.js";

/** The kernel's maximum: under memory pressure the sandbox dies before any host process. */
const OOM_SCORE_ADJ = 1000;

/** Podman's compat API needs a few variants (see podman-compat.ts): its service's default ulimits. */
export interface PodmanVariant {
  defaultUlimits: Ulimit[];
  /** Rootless: run with the caller's uid mapped to itself (keep-id), see podman-compat.ts. */
  rootless: boolean;
}

export function dockerCreateOptions(spec: ContainerSpec, podman?: PodmanVariant): Docker.ContainerCreateOptions {
  const { limits } = spec;
  const memory = limits.memoryMb * 1024 * 1024;
  const ulimits = [{ Name: "core", Soft: 0, Hard: 0 }];
  const gvisor = spec.runtime === "runsc";
  // Under runsc the sandbox's own processes live in gVisor's kernel, which enforces RLIMIT_NPROC
  // for them as Linux does (a fork past it fails with EAGAIN), while the pids cgroup counts gVisor's
  // host threads: ~7-9 per sandbox task, measured (docs/security.md R1). Under runc the cgroup is the
  // limit, and RLIMIT_NPROC would count the uid's processes host-wide (a bind-mode sandbox runs as
  // the caller's uid), so it is set under runsc only.
  if (gvisor) ulimits.push({ Name: "nproc", Soft: limits.pids, Hard: limits.pids });
  if (limits.fileSizeMb !== undefined) {
    const bytes = limits.fileSizeMb * 1024 * 1024;
    ulimits.push({ Name: "fsize", Soft: bytes, Hard: bytes });
  }
  // Giving any ulimit drops Podman's configured defaults: pass them on (ours win).
  for (const limit of podman?.defaultUlimits ?? []) {
    if (!ulimits.some((u) => u.Name === limit.Name)) ulimits.push(limit);
  }
  return {
    ...(spec.name ? { name: spec.name } : {}),
    // A query parameter like `name` (dockerode puts the top-level keys there): the engine checks
    // the image is of this platform.
    ...(spec.platform ? { platform: spec.platform } : {}),
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
    // An image's HEALTHCHECK runs through the engine's exec, outside the init (no no-setuid filter,
    // no mount check): a derived image's check ran the workspace's package.json script, which made a
    // setuid file (review, session 34). No image check runs in a sandbox.
    Healthcheck: { Test: ["NONE"] },
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
      PidsLimit: gvisor ? gvisorPidsLimit(limits.pids) : limits.pids,
      OomScoreAdj: OOM_SCORE_ADJ,
      Tmpfs: podman ? podmanTmpfs({ ...PODMAN_READ_ONLY_ROOT_TMPFS, ...spec.tmpfs }, spec.user) : spec.tmpfs,
      Mounts: spec.mounts.map((m) => ({
        Type: "bind" as const,
        Source: m.hostPath,
        Target: m.containerPath,
        ReadOnly: m.readOnly,
        BindOptions: { Propagation: "rprivate" as const },
      })),
      ...(podman?.rootless ? { UsernsMode: "keep-id" } : {}),
      IpcMode: "private",
      // The engine's default on cgroup v1 is the host's cgroup namespace.
      CgroupnsMode: "private",
      Ulimits: ulimits,
      AutoRemove: false,
      LogConfig: { Type: "none", Config: {} },
    } as Docker.HostConfig,
  };
}

/**
 * The pids cgroup of a runsc container: room for gVisor's own host threads when the sandbox runs as
 * many tasks as its RLIMIT_NPROC allows (250 sleeping tasks took 2,230 host threads, a fork loop
 * refused at 254 took 1,875), so ordinary parallel work (a test runner's workers: twenty node
 * processes took 753) no longer fails gVisor's kernel at the policy's 256. At most
 * GVISOR_MAX_HOST_THREADS (or the policy's own pids, if more): a fork bomb fills the room, and ten
 * times a large limit let one sandbox take a third of a host's 32,768 pids (review, session 31).
 */
export function gvisorPidsLimit(pids: number): number {
  return Math.max(pids, Math.min(pids * 10 + 256, GVISOR_MAX_HOST_THREADS));
}

/** The most host threads a runsc sandbox holds, unless its policy's pids limit is higher still. */
export const GVISOR_MAX_HOST_THREADS = 4096;

/**
 * Podman puts a writable tmpfs of its own, as large as half the host's memory and not noexec, on
 * /var/tmp and /run whenever the root file system is read-only (its --read-only-tmpfs, on by
 * default and out of reach of the Docker API): a way around the policy's tmpMb and homeMb and the
 * read-only root. Naming the folders here puts ours there instead: /var/tmp read-only and empty as
 * on Docker, /run the image's folders (the sockets' mount point) in 1 MiB, noexec.
 */
export const PODMAN_READ_ONLY_ROOT_TMPFS: Readonly<Record<string, string>> = Object.freeze({
  "/var/tmp": "ro,nosuid,nodev,noexec,size=64k,mode=0755",
  "/run": "rw,nosuid,nodev,noexec,size=1m,mode=0755,tmpcopyup",
});

/**
 * The same tmpfs mounts on Podman (4.3, checked on Debian's 4.3.1): its option parser rejects the
 * kernel's `uid=`/`gid=` ("unknown mount option"), so the mount is given to the container's user
 * with Podman's `U` instead (the same uid:gid, the one the container runs as); and unlike Docker it
 * copies the image's folder into the tmpfs unless told otherwise, so `notmpcopyup` keeps what
 * Docker does. Like Docker's, a mount that says neither exec nor noexec is noexec.
 */
export function podmanTmpfs(tmpfs: Record<string, string>, user: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [target, options] of Object.entries(tmpfs)) {
    const parts = options.split(",").filter(Boolean);
    const owner = ["uid", "gid"].map((key) => parts.find((p) => p.startsWith(`${key}=`))?.slice(key.length + 1));
    const kept = parts.filter((p) => !p.startsWith("uid=") && !p.startsWith("gid="));
    if (owner[0] !== undefined || owner[1] !== undefined) {
      // `U` can only mean the container's own user: any other owner cannot be expressed here.
      if (`${owner[0]}:${owner[1]}` !== user)
        throw new Error(
          `tmpfs ${target}: Podman can only give it to the container's user (${user}), not ${owner.join(":")}`,
        );
      kept.push("U");
    }
    if (!kept.some((p) => p === "exec" || p === "noexec")) kept.push("noexec");
    if (!kept.some((p) => p.endsWith("tmpcopyup"))) kept.push("notmpcopyup");
    result[target] = kept.join(",");
  }
  return result;
}
