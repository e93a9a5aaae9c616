// zod, Ajv with ajv-formats, yaml and dockerode, loaded synchronously (CommonJS through createRequire: their
// first use can be in synchronous code) from the one-file bundles `npm run build` makes in
// dist/vendor (scripts/bundle-vendored.mjs): a fifth to three fifths of the packages' own loading
// CPU, which Node 20 spends resolving, reading and compiling their ~250 small files. Run from the sources
// (tsx: the tests, the scripts) there is no vendor folder next to this module's, and the packages
// load as they are.
import fs from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);

/**
 * dist/vendor as seen from this module: dist/util/vendored.js in the library, and a chunk in
 * dist/cli in the bundled CLI, are both one level below dist.
 */
const VENDOR_DIR = fileURLToPath(new URL("../vendor/", import.meta.url));

/** The vendored bundle `name` (dist/vendor/<name>.cjs) where the build made one, else `fallback()`. */
export function requireVendored<T>(
  name: "zod" | "ajv" | "yaml" | "dockerode",
  fallback: (load: NodeJS.Require) => T,
): T {
  const bundled = `${VENDOR_DIR}${name}.cjs`;
  return fs.existsSync(bundled) ? (require(bundled) as T) : fallback(require);
}
