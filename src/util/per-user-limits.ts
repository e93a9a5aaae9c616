// Kernel limits a sandbox shares with every other process of its uid. Without a user namespace the
// kernel counts some objects per uid, across containers: epoll watches (fs.epoll.max_user_watches)
// and inotify instances and watches (fs.inotify.max_user_*). A sandbox that holds all of a uid's
// epoll watches makes every other process of that uid fail to add one, and Node (libuv) aborts on
// that failure. In bind mode a non-root caller's sandbox runs as the caller's own uid, so it could
// end the controller before the controller has judged what the run left in the workspace (and the
// caller's editor, shell and other programs while the run lasts). Each watch and instance is charged
// to the container's memory cgroup (measured here: ~200 bytes a watch, ~1 KiB an instance), so where
// a limit is above what the sandbox's memory limit can buy, the memory limit binds first and the
// per-uid count can never run out. Under gVisor the sandbox's epoll and inotify live in its own kernel.
import fs from "node:fs";
import os from "node:os";

/**
 * Less kernel memory than an epoll watch (an epitem, ~128 bytes, and its poll entry) or an inotify
 * instance (~1 KiB) costs: fewer bytes, more of them within a memory budget.
 */
const EPOLL_WATCH_BYTES = 100;
const INOTIFY_INSTANCE_BYTES = 512;

/** What scripts/setup-host.sh writes to /etc/sysctl.d: far above what any memory limit can buy. */
export const SAFE_PER_USER_SYSCTLS: Readonly<Record<string, string>> = {
  "fs.epoll.max_user_watches": "1099511627776",
  "fs.inotify.max_user_instances": "2147483647",
  "fs.inotify.max_user_watches": "2147483647",
};

export interface PerUserLimits {
  /** fs.epoll.max_user_watches */
  epollWatches: number;
  /** fs.inotify.max_user_instances */
  inotifyInstances?: number;
}

/** This host's per-uid limits, or undefined where they cannot be read (not Linux). */
export function readPerUserLimits(
  read: (file: string) => string = (f) => fs.readFileSync(f, "utf8"),
): PerUserLimits | undefined {
  const number = (file: string): number | undefined => {
    try {
      const value = Number(read(file).trim());
      return Number.isFinite(value) ? value : undefined;
    } catch {
      return undefined;
    }
  };
  const epollWatches = number("/proc/sys/fs/epoll/max_user_watches");
  if (epollWatches === undefined) return undefined;
  const inotifyInstances = number("/proc/sys/fs/inotify/max_user_instances");
  return { epollWatches, ...(inotifyInstances === undefined ? {} : { inotifyInstances }) };
}

/**
 * Why sandboxes running as the caller's own uid could use up the caller's epoll watches or inotify
 * instances; undefined when the host's memory runs out first. The whole host's memory, not one
 * sandbox's limit: several sandboxes of one uid (calls at once, other programs' runs) count together.
 */
export function sharedUidProblem(
  limits: PerUserLimits | undefined,
  hostMemoryBytes = os.totalmem(),
): string | undefined {
  if (!limits) return undefined;
  const counts = [
    {
      what: "epoll watches (fs.epoll.max_user_watches)",
      limit: limits.epollWatches,
      within: hostMemoryBytes / EPOLL_WATCH_BYTES,
    },
    {
      what: "inotify instances (fs.inotify.max_user_instances)",
      limit: limits.inotifyInstances,
      within: hostMemoryBytes / INOTIFY_INSTANCE_BYTES,
    },
  ];
  const low = counts.filter((c) => c.limit !== undefined && c.limit < c.within);
  if (low.length === 0) return undefined;
  return (
    `this host lets one user hold ${low.map((c) => `${c.limit!.toLocaleString("en-US")} ${c.what}`).join(" and ")}, ` +
    "fewer than its memory can buy: sandboxes running as your uid could use them all up and end this controller " +
    "(Node aborts when it cannot add an epoll watch) before the run is checked"
  );
}

/** The command that raises the limits for good (as root). */
export function raiseLimitsCommand(): string {
  const lines = Object.entries(SAFE_PER_USER_SYSCTLS).map(([key, value]) => `${key} = ${value}`);
  return `printf '${lines.join("\\n")}\\n' | sudo tee /etc/sysctl.d/90-sandbox-run.conf && sudo sysctl --system`;
}
