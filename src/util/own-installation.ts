// Where this process's own code comes from: sandbox-run's package folder (its code, its built-in
// policies, the runner image's build context; two levels above src/util, dist/util and the bundled
// dist/cli), the node_modules folders Node loads its dependencies from (the package's own, then
// each parent's), and the Node binary running it. A run must not let its sandbox write any of it
// (run/plan/resolve-options.ts): installed as a devDependency of the repository it runs on, a
// sandbox rewrote `policies/workspace-write.json` and `dist/cli/main.js`, and the next call ran as
// the caller with an open network and the provider key (review, session 26).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { resolvedPath } from "./resolved-path.js";

export interface OwnInstallation {
  /** The package folder (real path). */
  packageRoot: string;
  /** Every folder the process's code is loaded from: the package, the node_modules above it, Node's. */
  folders: string[];
}

export function ownInstallation(): OwnInstallation {
  const packageRoot = resolvedPath(fileURLToPath(new URL("../../", import.meta.url)));
  const folders = [packageRoot];
  for (let dir = packageRoot; ; dir = path.dirname(dir)) {
    if (path.basename(dir) !== "node_modules") folders.push(path.join(dir, "node_modules"));
    if (dir === path.dirname(dir)) break;
  }
  folders.push(path.dirname(resolvedPath(process.execPath)));
  return { packageRoot, folders };
}
