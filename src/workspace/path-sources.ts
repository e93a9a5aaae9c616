// What a lent tree's own environment files make the host run when a shell enters the folder
// (direnv allowed, mise activated and trusted): the folders they put on PATH (direnv's `PATH_add
// dir...`, `path_add PATH dir...`, `load_prefix`, the layouts; mise's `[env] _.path` and
// `_.python.venv`), from which the host's shell runs the commands a person types (an executable the
// run dropped there shadows `git`, `ls` or `npm`); and the files they source or load (direnv's
// `source_env`, `source`/`.`, `dotenv` (a .env sets LD_PRELOAD or PATH), `use nix`/`use flake`,
// `use vim`; mise's `_.source`, `_.file` and the paths in `[hooks]` commands), which direnv and
// mise run again on `cd` without asking while the trusted file itself is unchanged. The run
// protects all of these like the paths a repository's git config names (rule git-config-paths).
//
// `layout node`'s folder (and `layout php`'s vendor/bin) is the exception: `npm install` rewrites
// node_modules/.bin, and what its entries run (node_modules/<package>/...) is the repository's own
// code, which the run may change anyway. What a person does not expect there is a command of the
// host's: so in that folder only the names of the host's commands (every name in the folders of the
// controller's PATH and the standard system folders, none inside the lent trees) are protected, and
// the folder itself stays a folder (a parent of a protected path that turns into something else is
// a violation).
//
// Only the files at the top of each folder given (the lent trees and the repositories' worktrees),
// and the files an .envrc sources from there, are read, as they were before the run: small regular
// files, through a symlink as the tools read them. Nix expressions that shell.nix or flake.nix import are not
// followed (docs/security.md, "What is not promised").
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { readSmallFile as readSmallFileBytes } from "../util/read-fd.js";
import { resolvedPath } from "../util/resolved-path.js";
import { protectionRefusal, TargetBudget } from "./config-target-budget.js";
import type { ConfigTarget } from "./git-config-paths.js";
import { shellCommands, shellWords } from "./shell-commands.js";

const MAX_FILE_BYTES = 256 * 1024;
/** Where a login shell finds commands whatever the controller's PATH says. */
const SYSTEM_COMMAND_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
/** Folders of packages' commands: node_modules/.bin anywhere, npx's cache, npm's node-gyp shim. */
const PACKAGE_BIN_FOLDER = /(^|\/)(node_modules|_npx)(\/|$)|\/node-gyp-bin$/;
/** A folder with more names than this is read only this far (a name is all that is taken). */
const MAX_NAMES_PER_DIR = 20_000;

/** A folder's mise files: their `{{config_root}}` and relative paths mean that folder. */
export const MISE_FILES = [
  "mise.toml",
  ".mise.toml",
  "mise.local.toml",
  ".mise.local.toml",
  ".mise/config.toml",
  ".config/mise.toml",
  ".config/mise/config.toml",
  "mise/config.toml",
  "mise/config.local.toml",
  ".rtx.toml",
  ".rtx.local.toml",
  ".mise/config.local.toml",
];

/**
 * The mise files of a folder: the fixed names, and those per environment (`mise.<env>.toml`,
 * `.mise.<env>.local.toml`, `mise/config.<env>.toml`) and in `.config/mise/conf.d/`, which mise
 * reads and trusts with the folder.
 */
function miseFilesIn(dir: string): string[] {
  const names = new Set(MISE_FILES);
  for (const [folder, pattern] of [
    ["", /^\.?mise\.[^/]+\.toml$/],
    ["mise", /^config\.[^/]+\.toml$/],
    [".mise", /^config\.[^/]+\.toml$/],
    [".config/mise", /^config\.[^/]+\.toml$/],
    [".config", /^mise\.[^/]+\.toml$/],
    [".config/mise/conf.d", /\.toml$/],
  ] as const)
    for (const name of namesIn(path.join(dir, folder))
      .filter((n) => pattern.test(n))
      .slice(0, MAX_MISE_FILES))
      names.add(folder === "" ? name : `${folder}/${name}`);
  return [...names];
}

function namesIn(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** Per-environment mise files read per folder. */
const MAX_MISE_FILES = 64;

/**
 * What making or refreshing a venv writes into its bin/: python, pip and the activate scripts
 * (pyenv-virtualenv puts `activate` and `deactivate` on the host's PATH, and making the venv then
 * failed the run; review of real repositories, session 26), virtualenv's and uv's extras too.
 */
const VENV_OWN_NAMES =
  /^((python|pip|pydoc|wheel|easy_install)[0-9.]*(\.exe|\.bat)?|[Aa]ctivate(\.(csh|fish|nu|ps1|bat|xsh))?|activate_this\.py|deactivate(\.(bat|nu))?)$/;

/** How deep an .envrc's sourced files are followed (each is read as it was, like the .envrc). */
const MAX_SOURCE_DEPTH = 4;

/**
 * What the environment files at the top of `dirs` make the host run (absolute): the folders they
 * put on PATH and the files they source or load, with the key and file that say so; a folder
 * where only the host's command names are guarded (layout node) is marked `commands`.
 */
export function pathSourceTargets(dirs: readonly string[], budget: TargetBudget = new TargetBudget()): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  // One entry per path (the first file that names it), each counted against the run's budget
  // (past it the run is refused, not the rest left unguarded: config-target-budget.ts). A folder
  // where only the host's command names are guarded is one entry, judged by name at each file:
  // one target per name made a monorepo's packages with `layout node` 1,600-5,000 paths each,
  // and a 149 KB .envrc 15 million (review, session 25).
  const seen = new Set<string>();
  const push = (dir: string, source: string, { key, target, commandsOnly, exceptNames }: EnvTarget) => {
    const resolved = path.resolve(dir, target);
    const guarded = `${commandsOnly ? "commands" : "whole"}\0${resolved}`;
    if (seen.has(guarded)) return;
    seen.add(guarded);
    budget.take(source);
    if (!commandsOnly) out.push({ path: resolved, key, source });
    else
      out.push({
        path: resolved,
        key: `${key} (a host command's name)`,
        source,
        commands: exceptNames ? { except: exceptNames } : {},
      });
  };
  for (const dir of new Set(dirs)) {
    for (const { dir: base, source, target } of envrcClosure(dir)) push(base, source, target);
    for (const mise of miseFilesIn(dir)) {
      const file = path.join(dir, mise);
      for (const target of miseTargets(readConfigText(file))) push(dir, file, target);
    }
    const toolVersions = path.join(dir, ".tool-versions");
    for (const target of toolVersionsTargets(readConfigText(toolVersions))) push(dir, toolVersions, target);
  }
  return out;
}

/** The .envrc at `dir` and the files it sources, each target with the folder it is relative to. */
function envrcClosure(dir: string): Array<{ dir: string; source: string; target: EnvTarget }> {
  const out: Array<{ dir: string; source: string; target: EnvTarget }> = [];
  const seen = new Set<string>();
  // direnv's PWD is the .envrc's folder; source_env moves it to the sourced file's folder, a plain
  // `source` does not.
  const visit = (file: string, pwd: string, depth: number) => {
    if (seen.has(file) || depth > MAX_SOURCE_DEPTH) return;
    seen.add(file);
    for (const target of envrcTargets(readConfigText(file))) {
      out.push({ dir: pwd, source: file, target });
      if (!target.sourced) continue;
      const sourced = path.resolve(pwd, target.target);
      visit(sourced, target.sourced === "source_env" ? path.dirname(sourced) : pwd, depth + 1);
    }
  };
  visit(path.join(dir, ".envrc"), dir, 0);
  return out;
}

/** A path an environment file makes the host run, relative to the file's folder (or absolute). */
export interface EnvTarget {
  key: string;
  target: string;
  /** Only the names of the host's commands in it are guarded (layout node's node_modules/.bin). */
  commandsOnly?: true;
  /** Names a commandsOnly folder's own tool writes there, not guarded (a venv's python and pip). */
  exceptNames?: RegExp;
  /** A shell file the .envrc runs, followed for its own targets (source_env moves PWD to its folder). */
  sourced?: "source_env" | "source";
}

/** direnv: what an .envrc puts on PATH, sources and loads (relative to its folder, or absolute). */
export function envrcTargets(text: string | undefined): EnvTarget[] {
  if (text === undefined) return [];
  const out: EnvTarget[] = [];
  const add = (key: string, arg: string | undefined, extra: Partial<EnvTarget> = {}) => {
    const target = resolvable(arg);
    if (target === undefined) return;
    // A folder a package manager fills (node_modules/.bin, vendor/bin) is guarded like layout node's.
    const filled = /(^|\/)(node_modules\/\.bin|vendor\/bin)\/?$/.test(target) ? { commandsOnly: true as const } : {};
    out.push({ key, target, ...filled, ...extra });
  };
  for (const [command, ...args] of shellCommands(text)) {
    const layout = command === "layout" ? (args[0] ?? "") : undefined;
    const assignment = command === "export" ? args.find((a) => a.startsWith("PATH=")) : command;
    if (assignment?.startsWith("PATH="))
      // `export PATH="$PWD/bin:$PATH"`: every folder but the PATH it extends.
      for (const entry of assignment.slice("PATH=".length).split(":"))
        if (!/^\$\{?PATH\}?$/.test(entry) && entry !== "") add("direnv PATH=", entry);
    if (command === "PATH_add") for (const a of args) add("direnv PATH_add", a);
    else if (command === "path_add" && args[0] === "PATH")
      for (const a of args.slice(1)) add("direnv path_add PATH", a);
    else if (command === "load_prefix") {
      add("direnv load_prefix", args[0] === undefined ? undefined : `${args[0]}/bin`);
      add("direnv load_prefix", args[0] === undefined ? undefined : `${args[0]}/sbin`);
    } else if (layout === "node") add("direnv layout node", "node_modules/.bin", { commandsOnly: true });
    else if (layout === "php") add("direnv layout php", "vendor/bin", { commandsOnly: true });
    else if (layout === "go") {
      add("direnv layout go", "bin");
      add("direnv layout go", ".direnv");
    } else if (layout !== undefined && /^(python\d*|pipenv|pyenv|anaconda|uv|poetry|perl|ruby)$/.test(layout))
      add(`direnv layout ${layout}`, ".direnv");
    else if (command === "source_env" || command === "source_env_if_exists")
      // A folder means its .envrc; which one is read is decided on the host, so both are guarded.
      for (const t of [args[0], args[0] === undefined ? undefined : `${args[0]}/.envrc`])
        add(`direnv ${command}`, t, { sourced: "source_env" });
    else if (command === "source" || command === ".") add(`direnv ${command}`, args[0], { sourced: "source" });
    else if (command === "dotenv" || command === "dotenv_if_exists") {
      // A .env sets any variable in the host's shell (PATH, LD_PRELOAD, BASH_ENV); a folder means its .env.
      add(`direnv ${command}`, args[0] ?? ".env");
      if (args[0] !== undefined) add(`direnv ${command}`, `${args[0]}/.env`);
    } else if (command === "use" && args[0] === "nix") {
      const files = args.slice(1).filter((a) => a.endsWith(".nix"));
      for (const f of files.length > 0 ? files : ["shell.nix", "default.nix"]) add("direnv use nix", f);
    } else if (command === "use" && args[0] === "flake")
      for (const f of ["flake.nix", "flake.lock"]) add("direnv use flake", f);
    else if (command === "use" && args[0] === "vim") add("direnv use vim", args[1] ?? ".vimrc.local");
  }
  return out;
}

/**
 * mise: in [env], `_.path` (PATH folders), `_.source` (scripts run on cd), `_.file` (env files) and
 * `_.python.venv` (its bin folder on PATH; a `{ path = ... }` table too), also written under
 * `[env._]` or `[env._.python]`; in [hooks] and a `[[watch_files]]` `run`, every word with a `/` in its commands. A string or an
 * array of strings, possibly over lines; `{{config_root}}` is the file's folder.
 */
export function miseTargets(text: string | undefined): EnvTarget[] {
  if (text === undefined) return [];
  const out: EnvTarget[] = [];
  let table = "";
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = tomlLine(lines[i]!).code.trim();
    const header = /^\[\[?([^\]]+)\]\]?$/.exec(line);
    if (header) {
      table = header[1]!.replace(/\s+/g, "");
      continue;
    }
    const assignment = /^([\w.\-"']+)\s*=\s*(.*)$/.exec(line);
    if (!assignment) continue;
    const key = assignment[1]!.replace(/["']/g, "");
    const kind = miseKind(table === "" ? key : `${table}.${key}`);
    if (kind === undefined) continue;
    let value = assignment[2]!;
    // An array or inline table may span lines: read on to its closing bracket (each line scanned once).
    const close = value.startsWith("[") ? "]" : value.startsWith("{") ? "}" : undefined;
    let closed = close === undefined || tomlLine(value).outsideStrings.includes(close);
    while (!closed && i + 1 < lines.length) {
      const next = tomlLine(lines[++i]!);
      value += ` ${next.code.trim()}`;
      closed = next.outsideStrings.includes(close!);
    }
    if (kind === "hooks") {
      for (const command of tomlStrings(value))
        for (const word of shellWords(command))
          if (word.includes("/"))
            pushMise(out, { key: table === "watch_files" ? "mise [[watch_files]] run" : "mise [hooks]", target: word });
    } else if (kind === "tools") {
      // A `path:` version is a folder of the tree whose bin/ mise puts first on PATH.
      for (const version of tomlStrings(value))
        if (version.startsWith("path:"))
          pushMise(out, { key: "mise [tools] path:", target: version.slice("path:".length) });
    } else if (kind === "python.venv") {
      const venv = value.startsWith("{")
        ? tomlStrings(/\bpath\s*=\s*("[^"]*"|'[^']*')/.exec(value)?.[1] ?? "")
        : tomlStrings(value);
      // Like layout node: the venv's own commands are the repository's packages; a host command's name is not.
      for (const entry of venv)
        pushMise(out, {
          key: "mise [env] _.python.venv",
          target: `${entry || "."}/bin`,
          commandsOnly: true,
          exceptNames: VENV_OWN_NAMES,
        });
    } else for (const entry of tomlStrings(value)) pushMise(out, { key: `mise [env] _.${kind}`, target: entry || "." });
  }
  return out;
}

/** What a mise key (`<table>.<key>`, dotted) makes the host run, if anything. */
function miseKind(key: string): "path" | "source" | "file" | "python.venv" | "hooks" | "tools" | undefined {
  if (key.startsWith("hooks.")) return "hooks";
  // Run at the next prompt after a watched file changed (review, session 26: it was not read).
  if (key === "watch_files.run") return "hooks";
  if (key.startsWith("tools.")) return "tools";
  return /^env\._\.(path|source|file|python\.venv)$/.exec(key)?.[1] as
    | "path"
    | "source"
    | "file"
    | "python.venv"
    | undefined;
}

/** A TOML line cut at its comment (a `#` outside a string), and that with its strings left out (what holds the brackets). */
function tomlLine(line: string): { code: string; outsideStrings: string } {
  let outside = "";
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === "#") return { code: line.slice(0, i), outsideStrings: outside };
    else outside += c;
  }
  return { code: line, outsideStrings: outside };
}

function tomlStrings(value: string): string[] {
  return [...value.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)].map((m) => m[1] ?? m[2] ?? "");
}

function pushMise(out: EnvTarget[], entry: EnvTarget): void {
  const target = entry.target.replace(/^\{\{\s*config_root\s*\}\}\/?/, "") || ".";
  if (!target.includes("{{") && !target.includes("$")) out.push({ ...entry, target });
}

/** asdf's and mise's `.tool-versions`: a `path:` version is a folder whose bin/ goes first on PATH. */
export function toolVersionsTargets(text: string | undefined): EnvTarget[] {
  if (text === undefined) return [];
  const out: EnvTarget[] = [];
  for (const line of text.split("\n"))
    for (const word of shellWords(line).slice(1))
      if (word.startsWith("path:")) {
        const target = resolvable(word.slice("path:".length));
        if (target !== undefined) out.push({ key: ".tool-versions path:", target });
      }
  return out;
}

/** A path word as direnv resolves it: $PWD and ${PWD} are the .envrc's folder; other expansions are not resolved here. */
function resolvable(arg: string | undefined): string | undefined {
  if (arg === undefined) return undefined;
  const target = arg.replace(/^\$\{?PWD\}?(\/|$)/, "") || ".";
  // `~` is the host's home, outside any lent tree (lending it is refused).
  return /[$`]/.test(target) || target.startsWith("~") ? undefined : target;
}

/**
 * The names a shell on this host finds as commands: every entry of the absolute folders of `pathVar`
 * and the system folders (a name is enough: more names only guard more), leaving out folders inside
 * `lentTrees` (a controller started by `npm run` has the repository's own node_modules/.bin on PATH).
 */
export function hostCommandNames(pathVar: string | undefined, lentTrees: readonly string[]): Set<string> {
  const names = new Set<string>();
  const inside = (dir: string) => lentTrees.some((tree) => dir === tree || dir.startsWith(`${tree}/`));
  // Not a package manager's folders (npx's cache of sandbox-run's own dependencies put `yaml` among
  // them, and an agent's `npm install` writing node_modules/.bin/yaml was refused: fix review,
  // round 3, session 42): their names are packages' commands, which a project's own may shadow.
  const dirs = [...(pathVar ?? "").split(":"), ...SYSTEM_COMMAND_DIRS].filter(
    (dir) => path.isAbsolute(dir) && !inside(path.resolve(dir)) && !PACKAGE_BIN_FOLDER.test(path.resolve(dir)),
  );
  for (const dir of new Set(dirs.map((d) => path.resolve(d)))) {
    let listing: fs.Dir;
    try {
      listing = fs.opendirSync(dir);
    } catch {
      continue;
    }
    try {
      for (let n = 0, entry = listing.readSync(); entry && n < MAX_NAMES_PER_DIR; n++, entry = listing.readSync())
        if (!entry.name.includes("/")) names.add(entry.name);
    } catch {
      // A folder that cannot be read on: its names so far count.
    } finally {
      listing.closeSync();
    }
  }
  return names;
}

/**
 * The folders of the caller's own PATH that lie in a lent tree, as written or with links resolved
 * (a CI step's `$GITHUB_PATH`, the node_modules/.bin that `npm run` and `npx` put first, `~/go/bin`
 * with `--writable ~/go`): the caller's shell or the CI job's next step runs a command found there
 * before the system's (review, round 3, session 42: the sandbox's `bin/git` ran at the caller's
 * next `git status`). Guarded as layout node's folder is: the host's command names in it. A
 * relative or empty entry is read from wherever the caller's next command runs: it is guarded
 * below the working directory and below each tree's top; `~` is the home, as bash reads it (the
 * fix review's A2-A4). Not done: a link on the way inside a tree may be pointed elsewhere
 * (docs/security.md, not promised).
 */
export function callerPathTargets(pathVar: string | undefined, lentTrees: readonly string[]): ConfigTarget[] {
  const inside = (dir: string) => lentTrees.find((tree) => dir === tree || dir.startsWith(`${tree}/`));
  const out: ConfigTarget[] = [];
  const seen = new Set<string>();
  const add = (at: string, target: ConfigTarget) => {
    if (seen.has(at)) return;
    seen.add(at);
    out.push(target);
  };
  for (const entry of (pathVar ?? "").split(path.delimiter)) {
    const written = entry === "~" || entry.startsWith("~/") ? path.join(os.homedir(), entry.slice(1)) : entry || ".";
    const candidates = path.isAbsolute(written)
      ? [written]
      : [path.resolve(written), ...lentTrees.map((tree) => path.resolve(tree, written))];
    for (const candidate of candidates) {
      const key = `the caller's PATH entry ${entry || "(empty: the working directory)"} (a host command's name)`;
      // Resolved as far as it exists: a folder not made yet, reached through a link outside the tree
      // (a runner's _work linked to a data disk), was judged as written and guarded nothing (second
      // fix review, round 3, session 42).
      const real = resolvedPath(candidate);
      if (inside(real)) add(real, { path: real, key, source: "the caller's environment", commands: {} });
    }
  }
  return out;
}

/** A small regular file's text, or undefined (the environment files here, the configs of named-scripts.ts). */
export function readConfigText(file: string): string | undefined {
  let bytes: Buffer | null | undefined;
  try {
    // Through a symlink too (direnv, git and editors follow one): these are the host's files as they
    // were before the run, read only.
    bytes = readSmallFileBytes(file, MAX_FILE_BYTES, true);
  } catch {
    return undefined;
  }
  // Too large to read is refused, not skipped: what it names would go unguarded (review, session 26).
  if (bytes === undefined && tooLarge(file))
    throw protectionRefusal(
      `the config ${file} is larger than ${MAX_FILE_BYTES / 1024} KiB, more than sandbox-run reads to find what it runs`,
      "Shorten it, or lend a tree without it",
    );
  // A byte-order mark is no part of the text.
  return bytes?.toString("utf8").replace(/^\uFEFF/, "");
}

function tooLarge(file: string): boolean {
  try {
    const stat = fs.statSync(file);
    return stat.isFile() && stat.size > MAX_FILE_BYTES;
  } catch {
    return false;
  }
}
