// Where `sandbox-run show` puts its page: through a HostDir (util/host-dir.ts), so the folder is
// opened without following a link, checked to be the caller's, and the file is put in place by
// renaming a new file over the name (a link planted there is replaced, never written through).
// Never inside a tree the recorded run's sandbox held: it may have left links or folders there
// that a path would be resolved through.
import fs from "node:fs";
import path from "node:path";
import { isSandboxRunError, usageError } from "../errors.js";
import { HostDir, HostDirError } from "../util/host-dir.js";

/** Writes `content` to `file`; returns the path written. A usage error (with what to do) when it cannot. */
export function writeOutput(file: string, content: string, heldTrees: readonly string[], defaultHint: string): string {
  const absolute = path.resolve(file);
  const name = path.basename(absolute);
  const canonicalTrees = heldTrees.map(canonical);
  let dir: HostDir;
  try {
    dir = HostDir.open(path.dirname(absolute), { outside: canonicalTrees });
  } catch (error) {
    if (!(error instanceof HostDirError)) throw error;
    if (error.code === "INSIDE_SANDBOX_TREE") {
      throw usageError(
        `Refusing to write ${absolute}: ${error.message} (the run's sandbox could have left links there).`,
        `Write the page outside the run's workspace and writable roots with -o <file>. ${defaultHint}`,
      );
    }
    throw usageError(
      `Cannot write ${absolute}: ${error.message}.`,
      `Pass -o a file in a folder of yours. ${defaultHint}`,
    );
  }
  try {
    if (dir.lstat(name)?.isDirectory()) {
      throw usageError(`Cannot write ${absolute}: it is a folder.`, "Pass -o the name of a file.");
    }
    dir.replaceFile(name, content, 0o644);
    return path.join(dir.path, name);
  } catch (error) {
    if (isSandboxRunError(error)) throw error;
    throw usageError(
      `Cannot write ${absolute}: ${(error as Error).message}.`,
      `Pass -o a file in a folder of yours. ${defaultHint}`,
    );
  } finally {
    dir.close();
  }
}

/** A tree as a canonical path (a tree that no longer exists: as written). */
function canonical(tree: string): string {
  try {
    return fs.realpathSync(tree);
  } catch {
    return path.resolve(tree);
  }
}
