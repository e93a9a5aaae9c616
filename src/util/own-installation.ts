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

export function ownInstallation(moduleUrl: string = import.meta.url): OwnInstallation {
  const packageRoot = resolvedPath(fileURLToPath(new URL("../../", moduleUrl)));
  const folders = [packageRoot];
  for (let dir = packageRoot; ; dir = path.dirname(dir)) {
    if (path.basename(dir) !== "node_modules") {
      const modules = path.join(dir, "node_modules");
      folders.push(modules);
      // A node_modules that is a link (a shared or hoisted install) loads from where it leads: that
      // folder too (session 27: its real path was writable while the link's was refused).
      const real = resolvedPath(modules);
      if (real !== modules) folders.push(real);
    }
    if (dir === path.dirname(dir)) break;
  }
  folders.push(path.dirname(resolvedPath(process.execPath)));
  return { packageRoot, folders };
}

/** A path this process was started through, and how. */
export interface LaunchPath {
  path: string;
  how: "script" | "preload" | "package-manager";
}

/**
 * What started this process, as the caller's next start will go through it again: the script as
 * invoked (`<repo>/node_modules/.bin/sandbox-run`, or a program of the caller's), the modules Node
 * preloads (`--require`, `--import`, `--loader` in NODE_OPTIONS or on the command line: an
 * `.npmrc`'s node-options, yarn's `.pnp.cjs`), and the project folder a package manager started it
 * from (npx, `npm run`, yarn and pnpm take sandbox-run, node and their options from its
 * node_modules/.bin and .npmrc). Not resolved: a link on the way is judged where it is.
 */
export function launchPaths(
  env: NodeJS.ProcessEnv = process.env,
  argv: readonly string[] = process.argv,
  execArgv: readonly string[] = process.execArgv,
  cwd: string = process.cwd(),
): LaunchPath[] {
  const out: LaunchPath[] = [];
  // `node -e`/`-p` and `node -` have no script file: argv[1] is then an argument.
  const noScript = execArgv.some((a) => /^(-e|--eval|-p|--print)(=|$)/.test(a)) || argv[1] === "-";
  if (argv[1] && !noScript) out.push({ path: path.resolve(cwd, argv[1]), how: "script" });
  const options = [...execArgv, ...(env.NODE_OPTIONS ?? "").split(/\s+/).filter((w) => w !== "")];
  for (let i = 0; i < options.length; i++) {
    const flag = options[i]!;
    const eq = /^(--require|-r|--import|--loader|--experimental-loader)=(.+)$/.exec(flag);
    const raw = eq ? eq[2]! : PRELOAD_FLAGS.has(flag) ? options[++i] : undefined;
    const value = raw?.replace(/^["']|["']$/g, "");
    if (!value) continue;
    if (/^(\.{0,2}\/|file:)/.test(value)) {
      out.push({ path: path.resolve(cwd, value.replace(/^file:\/\//, "")), how: "preload" });
      continue;
    }
    // A package name (`-r dotenv/config`, `--import tsx`): Node finds it in the node_modules of the
    // working directory and each folder above, usually the workspace's (review, session 26).
    const name = value.startsWith("@") ? value.split("/").slice(0, 2).join("/") : value.split("/")[0]!;
    if (name.startsWith("node:")) continue;
    for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
      out.push({ path: path.join(dir, "node_modules", name), how: "preload" });
      if (dir === path.dirname(dir)) break;
    }
  }
  const viaPackageManager = Boolean(env.npm_execpath || env.npm_command || env.npm_lifecycle_event);
  if (viaPackageManager)
    for (const folder of [env.npm_config_local_prefix, env.INIT_CWD, env.PROJECT_CWD])
      if (folder && path.isAbsolute(folder)) out.push({ path: folder, how: "package-manager" });
  return out;
}

const PRELOAD_FLAGS = new Set(["--require", "-r", "--import", "--loader", "--experimental-loader"]);
