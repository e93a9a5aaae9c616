// A container's memory cgroup OOM kill counter, read from this host's cgroupfs (Podman reports
// OOMKilled only for the container's first process; see docker-container.ts). Read on the host, not
// by an exec in the container: that exec ran the image's `cat` (found on the image's PATH) as uid 0
// beside the sandbox, and a derived image's own `cat` left a setuid-root file in the workspace
// (review, session 34). Only where the engine shares this host's filesystem and process table; the
// process's cgroup path must name the container, so a pid of another process namespace (or one
// reused since) is never taken for it.
import fs from "node:fs";
import path from "node:path";

const CGROUP_ROOT = "/sys/fs/cgroup";

/** The counter, or 0 when it cannot be read here (another host's engine, a gone process, an odd layout). */
export function hostOomKillCount(
  pid: number,
  containerId: string,
  procRoot = "/proc",
  cgroupRoot = CGROUP_ROOT,
): number {
  if (!Number.isInteger(pid) || pid <= 0 || !/^[0-9a-f]{12,64}$/.test(containerId)) return 0;
  let table: string;
  try {
    table = fs.readFileSync(path.join(procRoot, String(pid), "cgroup"), "utf8");
  } catch {
    return 0;
  }
  for (const line of table.split("\n")) {
    const match = /^\d+:([^:]*):(\/.*)$/.exec(line);
    if (!match) continue;
    const [, controllers, cgroup] = match;
    // The container's own cgroup, below the mount: no `..`, and named after the container.
    if (cgroup!.split("/").includes("..") || !cgroup!.includes(containerId)) continue;
    const file = controllers!.split(",").includes("memory")
      ? path.join(cgroupRoot, "memory", cgroup!, "memory.oom_control")
      : controllers === ""
        ? path.join(cgroupRoot, cgroup!, "memory.events")
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
