// What differs when the Docker-compatible engine is Podman's service (`podman system service`;
// checked against Debian's Podman 4.3.1, rootful, cgroup v1), so the same seam keeps the same
// promises there:
// - The runtime a container asks for (HostConfig.Runtime) is ignored: every container gets the
//   service's default runtime. A run that asks for gVisor must never silently get runc, so a run
//   whose runtime the service does not run is refused, and info() lists only that runtime.
// - Giving HostConfig.Ulimits at all (we always set `core`) drops the service's configured
//   default_ulimits, and Podman then sets nofile and nproc to its own maximum (1048576), which a
//   host without CAP_SYS_RESOURCE (a CI runner inside a container) cannot grant: every start fails
//   with "setrlimit RLIMIT_NOFILE: operation not permitted". The service's own defaults are read
//   once from a container created without ulimits, and passed on explicitly.
// - tmpfs options differ (podmanTmpfs in docker-create-options.ts); a tmpfs root gets the mode of
//   the image's folder, not `mode=`; `Init` needs catatonit.
// - OOMKilled is reported only when the container's first process (its init) is killed, never for
//   a tool the sandbox ran. The limit holds all the same; the host reads the cgroup's OOM counter
//   when it stops the container itself (timeouts, tripped limits: docker-container.ts), but a run
//   whose Pi recovered from a tool's OOM kill and exited succeeds on Podman, where Docker reports
//   it as the memory limit.
// - Rootless: the caller's uid is root of the container's user namespace. With `keep-id` it is
//   the same uid inside, so the sandbox runs as the caller and what it writes to the workspace is
//   the caller's (without it, the sandbox's uid maps to a subordinate uid and cannot even enter
//   the workspace). On cgroup v1 a rootless service has no cgroup controllers and silently drops
//   memory, pids and CPU limits (the container's HostConfig shows 0): such an engine is refused.
import type Docker from "dockerode";
import { SandboxRunError } from "../errors.js";

export interface PodmanService {
  version: string;
  /** The runtime every container of this service gets (crun, runc, runsc ...). */
  defaultRuntime: string;
  rootless: boolean;
  /** "v1" or "v2". */
  cgroupVersion: string;
  /** The cgroup controllers the service can use (none for rootless on cgroup v1). */
  cgroupControllers: string[];
}

export interface Ulimit {
  Name: string;
  Soft: number;
  Hard: number;
}

/** Podman's service when /version names it, else undefined (a Docker engine). */
export async function detectPodman(docker: Docker): Promise<PodmanService | undefined> {
  const version = (await docker.version()) as { Version: string; Components?: Array<{ Name?: string }> };
  if (!(version.Components ?? []).some((c) => /podman/i.test(c.Name ?? ""))) return undefined;
  const info = (await docker.info()) as { DefaultRuntime?: string };
  // Rootlessness and the usable controllers are only in Podman's own API.
  const libpod = (await dial(docker, "/v4.0.0/libpod/info")) as {
    host?: { security?: { rootless?: boolean }; cgroupVersion?: string; cgroupControllers?: string[] | null };
  };
  return {
    version: version.Version,
    defaultRuntime: info.DefaultRuntime ?? "crun",
    rootless: libpod.host?.security?.rootless ?? false,
    cgroupVersion: libpod.host?.cgroupVersion ?? "",
    cgroupControllers: libpod.host?.cgroupControllers ?? [],
  };
}

/** Refuses a service that would drop the sandbox's limits instead of enforcing them. */
export function assertPodmanLimits(service: PodmanService, engineName: string, needsCpu: boolean): void {
  const needed = ["memory", "pids", ...(needsCpu ? ["cpu"] : [])];
  const missing = needed.filter((c) => !service.cgroupControllers.includes(c));
  if (missing.length === 0) return;
  const what = service.rootless
    ? `rootless Podman ${service.version} on cgroup ${service.cgroupVersion}`
    : `Podman ${service.version}`;
  throw new SandboxRunError(
    "docker-unavailable",
    `Engine "${engineName}" is ${what}, which cannot enforce the sandbox's ${missing.join(", ")} limits (it would silently drop them).`,
    {
      hint: service.rootless
        ? "Use rootful Podman or Docker there, or a host with cgroup v2 whose user session has the memory, pids and cpu controllers delegated (systemd: Delegate=yes)."
        : "Enable those cgroup controllers on the engine's host.",
    },
  );
}

function dial(docker: Docker, path: string): Promise<unknown> {
  const modem = docker.modem as unknown as {
    dial(options: object, callback: (error: unknown, data: unknown) => void): void;
  };
  return new Promise((resolve, reject) =>
    modem.dial({ path, method: "GET", statusCodes: { 200: true } }, (error, data) =>
      error ? reject(error) : resolve(data),
    ),
  );
}

/** The runtimes a run may ask for on this service: its default, and runc for crun (same isolation). */
export function podmanRuntimes(service: PodmanService): string[] {
  return service.defaultRuntime === "crun" ? ["crun", "runc"] : [service.defaultRuntime];
}

export function assertPodmanRuntime(service: PodmanService, asked: string, engineName: string): void {
  if (podmanRuntimes(service).includes(asked)) return;
  throw new SandboxRunError(
    "usage",
    `Engine "${engineName}" is Podman ${service.version}, which runs every container with its service's runtime (${service.defaultRuntime}); it cannot give this run ${asked}.`,
    {
      hint:
        asked === "runsc"
          ? "Run a Podman service for gVisor (`podman --runtime runsc system service ...`) and list it with runtimes: [runsc], or choose --runtime runc."
          : `Choose --runtime ${service.defaultRuntime === "crun" ? "runc" : service.defaultRuntime}, or another engine.`,
    },
  );
}

/**
 * The ulimits the service gives a container when none are asked for (its containers.conf
 * default_ulimits, or Podman's own), read from a container that is created and removed at once.
 */
export async function podmanDefaultUlimits(
  docker: Docker,
  image: string,
  labels: Record<string, string>,
): Promise<Ulimit[]> {
  // Labelled like the run's container, so gc finds it should this process die in between.
  const probe = await docker.createContainer({ Image: image, Entrypoint: ["true"], Labels: labels });
  try {
    const info = (await probe.inspect()) as { HostConfig?: { Ulimits?: Ulimit[] | null } };
    return (info.HostConfig?.Ulimits ?? [])
      .map((u) => ({ Name: u.Name.replace(/^RLIMIT_/, "").toLowerCase(), Soft: u.Soft, Hard: u.Hard }))
      .filter((u) => u.Name === "nofile" || u.Name === "nproc");
  } finally {
    await probe.remove({ force: true }).catch(() => {});
  }
}
