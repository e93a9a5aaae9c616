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

/** The smallest kernel memory an epoll watch costs (an epitem and its poll entry): fewer bytes, more watches. */
const EPOLL_WATCH_BYTES = 160;

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

/** How many epoll watches a sandbox with this memory limit can hold at most. */
export function epollWatchesWithin(memoryMb: number): number {
  return Math.floor((memoryMb * 1024 * 1024) / EPOLL_WATCH_BYTES);
}

/**
 * Why a sandbox with this memory limit, running as the caller's own uid, could use up the
 * caller's epoll watches; undefined when its memory limit binds first.
 */
export function sharedUidProblem(limits: PerUserLimits | undefined, memoryMb: number): string | undefined {
  if (!limits) return undefined;
  const within = epollWatchesWithin(memoryMb);
  if (limits.epollWatches >= within) return undefined;
  return (
    `this host lets one user hold ${limits.epollWatches.toLocaleString("en-US")} epoll watches (fs.epoll.max_user_watches) ` +
    `and a sandbox with ${memoryMb} MiB can hold ${within.toLocaleString("en-US")}: running as your uid, it could use them ` +
    "all up and end this controller (Node aborts when it cannot add one) before the run is checked"
  );
}

/** The command that raises the limits for good (as root). */
export function raiseLimitsCommand(): string {
  const lines = Object.entries(SAFE_PER_USER_SYSCTLS).map(([key, value]) => `${key} = ${value}`);
  return `printf '${lines.join("\\n")}\\n' | sudo tee /etc/sysctl.d/90-sandbox-run.conf && sudo sysctl --system`;
}
