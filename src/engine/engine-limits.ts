// Whether a Docker engine can enforce the limits a sandbox is created with. An engine without the
// memory or pids cgroup (rootless Docker on cgroup v1, a kernel booted without
// cgroup_enable=memory) accepts HostConfig.Memory and PidsLimit, answers the create with a
// "Limitation discarded" warning, and runs the container without them. Its /info says so
// (MemoryLimit, PidsLimit, CpuCfsQuota: false): such an engine is refused, never used silently.
// Podman reports its controllers differently (podman-compat.ts, assertPodmanLimits).
import { SandboxRunError } from "../errors.js";

/** What the engine's /info says it can enforce (absent flags count as yes: older engines always could). */
export interface EngineLimitSupport {
  memory: boolean;
  pids: boolean;
  cpu: boolean;
  /** Swap accounting (cgroup v1 without it drops MemorySwap: memory past the limit may go to swap). Not refused: doctor says so. */
  swap: boolean;
  /** The CPUs the engine has (its /info NCPU), when it says: a container may be given at most these. */
  cpus?: number;
}

/** The flags of a Docker engine's /info that say what it can enforce. */
export interface RawLimitFlags {
  MemoryLimit?: boolean;
  PidsLimit?: boolean;
  CpuCfsQuota?: boolean;
  SwapLimit?: boolean;
  NCPU?: number;
}

export function limitSupportOf(info: RawLimitFlags): EngineLimitSupport {
  return {
    memory: info.MemoryLimit !== false,
    pids: info.PidsLimit !== false,
    cpu: info.CpuCfsQuota !== false,
    swap: info.SwapLimit !== false,
    ...(typeof info.NCPU === "number" && info.NCPU > 0 ? { cpus: info.NCPU } : {}),
  };
}

/**
 * The CPUs a container is given: the policy's, at most the engine's own. Docker refuses a create
 * asking for more ("Range of CPUs is from 0.01 to 2.00"), which failed every run of a built-in
 * policy (2 CPUs) on a one-CPU engine as "Docker unavailable" (review, session 30).
 */
export function cpusFor(asked: number | undefined, support: EngineLimitSupport): number | undefined {
  return asked !== undefined && support.cpus !== undefined ? Math.min(asked, support.cpus) : asked;
}

/** The limits a sandbox needs that the engine cannot enforce, by name. */
export function missingLimits(support: EngineLimitSupport, needsCpu: boolean): string[] {
  return [
    ...(support.memory ? [] : ["memory"]),
    ...(support.pids ? [] : ["pids"]),
    ...(needsCpu && !support.cpu ? ["cpu"] : []),
  ];
}

export function assertEngineLimits(support: EngineLimitSupport, engineName: string, needsCpu: boolean): void {
  const missing = missingLimits(support, needsCpu);
  if (missing.length === 0) return;
  throw new SandboxRunError(
    "docker-unavailable",
    `Engine "${engineName}" cannot enforce the sandbox's ${missing.join(", ")} limits (its /info says so; it would run the container without them).`,
    {
      hint: "Enable those cgroup controllers on the engine's host (for memory on some kernels: cgroup_enable=memory on the kernel command line; rootless Docker needs cgroup v2 with them delegated), or use another engine.",
    },
  );
}
