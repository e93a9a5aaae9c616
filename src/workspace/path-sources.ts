// Folders of a lent tree that the tree's own environment files put on PATH: direnv's `.envrc`
// (`PATH_add dir...`, `path_add PATH dir...`, `layout node` -> node_modules/.bin, `layout python`
// -> .direnv) and mise's `[env] _.path` entries. The host's shell, once it enters the folder
// (direnv allowed, mise activated and trusted), runs the commands a person types from there: an
// executable the run dropped into such a folder shadows `git`, `ls` or `npm`. The run protects
// these folders like the paths a repository's git config names (rule git-config-paths).
//
// Only the files at the top of each folder given (the lent trees and the repositories' worktrees)
// are read, as they were before the run: regular files only, no symlink followed, small ones.
import fs from "node:fs";
import path from "node:path";
import type { ConfigTarget } from "./git-config-paths.js";

const MAX_FILE_BYTES = 256 * 1024;
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

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

/** Folders the environment files at the top of `dirs` put on PATH (absolute), with the key and file that say so. */
export function pathSourceTargets(dirs: readonly string[]): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  for (const dir of new Set(dirs)) {
    const envrc = path.join(dir, ".envrc");
    for (const { key, folder } of envrcPathFolders(readSmallFile(envrc)))
      out.push({ path: path.resolve(dir, folder), key, source: envrc });
    for (const mise of MISE_FILES) {
      const file = path.join(dir, mise);
      for (const folder of misePathFolders(readSmallFile(file)))
        out.push({ path: path.resolve(dir, folder), key: "mise [env] _.path", source: file });
    }
  }
  return out;
}

/** direnv: the folders an .envrc adds to PATH (relative to its folder, or absolute). */
export function envrcPathFolders(text: string | undefined): Array<{ key: string; folder: string }> {
  if (text === undefined) return [];
  const out: Array<{ key: string; folder: string }> = [];
  for (const raw of text.split("\n")) {
    const words = shellWords(raw);
    const [command, ...args] = words;
    if (command === "PATH_add") for (const a of args) pushFolder(out, "direnv PATH_add", a);
    else if (command === "path_add" && args[0] === "PATH")
      for (const a of args.slice(1)) pushFolder(out, "direnv path_add PATH", a);
    else if (command === "layout" && args[0] === "node")
      out.push({ key: "direnv layout node", folder: "node_modules/.bin" });
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

function pushFolder(out: Array<{ key: string; folder: string }>, key: string, arg: string): void {
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

function readSmallFile(file: string): string | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > MAX_FILE_BYTES) return undefined;
    const buffer = Buffer.alloc(stat.size);
    const read = fs.readSync(fd, buffer, 0, stat.size, 0);
    return buffer.subarray(0, read).toString("utf8");
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}
