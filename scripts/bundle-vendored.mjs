// `npm run build`, third step: zod, Ajv (with ajv-formats), yaml and dockerode as one CommonJS file each, in
// dist/vendor, which src/util/vendored.ts loads in place of the packages.
//
// Why: each is spread over many small files (zod loads 95), and Node 20 resolves, reads and
// compiles every one: loading the three cost a CLI run with a models file, a policy file and a
// schema ~240 ms of CPU. One file each, CPU ms to load (medians of 5 on this project's machine):
// zod 104 -> 63, Ajv with ajv-formats 77 -> 19, yaml 62 -> 13 (docs/performance.md, section 9).
// Same code, same versions: the ones the build's node_modules holds (package-lock.json's), bundled,
// not changed; as with commander in the CLI's bundle, a later `npm update` in an installation
// changes node_modules, not these: a new build takes it. The packages stay dependencies: their
// types, and the sources (tests, `tsx`) load them as they are. THIRD_PARTY_NOTICES beside the
// bundles names every package in them, its version and its licence text.
//
// `node scripts/bundle-vendored.mjs <folder>` writes them there instead
// (tests/unit/vendored-bundles.test.ts compares each with its package).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outdir = path.resolve(root, process.argv[2] ?? "dist/vendor");

/**
 * The Ajv options draft 2020-12's meta-schema check is compiled with: those of the host's result
 * check (src/run/result-validator.ts: AJV_OPTIONS, with allErrors), all of them. The check carries
 * them (`madeWith`), and the host uses it only when its own options are the same.
 */
const META_CHECK_OPTIONS = {
  allErrors: true,
  strict: false,
  validateFormats: true,
  unicodeRegExp: true,
  addUsedSchema: false,
  ownProperties: true,
};

/**
 * Draft 2020-12's meta-schema compiled now, as Ajv's standalone code: Ajv compiles it on a process's
 * first schema to check that schema (~90 ms of CPU; loading this code, ~6 ms). The code is Ajv's
 * own, from its own compiler; it `require`s Ajv's runtime helpers, which the bundle holds.
 * The meta-schema's formats are not checked (Ajv compiles meta-schemas without them).
 */
function draft2020MetaCheckSource() {
  const require = createRequire(path.join(root, "package.json"));
  const { Ajv2020 } = require("ajv/dist/2020.js");
  const standaloneCode = require("ajv/dist/standalone").default;
  const ajv = new Ajv2020({ ...META_CHECK_OPTIONS, code: { source: true } });
  const code = standaloneCode(ajv, ajv.getSchema("https://json-schema.org/draft/2020-12/schema"));
  if (/\bformats\d/.test(code)) throw new Error("bundle-vendored: the meta-schema check names a format");
  return `const draft2020MetaCheck = (() => { const module = { exports: {} };\n${code}\nreturn module.exports; })();\ndraft2020MetaCheck.madeWith = ${JSON.stringify(META_CHECK_OPTIONS)};`;
}

/** Each file's name in dist/vendor and what it exports, as the source of a module. */
const VENDORED = {
  zod: 'export { z } from "zod";',
  ajv: `const { Ajv2020 } = require("ajv/dist/2020.js");\nconst addFormats = require("ajv-formats").default;\n${draft2020MetaCheckSource()}\nmodule.exports = { Ajv2020, addFormats, draft2020MetaCheck };`,
  yaml: 'module.exports = require("yaml");',
  dockerode: 'module.exports = require("dockerode");',
};

/**
 * Modules dockerode and docker-modem require that our runs never or rarely call: BuildKit's
 * session (gRPC and protobuf), BuildKit itself (its `followProgress`; protobuf), the ssh://
 * transport (ssh2; our ssh engines go through src/engine/ssh-tunnel.ts), and split-ca (read a CA
 * file by path; it ships no licence file to bundle with it). In the bundle each is a stand-in that
 * requires the real one from node_modules on its first use (`object`: it exports an object, not a
 * function), as src/engine/load-dockerode.ts does for session and ssh where there is no bundle.
 */
const DEFERRED = [
  { importer: "dockerode/lib/docker.js", request: "./session", file: "dockerode/lib/session.js" },
  { importer: "dockerode/lib/docker.js", request: "./buildkit", file: "dockerode/lib/buildkit.js", object: true },
  { importer: "docker-modem/lib/modem.js", request: "./ssh", file: "docker-modem/lib/ssh.js", via: ["docker-modem"] },
  { importer: "docker-modem/lib/modem.js", request: "split-ca", file: "split-ca/index.js", via: ["docker-modem"] },
];

/**
 * A stand-in's source: the real module, required on the first use, is found as its package finds
 * it: from dockerode (sandbox-run's own dependency), then through each package of `via`. An install
 * that does not hoist (npm's `--install-strategy=linked`, pnpm) has docker-modem and split-ca only
 * beside dockerode, where a bare require from dist/vendor does not look (review, session 44).
 */
function standInSource({ file, via = [], object = false }) {
  return [
    'const { createRequire } = require("node:module");',
    "let real;",
    "const load = () => {",
    "  if (!real) {",
    '    let from = createRequire(require.resolve("dockerode/package.json"));',
    `    for (const name of ${JSON.stringify(via)}) from = createRequire(from.resolve(\`\${name}/package.json\`));`,
    `    real = from(${JSON.stringify(file)});`,
    "  }",
    "  return real;",
    "};",
    // A module exporting one function gets a function; one exporting an object (buildkit's
    // `{ followProgress }`), an object whose properties are the real one's.
    object
      ? "module.exports = new Proxy({}, { get: (_target, key) => load()[key] });"
      : "module.exports = function (...args) {\n  return load().apply(this, args);\n};",
  ].join("\n");
}

/** The esbuild plugin that puts DEFERRED's stand-ins in place of their modules. */
const deferRarelyUsed = {
  name: "defer-rarely-used",
  setup(build) {
    build.onResolve({ filter: /^(\.\/(session|buildkit|ssh)|split-ca)$/ }, ({ path: request, importer, namespace }) => {
      const deferred = DEFERRED.find((d) => d.request === request && importer.endsWith(`/node_modules/${d.importer}`));
      return namespace === "file" && deferred ? { path: deferred.file, namespace: "deferred" } : undefined;
    });
    build.onLoad({ filter: /.*/, namespace: "deferred" }, ({ path: file }) => ({
      contents: standInSource(DEFERRED.find((d) => d.file === file)),
      loader: "js",
      resolveDir: root,
    }));
    // The stand-in's own requires stay requires, made where the bundle runs.
    build.onResolve({ filter: /.*/ }, ({ path: request, namespace }) =>
      namespace === "deferred" ? { path: request, external: true } : undefined,
    );
  },
};

/** The package folder a bundled file came from (its last node_modules/<name> or node_modules/@scope/<name>). */
function packageFolder(input) {
  const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
  return match ? path.resolve(root, match[1]) : undefined;
}

/** A package's licence text: its LICENSE (or LICENCE, COPYING) file. */
function licenceText(folder) {
  const file = fs.readdirSync(folder).find((name) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(name));
  if (!file) throw new Error(`bundle-vendored: ${folder} has no licence file to ship with its code`);
  return fs.readFileSync(path.join(folder, file), "utf8").trim();
}

fs.mkdirSync(outdir, { recursive: true });
/** Package folder -> the bundles holding its code. */
const bundledFrom = new Map();
for (const [name, contents] of Object.entries(VENDORED)) {
  const { metafile } = await build({
    metafile: true,
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
    plugins: name === "dockerode" ? [deferRarelyUsed] : [],
  });
  for (const input of Object.keys(metafile.inputs)) {
    const folder = packageFolder(input);
    if (folder) bundledFrom.set(folder, new Set([...(bundledFrom.get(folder) ?? []), `${name}.cjs`]));
  }
}
const notices = [...bundledFrom]
  .map(([folder, bundles]) => {
    const manifest = JSON.parse(fs.readFileSync(path.join(folder, "package.json"), "utf8"));
    const title = `${manifest.name} ${manifest.version} (${manifest.license}), in ${[...bundles].sort().join(", ")}`;
    return { title, text: `## ${title}\n\n${licenceText(folder)}\n` };
  })
  .sort((a, b) => a.title.localeCompare(b.title));
fs.writeFileSync(
  path.join(outdir, "THIRD_PARTY_NOTICES"),
  `The .cjs files in this folder bundle the code of these packages (scripts/bundle-vendored.mjs):\n\n${notices.map((n) => n.text).join("\n")}`,
);
