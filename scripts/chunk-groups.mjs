// An esbuild plugin for scripts/bundle-cli.mjs: puts each of a few groups of modules into one chunk
// of the split bundle.
//
// Why: esbuild puts a module in the chunk of the exact set of entry points (the bundle's entry and
// every `import()` target) that reach it. The CLI's ~30 lazy targets share the plan's modules in
// ~45 different sets, so a `--dry-run` loaded 51 files with ~170 imports between them; as 8 files it
// costs ~40 ms less CPU (session 38, docs/performance.md).
//
// How: group i is the modules its `entries` import statically, directly or not, less the earlier
// groups'. A module outside a group that imports one of its modules imports the whole group (a
// module that imports all of them) first, and an `import()` of one of its modules loads a facade
// that imports the group, then re-exports the module. Every entry point that reaches one module of
// a group then reaches all of them, so the group is one chunk. The bundle's entry module imports its
// own group too (it is not in that module: the entry waits, with top-level await, for what imports
// the group). src has no import cycles (dependency-cruiser), so the order the modules run in stays
// one their imports allow.
import fs from "node:fs";
import path from "node:path";

/** Group of each module (paths relative to root, as in esbuild's metafile), from a first build's metafile. */
export function moduleGroups(inputs, groups) {
  const groupOf = new Map();
  for (const [index, entries] of groups.entries()) {
    const pending = [...entries];
    while (pending.length > 0) {
      const file = pending.pop();
      if (groupOf.has(file) || !inputs[file] || file.includes("node_modules/")) continue;
      groupOf.set(file, index);
      for (const record of inputs[file].imports) if (record.kind === "import-statement") pending.push(record.path);
    }
  }
  return groupOf;
}

/** The plugin, for `groups` (lists of modules relative to root) of the bundle with entry point `entry`. */
export function chunkGroups({ root, entry, groups, metafile }) {
  const groupOf = moduleGroups(metafile.inputs, groups);
  const groupOfPath = (file) => groupOf.get(path.relative(root, file));
  const importGroup = (group) => `import "chunk-group:${group}";`;
  return {
    name: "chunk-groups",
    setup(bundle) {
      // A source module: with an import of each other group it imports from (the entry's own too).
      bundle.onLoad({ filter: /\.ts$/, namespace: "file" }, (args) => {
        const file = path.relative(root, args.path);
        const imported = new Set(
          (metafile.inputs[file]?.imports ?? [])
            .filter((record) => record.kind === "import-statement" && groupOf.has(record.path))
            .map((record) => groupOf.get(record.path))
            .filter((group) => group !== groupOf.get(file) || file === entry),
        );
        if (imported.size === 0) return undefined;
        // At the start of a line (after a #! line), so the source map's lines stay the source's.
        const source = fs.readFileSync(args.path, "utf8");
        const at = source.startsWith("#!") ? source.indexOf("\n") + 1 : 0;
        return {
          contents: source.slice(0, at) + [...imported].map(importGroup).join("") + source.slice(at),
          loader: "ts",
        };
      });
      // An `import()` of a grouped module: its facade.
      bundle.onResolve({ filter: /^\./ }, async (args) => {
        if (args.kind !== "dynamic-import" || args.pluginData === "as is") return undefined;
        const { kind, importer, namespace, resolveDir } = args;
        const resolved = await bundle.resolve(args.path, {
          kind,
          importer,
          namespace,
          resolveDir,
          pluginData: "as is",
        });
        const group = resolved.errors.length > 0 ? undefined : groupOfPath(resolved.path);
        if (group === undefined) return undefined;
        return { path: resolved.path, namespace: "chunk-group-facade", pluginData: group };
      });
      bundle.onLoad({ filter: /./, namespace: "chunk-group-facade" }, (args) => {
        const file = JSON.stringify(args.path);
        const hasDefault = /^export default /m.test(fs.readFileSync(args.path, "utf8"));
        const lines = [importGroup(args.pluginData), `export * from ${file};`];
        if (hasDefault) lines.push(`export { default } from ${file};`);
        return { contents: lines.join("\n"), resolveDir: path.dirname(args.path), loader: "js" };
      });
      // A group: a module that imports all of its modules.
      bundle.onResolve({ filter: /^chunk-group:/ }, (args) => ({ path: args.path, namespace: "chunk-group" }));
      bundle.onLoad({ filter: /./, namespace: "chunk-group" }, (args) => {
        const group = Number(args.path.slice("chunk-group:".length));
        const members = [...groupOf].filter(([file, index]) => index === group && file !== entry);
        const lines = members.map(([file]) => `import ${JSON.stringify(path.join(root, file))};`);
        return { contents: lines.join("\n"), resolveDir: root, loader: "js" };
      });
    },
  };
}
