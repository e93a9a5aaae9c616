// Where `image build` keeps the npm install it bakes into every runner image (Pi, its modules and
// the image's Node): whatever is there runs in every later sandbox, so no sandbox may ever hold it
// (run/plan/host-folders.ts refuses lending it, or a folder holding it, as a writable tree).

import os from "node:os";
import path from "node:path";

/** sandbox-run's own cache folder ($XDG_CACHE_HOME/sandbox-run, else ~/.cache/sandbox-run). */
export function sandboxRunCacheDir(env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string {
  return path.join(env.XDG_CACHE_HOME || path.join(home, ".cache"), "sandbox-run");
}

/** The runner image build's cache of installed dependencies and its context folders. */
export function buildCacheDir(env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string {
  return path.join(sandboxRunCacheDir(env, home), "build");
}
