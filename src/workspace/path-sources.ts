// Folders of a lent tree that the tree's own environment files put on PATH: direnv's `.envrc`
// (`PATH_add dir...`, `path_add PATH dir...`, `layout node` -> node_modules/.bin, `layout python`
// -> .direnv) and mise's `[env] _.path` entries. The host's shell, once it enters the folder
// (direnv allowed, mise activated and trusted), runs the commands a person types from there: an
// executable the run dropped into such a folder shadows `git`, `ls` or `npm`. The run protects
// these folders like the paths a repository's git config names (rule git-config-paths).
//
// `layout node`'s folder is the exception: `npm install` rewrites node_modules/.bin, and what its
// entries run (node_modules/<package>/...) is the repository's own code, which the run may change
// anyway. What a person does not expect there is a command of the host's: so in that folder only
// the names of the host's commands (every name in the folders of the controller's PATH and the
// standard system folders, none inside the lent trees) are protected, and the folder itself stays
// a folder (a parent of a protected path that turns into something else is a violation).
//
// Only the files at the top of each folder given (the lent trees and the repositories' worktrees)
// are read, as they were before the run: regular files only, no symlink followed, small ones.
import fs from "node:fs";
import path from "node:path";
import { readSmallFile as readSmallFileBytes } from "../util/read-fd.js";
import type { ConfigTarget } from "./git-config-paths.js";

const MAX_FILE_BYTES = 256 * 1024;
/** Where a login shell finds commands whatever the controller's PATH says. */
const SYSTEM_COMMAND_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
/** A folder with more names than this is read only this far (a name is all that is taken). */
const MAX_NAMES_PER_DIR = 20_000;

/** A folder's mise files: their `{{config_root}}` and relative paths mean that folder. */
const MISE_FILES = [
  "mise.toml",
  ".mise.toml",
  "mise.local.toml",
  ".mise.local.toml",
  ".mise/config.toml",
  ".config/mise.toml",
  ".config/mise/config.toml",
];

/**
 * Folders the environment files at the top of `dirs` put on PATH (absolute), with the key and file
 * that say so; for a folder only its host-command names guard (layout node), those names in it.
 * `commands`: the host's command names (default: read from PATH and the system folders, once per call).
 */
export function pathSourceTargets(dirs: readonly string[], commands?: ReadonlySet<string>): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  let hostCommands = commands;
  for (const dir of new Set(dirs)) {
    const envrc = path.join(dir, ".envrc");
    for (const { key, folder, commandsOnly } of envrcPathFolders(readSmallFile(envrc))) {
      const target = path.resolve(dir, folder);
      if (!commandsOnly) {
        out.push({ path: target, key, source: envrc });
        continue;
      }
      hostCommands ??= hostCommandNames(process.env.PATH, dirs);
      const why = `${key} (a host command's name)`;
      for (const name of hostCommands) out.push({ path: path.join(target, name), key: why, source: envrc });
    }
    for (const mise of MISE_FILES) {
      const file = path.join(dir, mise);
      for (const folder of misePathFolders(readSmallFile(file)))
        out.push({ path: path.resolve(dir, folder), key: "mise [env] _.path", source: file });
    }
  }
  return out;
}

interface PathFolder {
  key: string;
  folder: string;
  /** Only the names of the host's commands in it are guarded (layout node's node_modules/.bin). */
  commandsOnly?: true;
}

/** direnv: the folders an .envrc adds to PATH (relative to its folder, or absolute). */
export function envrcPathFolders(text: string | undefined): PathFolder[] {
  if (text === undefined) return [];
  const out: PathFolder[] = [];
  for (const raw of text.split("\n")) {
    const words = shellWords(raw);
    const [command, ...args] = words;
    if (command === "PATH_add") for (const a of args) pushFolder(out, "direnv PATH_add", a);
    else if (command === "path_add" && args[0] === "PATH")
      for (const a of args.slice(1)) pushFolder(out, "direnv path_add PATH", a);
    else if (command === "layout" && args[0] === "node")
      out.push({ key: "direnv layout node", folder: "node_modules/.bin", commandsOnly: true });
    else if (command === "layout" && /^(python\d*|pipenv|pyenv|anaconda|uv|poetry)$/.test(args[0] ?? ""))
      out.push({ key: `direnv layout ${args[0]}`, folder: ".direnv" });
  }
  return out;
}

/** mise: the entries of `_.path` in the [env] table (a string or an array of strings). */
export function misePathFolders(text: string | undefined): string[] {
  if (text === undefined) return [];
  const out: string[] = [];
  let table = "";
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    const header = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (header) {
      table = header[1]!;
      continue;
    }
    let value: string | undefined;
    if (table === "env") value = /^_\.path\s*=\s*(.*)$/.exec(line)?.[1];
    else if (table === "env._") value = /^path\s*=\s*(.*)$/.exec(line)?.[1];
    if (value === undefined) continue;
    // An array may span lines: read on to its closing bracket.
    if (value.startsWith("[")) while (!value.includes("]") && i + 1 < lines.length) value += ` ${lines[++i]!.trim()}`;
    for (const m of value.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)) {
      const entry = (m[1] ?? m[2] ?? "").replace(/^\{\{\s*config_root\s*\}\}\/?/, "");
      if (entry !== "" && !entry.includes("{{") && !entry.includes("$")) out.push(entry);
      else if (entry === "") out.push(".");
    }
  }
  return out;
}

function pushFolder(out: PathFolder[], key: string, arg: string): void {
  // $PWD and ${PWD} are the .envrc's folder; any other expansion is not resolved here.
  const folder = arg.replace(/^\$\{?PWD\}?(\/|$)/, "") || ".";
  if (!folder.includes("$") && !folder.includes("`")) out.push({ key, folder });
}

/** The words of one shell line, quotes removed; a comment ends it. Enough for direnv's commands. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(#.*$)|([^\s"'#]+)/g)) {
    if (m[3] !== undefined) break;
    words.push(m[1] ?? m[2] ?? m[4] ?? "");
  }
  return words;
}

/**
 * The names a shell on this host finds as commands: every entry of the absolute folders of `pathVar`
 * and the system folders (a name is enough: more names only guard more), leaving out folders inside
 * `lentTrees` (a controller started by `npm run` has the repository's own node_modules/.bin on PATH).
 */
export function hostCommandNames(pathVar: string | undefined, lentTrees: readonly string[]): Set<string> {
  const names = new Set<string>();
  const inside = (dir: string) => lentTrees.some((tree) => dir === tree || dir.startsWith(`${tree}/`));
  const dirs = [...(pathVar ?? "").split(":"), ...SYSTEM_COMMAND_DIRS].filter(
    (dir) => path.isAbsolute(dir) && !inside(path.resolve(dir)),
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

/** A small regular file's text (not through a symlink), or undefined. */
function readSmallFile(file: string): string | undefined {
  try {
    return readSmallFileBytes(file, MAX_FILE_BYTES)?.toString("utf8");
  } catch {
    return undefined;
  }
}
