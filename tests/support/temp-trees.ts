// Temporary directory trees for tests, each removed after the test that made it.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach } from "vitest";

/**
 * `dir()` makes an empty directory, `tree(files)` one holding `files` (relative path -> content),
 * both canonical paths under `parent` (default: the temp dir) named after `prefix`.
 */
export function tempTrees(prefix: string, parent: () => string = os.tmpdir) {
  const made: string[] = [];
  afterEach(() => {
    // chmod, then rm -rf: a test may leave unreadable directories, or paths deeper than PATH_MAX
    // (where fs.rmSync, which works by path, fails).
    for (const d of made.splice(0)) {
      spawnSync("chmod", ["-R", "u+rwx", d]);
      spawnSync("rm", ["-rf", d]);
    }
    // A test's tree of 100,000 entries takes more than the hook's default 10 s to remove on a busy
    // machine (a unit run beside two reviewers' sandboxes failed there, its test passed).
  }, 120_000);
  const dir = (name = prefix): string => {
    const created = fs.realpathSync(fs.mkdtempSync(path.join(parent(), name)));
    made.push(created);
    return created;
  };
  const tree = (files: Record<string, string> = {}): string => {
    const root = dir();
    for (const [name, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
      fs.writeFileSync(path.join(root, name), content);
    }
    return root;
  };
  return { dir, tree };
}

/** rm -rf: fs.rmSync works by path and fails below PATH_MAX. */
export const removeTree = (dir: string) => spawnSync("rm", ["-rf", dir]);

/** An entry's owner as "uid:gid" (the entry itself, never a symlink's target). */
export const owner = (p: string) => {
  const st = fs.lstatSync(p);
  return `${st.uid}:${st.gid}`;
};
