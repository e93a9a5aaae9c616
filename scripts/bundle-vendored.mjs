// `npm run build`, third step: zod, Ajv (with ajv-formats) and yaml as one CommonJS file each, in
// dist/vendor, which src/util/vendored.ts loads in place of the packages.
//
// Why: each is spread over many small files (zod loads 95), and Node 20 resolves, reads and
// compiles every one: loading the three cost a CLI run with a models file, a policy file and a
// schema ~240 ms of CPU. One file each, CPU ms to load (medians of 5 on this project's machine):
// zod 104 -> 63, Ajv with ajv-formats 77 -> 19, yaml 62 -> 13 (docs/performance.md, section 9). Same code, same versions (the ones in node_modules, which
// package.json pins): bundled, not changed. The packages stay dependencies: their types, their
// licences in node_modules, and the sources (tests, `tsx`) load them as they are.
//
// `node scripts/bundle-vendored.mjs <folder>` writes them there instead
// (tests/unit/vendored-bundles.test.ts compares each with its package).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outdir = path.resolve(root, process.argv[2] ?? "dist/vendor");

/** Each file's name in dist/vendor and what it exports, as the source of a module. */
const VENDORED = {
  zod: 'export { z } from "zod";',
  ajv: 'const { Ajv2020 } = require("ajv/dist/2020.js");\nconst addFormats = require("ajv-formats").default;\nmodule.exports = { Ajv2020, addFormats };',
  yaml: 'module.exports = require("yaml");',
};

fs.mkdirSync(outdir, { recursive: true });
for (const [name, contents] of Object.entries(VENDORED)) {
  await build({
    absWorkingDir: root,
    stdin: { contents, resolveDir: root, sourcefile: `vendor-${name}.js`, loader: "js" },
    outfile: path.join(outdir, `${name}.cjs`),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    // Their licence texts stay where they are (node_modules); comments naming one stay in the file.
    legalComments: "inline",
    banner: { js: `// ${name}, bundled from node_modules by scripts/bundle-vendored.mjs (npm run build).` },
    logLevel: "warning",
  });
}
