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
 * The mount points strictly inside `root` (relative), from /proc/self/mountinfo (a bind mount of
 * the same file system keeps its device number, so st_dev cannot tell).
 */
export function mountPointsInside(root: string, mountinfo: string | undefined = readMountTable()): string[] {
  const text = mountinfo;
  if (text === undefined) return [];
  let real = root;
  try {
    real = fs.realpathSync(root);
  } catch {
    // Judged by the name given.
  }
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const field = line.split(" ")[4];
    if (!field) continue;
    // Spaces, tabs, newlines and backslashes are written as octal escapes.
    const point = field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
    for (const base of new Set([root, real])) {
      const prefix = base.endsWith("/") ? base : `${base}/`;
      if (point.startsWith(prefix) && point.length > prefix.length) out.push(point.slice(prefix.length));
    }
  }
  return [...new Set(out)];
}
