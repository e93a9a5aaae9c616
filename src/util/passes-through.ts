import fs from "node:fs";
import path from "node:path";
import { atOrBelow } from "./path-inside.js";

/**
 * Whether `p` (absolute, or relative to the working directory) lies in one of `trees` (real paths)
 * as written or on the way: judged folder by folder, each resolved as far as it exists. A link in
 * a tree that leads out today (`.venv -> /opt/venv`) is the sandbox's to point elsewhere, a link
 * outside that leads into one reaches it, and what is not there yet is judged as written.
 */
export function passesThrough(p: string, trees: Iterable<string>): boolean {
  const list = [...trees];
  // Nothing to pass through: no realpath calls (the host programs' PATH before any run lends a tree).
  if (list.length === 0) return false;
  const inside = (q: string) => list.some((tree) => atOrBelow(q, tree));
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
