// A container's memory cgroup OOM kill counter and its processes, read from this host's cgroupfs
// (Podman reports OOMKilled only for the container's first process; see docker-container.ts). Read on the host, not
// by an exec in the container: that exec ran the image's `cat` (found on the image's PATH) as uid 0
// beside the sandbox, and a derived image's own `cat` left a setuid-root file in the workspace
// (review, session 34). Only where the engine shares this host's filesystem and process table; the
// process's cgroup path must name the container, so a pid of another process namespace (or one
// reused since) is never taken for it.
import fs from "node:fs";
import path from "node:path";

const CGROUP_ROOT = "/sys/fs/cgroup";

/** A line of /proc/<pid>/cgroup that names the container's own cgroup: its controllers ("" on v2) and path. */
interface ContainerCgroup {
  controllers: string;
  cgroup: string;
}

/**
 * The cgroups of `pid` that are the container's own (named after it, no `..`): none for another
 * host's engine, a gone process, a reused pid or a pid of another process namespace.
 */
export function containerCgroups(pid: number, containerId: string, procRoot = "/proc"): ContainerCgroup[] {
  if (!Number.isInteger(pid) || pid <= 0 || !/^[0-9a-f]{12,64}$/.test(containerId)) return [];
  let table: string;
  try {
    table = fs.readFileSync(path.join(procRoot, String(pid), "cgroup"), "utf8");
  } catch {
    return [];
  }
  const own: ContainerCgroup[] = [];
  for (const line of table.split("\n")) {
    const match = /^\d+:([^:]*):(\/.*)$/.exec(line);
    if (!match) continue;
    const [, controllers, cgroup] = match;
    // The container's own cgroup, below the mount: no `..`, and named after the container.
    if (cgroup!.split("/").includes("..") || !cgroup!.includes(containerId)) continue;
    own.push({ controllers: controllers!, cgroup: cgroup! });
  }
  return own;
}

/** The counter, or 0 when it cannot be read here (another host's engine, a gone process, an odd layout). */
export function hostOomKillCount(
  pid: number,
  containerId: string,
  procRoot = "/proc",
  cgroupRoot = CGROUP_ROOT,
): number {
  for (const { controllers, cgroup } of containerCgroups(pid, containerId, procRoot)) {
    const file = controllers.split(",").includes("memory")
      ? path.join(cgroupRoot, "memory", cgroup, "memory.oom_control")
      : controllers === ""
        ? path.join(cgroupRoot, cgroup, "memory.events")
        : undefined;
    if (!file) continue;
    try {
      const count = /^oom_kill (\d+)$/m.exec(fs.readFileSync(file, "latin1").slice(0, 4096))?.[1];
      if (count !== undefined) return Number(count);
    } catch {
      // Another layout (v2 on a hybrid host has no memory controller): the next line may have it.
    }
  }
  return 0;
}

/**
 * Every process of the container on this host: the `cgroup.procs` of its own cgroup (the pids
 * controller's on v1, else the unified one). Under runsc that holds gVisor's sentry and gofer,
 * which hold the sandbox's host files (the gofer is no descendant of the container's first pid).
 * Empty where it cannot be read here. Read fresh each time: pids are reused.
 */
export function containerHostPids(
  pid: number,
  containerId: string,
  procRoot = "/proc",
  cgroupRoot = CGROUP_ROOT,
): number[] {
  const own = containerCgroups(pid, containerId, procRoot);
  const ordered = [
    ...own.filter((c) => c.controllers.split(",").includes("pids")),
    ...own.filter((c) => c.controllers === ""),
  ];
  for (const { controllers, cgroup } of ordered) {
    const folder = controllers === "" ? path.join(cgroupRoot, cgroup) : path.join(cgroupRoot, "pids", cgroup);
    try {
      const text = fs.readFileSync(path.join(folder, "cgroup.procs"), "latin1").slice(0, 1 << 20);
      return text
        .split("\n")
        .filter((line) => /^\d+$/.test(line))
        .map(Number);
    } catch {
      // another layout: the next line may have it
    }
  }
  return [];
}
