// The helper programs integration tests start as processes of their own (a controller the test
// kills or measures, the host side of a workspace), each bundled from the sources into one file by
// the global set-up, once per project and test run. Through `node --import tsx` every such process
// compiled the sources it loads on the fly: ~1.1 CPU-s and ~0.9 s more per process than the bundle
// (a controller's whole 2-turn run: 1.8-2.1 against 0.7-0.9 CPU-s), and the suites start ~80 of them.
// Bundled from the sources, not taken from dist/, so they run the code under test even when no
// build followed the last edit.
// (No vitest import here: the global set-up loads this module, where vitest's test API is absent.)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { processAlive } from "../../src/run/run-dirs.js";

/** Each script's entry point, from the repository's root. */
const ENTRY_POINTS = {
  hostileController: "tests/support/hostile-controller.ts",
  warmController: "tests/support/warm-controller.ts",
  workspaceController: "tests/support/workspace-controller.ts",
} as const;

export type TestScript = keyof typeof ENTRY_POINTS;

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Where the bundles go: two levels below the root, like every module of src/ and dist/, so the
 * paths the sources make from import.meta.url (images/, policies/, package.json) hold. */
const BUILD_ROOT = path.join(REPO_ROOT, ".test-build");

/** Bundles every script into a folder of this process and project; returns it and its removal. */
export async function bundleTestScripts(project: string): Promise<{ dir: string; remove: () => void }> {
  removeAbandoned();
  const dir = path.join(BUILD_ROOT, `${process.pid}-${project.replace(/[^A-Za-z0-9_-]/g, "_")}`);
  await build({
    absWorkingDir: REPO_ROOT,
    entryPoints: ENTRY_POINTS,
    outdir: dir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    // Dependencies load from node_modules (found walking up from the bundle), as for the CLI.
    packages: "external",
    banner: {
      js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
  const remove = () => {
    fs.rmSync(dir, { recursive: true, force: true });
    // The shared parent too once no other run's folder is in it (no empty folder left in the clone).
    try {
      fs.rmdirSync(BUILD_ROOT);
    } catch {
      // Another project's or test run's folder is still in it.
    }
  };
  return { dir, remove };
}

/** Folders of test runs whose process is gone (killed before their teardown). */
function removeAbandoned(): void {
  for (const name of fs.existsSync(BUILD_ROOT) ? fs.readdirSync(BUILD_ROOT) : []) {
    const pid = Number(name.split("-")[0]);
    if (Number.isInteger(pid) && !processAlive(pid))
      fs.rmSync(path.join(BUILD_ROOT, name), { recursive: true, force: true });
  }
}
