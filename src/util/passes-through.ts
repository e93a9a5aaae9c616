import fs from "node:fs";
import path from "node:path";

/**
 * Whether `p` (absolute, or relative to the working directory) lies in one of `trees` (real paths)
 * as written or on the way: judged folder by folder, each resolved as far as it exists. A link in
 * a tree that leads out today (`.venv -> /opt/venv`) is the sandbox's to point elsewhere, a link
 * outside that leads into one reaches it, and what is not there yet is judged as written.
 */
export function passesThrough(p: string, trees: Iterable<string>): boolean {
  const set = trees instanceof Set ? (trees as ReadonlySet<string>) : new Set(trees);
  // Nothing to pass through: no realpath calls (the host programs' PATH before any run lends a tree).
  if (set.size === 0) return false;
  // By the folder's own ancestors, not by every tree: a long-lived service lends a new checkout per
  // task, and a scan of them all blocked every host git call for longer with each (review, session 28).
  const inside = (q: string) => {
    for (let at = q; ; at = path.dirname(at)) {
      if (set.has(at)) return true;
      if (at === "/" || at === ".") return false;
    }
  };
  let current = "/";
  // Not normalised first: `..` after a link goes up from where the link leads, as the kernel does.
  const raw = path.isAbsolute(p) ? p : `${process.cwd()}/${p}`;
  for (const name of raw.split("/")) {
    if (name === "" || name === ".") continue;
    if (name === "..") {
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, name);
    if (inside(next)) return true;
    let real = next;
    try {
      real = fs.realpathSync(next);
    } catch {
      // Not there (yet): the rest is judged as written.
    }
    if (inside(real)) return true;
    current = real;
  }
  return false;
}
