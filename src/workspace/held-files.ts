// Disk a container's processes hold in files that have no name any more: unlinked while open,
// opened with O_TMPFILE, or unlinked while memory-mapped. No walk of the writable trees sees them,
// yet their blocks stay taken on the host's filesystem until the last holder lets go (the
// container's end): a sandbox holding many such files, each under RLIMIT_FSIZE, took 600 MiB under
// a 64 MiB diskMb while the disk watch walked and saw nothing (review, session 39). This reads them
// through the holders' /proc entries instead: each fd's and each mapping's magic link leads to the
// open file itself, so no name the sandbox chose is ever resolved.
//
// Which pids: every process of the container on this host. Under runc those are the container's
// own processes; under runsc the gofer and the sentry, which hold the host fds of the sandbox's
// files (both in the container's cgroup, but the gofer is no descendant of the sentry's
// State.Pid). Mappings (/proc/<pid>/map_files) are readable with CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE only: without, they are counted as `unreadable`, not as bytes.
import fs from "node:fs";
import path from "node:path";

/** At most this many fd and mapping entries are read in one scan, over all pids. */
export const MAX_HELD_ENTRIES = 65_536;

export interface HeldFiles {
  /** Allocated bytes (st_blocks * 512) of the nameless regular files held, each inode once. */
  bytes: number;
  /** How many such inodes. */
  files: number;
  /** fd and mapping entries read. */
  read: number;
  /** The scan stopped at the entry cap: bytes is a lower bound. */
  capped: boolean;
  /** Entries that could not be read for want of permission (mappings without the capability). */
  unreadable: number;
}

/**
 * The nameless regular files on `devices` (st_dev of the watched trees) that `pids` hold open or
 * mapped. A process or fd that goes away mid-scan is skipped. Synchronous and bounded by
 * `maxEntries`; stat of a magic link never blocks on the file (no open, whatever its type).
 */
export function heldNamelessFiles(
  pids: readonly number[],
  devices: ReadonlySet<number>,
  options: { procRoot?: string; maxEntries?: number } = {},
): HeldFiles {
  const procRoot = options.procRoot ?? "/proc";
  const maxEntries = options.maxEntries ?? MAX_HELD_ENTRIES;
  const seen = new Set<string>();
  const held: HeldFiles = { bytes: 0, files: 0, read: 0, capped: false, unreadable: 0 };
  const take = (link: string): void => {
    let stat: fs.Stats | undefined;
    try {
      stat = fs.statSync(link, { throwIfNoEntry: false });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EPERM" || code === "EACCES") held.unreadable++;
      return;
    }
    // nlink 0: no name anywhere (a file still named elsewhere is the walk's to count).
    if (!stat?.isFile() || stat.nlink !== 0 || !devices.has(stat.dev)) return;
    const key = `${stat.dev}:${stat.ino}`;
    if (seen.has(key)) return;
    seen.add(key);
    held.files++;
    held.bytes += stat.blocks * 512;
  };
  for (const pid of pids) {
    if (!Number.isInteger(pid) || pid <= 0) continue;
    for (const kind of ["fd", "map_files"]) {
      const folder = path.join(procRoot, String(pid), kind);
      let dir: fs.Dir;
      try {
        dir = fs.opendirSync(folder);
      } catch {
        continue; // the process is gone, or not ours to read
      }
      try {
        // Read as a stream: a process may hold a million fds.
        for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
          if (held.read >= maxEntries) {
            held.capped = true;
            return held;
          }
          held.read++;
          take(path.join(folder, entry.name));
        }
      } catch {
        // the process exited while its folder was read
      } finally {
        dir.closeSync();
      }
    }
  }
  return held;
}
