// Before copy mode stages or applies anything for a tree, the tree it copied in must still be at its
// path: moved away, or removed and another folder made there (a fresh clone), it has nothing to
// take the run's changes. Before, the staging folder was made inside a missing tree (an internal
// ENOENT error), or a branch was looked for in another repository (review, session 29).
import fs from "node:fs";
import { SandboxRunError } from "../errors.js";
import type { HostTree } from "./host-tree.js";

/** Throws a usage error when `tree.root` is no longer the directory the walk sent. */
export function refuseTreeAway(tree: HostTree, what: string): void {
  const was = tree.facts.get("");
  let now: fs.Stats | undefined;
  try {
    now = fs.lstatSync(tree.root);
  } catch {
    now = undefined;
  }
  if (was && now?.isDirectory() && now.dev === was.dev && now.ino === was.ino) return;
  throw new SandboxRunError(
    "not-applied",
    `${what.charAt(0).toUpperCase()}${what.slice(1)} was moved, removed or replaced while the run was in progress (it ${now ? "is another folder now" : "is gone"}): nothing of the run was applied there. The result was withheld.`,
    { hint: "Leave a workspace in place until its run has ended (abort the run first to stop it early)." },
  );
}
