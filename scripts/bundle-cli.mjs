// `npm run build`, second step: bundles the CLI's sources into dist/cli/main.js and chunks next to
// it, loaded as a command needs them.
//
// Why: every `sandbox-run` call pays for the modules it loads before it does anything, and Node 20
// spends about a millisecond of CPU on each ES module it resolves, reads and links. A `--dry-run`
// runs ~90 of our modules; bundled, it loads 8 files, which keeps it within 2x a bare Node
// (docs/performance.md, `npm run bench -- --only=cli-start`). commander, which every call loads, is
// bundled in (Node would otherwise resolve and read its seven files and scan them for CommonJS
// exports); the other dependencies stay external (loaded from node_modules, lazily where the code
// says so). `import()` of a literal path loads its own chunk, so a command's work still loads only
// when it runs. The chunks sit in dist/cli, two levels below the package root like every module of
// dist, so paths made from import.meta.url (images/, policies/, package.json) resolve as they do
// unbundled.
//
// `node scripts/bundle-cli.mjs <folder>` bundles into that folder instead (two levels below the root
// too): tests/unit/cli-start-up.test.ts bundles the sources so to count what a --dry-run loads.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chunkGroups } from "./chunk-groups.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dependencies = Object.keys(JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).dependencies);
const outdir = path.resolve(root, process.argv[2] ?? "dist/cli");
const CHUNK = /^bundle-.*\.js(\.map)?$/;

// Chunks of an earlier build (their names carry a content hash).
for (const name of fs.existsSync(outdir) ? fs.readdirSync(outdir) : []) {
  if (CHUNK.test(name)) fs.rmSync(path.join(outdir, name));
}

const ENTRY = "src/cli/main.ts";
const options = {
  absWorkingDir: root,
  entryPoints: [ENTRY],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: dependencies.filter((name) => name !== "commander"),
  // commander is CommonJS: its require() of Node's modules needs a require in the ES module bundle.
  banner: {
    js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
  },
  chunkNames: "bundle-[name]-[hash]",
  sourcemap: true,
  logLevel: "warning",
};

/**
 * commander requires `child_process` when it loads, for executable subcommands this program has
 * none of: it loads `net`, `dgram` and the stream modules with it, ~8 ms of CPU on every call. It
 * gets a stand-in that requires the real module at its first use instead.
 */
const lazyChildProcessForCommander = {
  name: "lazy-child-process-for-commander",
  setup(bundle) {
    bundle.onResolve({ filter: /^(node:)?child_process$/ }, (args) =>
      /[\\/]node_modules[\\/]commander[\\/]/.test(args.importer)
        ? { path: "child_process", namespace: "lazy-child-process" }
        : undefined,
    );
    bundle.onLoad({ filter: /.*/, namespace: "lazy-child-process" }, () => ({
      contents: 'module.exports = new Proxy({}, { get: (_, key) => require("node:child_process")[key] });',
      loader: "js",
    }));
  },
};

// What every call loads (main.ts's, then program.ts's modules) and what a run loads up to its plan
// (the --dry-run path) are one chunk each (scripts/chunk-groups.mjs). Which modules those are comes
// from a first build's module graph.
const GROUPS = [[ENTRY], ["src/cli/program.ts"], ["src/cli/run-command.ts", "src/operations/dry-run.ts"]];
const { metafile } = await build({ ...options, write: false, metafile: true, logLevel: "silent" });
await build({
  ...options,
  plugins: [lazyChildProcessForCommander, chunkGroups({ root, entry: ENTRY, groups: GROUPS, metafile })],
});
