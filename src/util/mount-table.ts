// What this host's mount table says is mounted below a folder. A bind mount of the same file
// system keeps its device number, so st_dev cannot tell; /proc/self/mountinfo can.
import fs from "node:fs";

/** This process's mount table (/proc/self/mountinfo), or undefined where it cannot be read. */
export function readMountTable(): string | undefined {
  try {
    return fs.readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return undefined;
  }
}

/**
 * The mount points strictly inside `root` (relative), from the mount table. Only those visible at
 * their path: one since hidden by a mount over a folder above it, or moved away, is no longer there
 * (its path is gone, reached through a link, or shows another device), and binding its path failed
 * every read-only run over the tree (review, session 33).
 */
export function mountPointsInside(root: string, mountinfo: string | undefined = readMountTable()): string[] {
  if (mountinfo === undefined) return [];
  let real = root;
  try {
    real = fs.realpathSync(root);
  } catch {
    // Judged by the name given.
  }
  const out: string[] = [];
  for (const line of mountinfo.split("\n")) {
    const fields = line.split(" ");
    const field = fields[4];
    if (!field) continue;
    // Spaces, tabs, newlines and backslashes are written as octal escapes.
    const point = field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
    for (const base of new Set([root, real])) {
      const prefix = base.endsWith("/") ? base : `${base}/`;
      if (point.startsWith(prefix) && point.length > prefix.length && visibleAt(point, fields[2]))
        out.push(point.slice(prefix.length));
    }
  }
  return [...new Set(out)];
}

/** Whether a mount (its "major:minor") is what its path shows now: a real path, of that device. */
function visibleAt(point: string, device: string | undefined): boolean {
  try {
    if (fs.realpathSync(point) !== point) return false;
    const { dev } = fs.statSync(point);
    const [major, minor] = (device ?? "").split(":").map(Number);
    // Linux's dev_t: the major number's low 12 bits at 8, the minor's low 8 bits at 0, the rest above.
    const expected = ((minor! & 0xff) | ((major! & 0xfff) << 8) | ((minor! & ~0xff) << 12)) >>> 0;
    return major === undefined || Number.isNaN(major) || dev === expected;
  } catch {
    return false;
  }
}
