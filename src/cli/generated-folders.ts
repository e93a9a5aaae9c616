// What a branch commit carries that a repository rarely means to track: a virtualenv (a folder holding
// pyvenv.cfg), installed packages (node_modules) or build output (a folder tagged CACHEDIR.TAG, as
// cargo's target/) its ignore rules do not cover. Said on the done
// line, since the commit takes them whole (review, session 27: 758 of a fix's 760 files were a venv).
import { terminalName } from "./terminal-text.js";

/** A note for the done line naming such folders among the committed paths, or "". */
export function generatedFoldersNote(paths: readonly string[]): string {
  const roots = new Map<string, { kind: string; count: number }>();
  for (const p of paths) {
    if (p === "pyvenv.cfg" || p.endsWith("/pyvenv.cfg"))
      roots.set(p.slice(0, -"pyvenv.cfg".length), { kind: "a virtualenv", count: 0 });
    // The cache directory tag cargo (target/), Go and other build tools write: build output.
    if (p === "CACHEDIR.TAG" || p.endsWith("/CACHEDIR.TAG"))
      roots.set(p.slice(0, -"CACHEDIR.TAG".length), { kind: "build output", count: 0 });
    const modules = /^(.*?(^|\/)node_modules\/)/.exec(p)?.[1];
    if (modules !== undefined && !roots.has(modules)) roots.set(modules, { kind: "installed packages", count: 0 });
  }
  if (roots.size === 0) return "";
  for (const p of paths) for (const [root, found] of roots) if (root === "" || p.startsWith(root)) found.count++;
  const named = [...roots]
    .sort((a, b) => b[1].count - a[1].count)
    .slice(0, 3)
    .map(([root, { kind, count }]) => `${count} in ${terminalName(root || "./")} (${kind})`);
  return ` (${named.join(", ")}${roots.size > 3 ? ", ..." : ""}: not in .gitignore, committed whole)`;
}
