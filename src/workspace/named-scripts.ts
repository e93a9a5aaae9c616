// The files that a tree's protected hook, agent and editor configs run by path. Those configs are
// protected by name (builtin-protections.ts), but what they name was not: `.husky/pre-commit`
// running `./scripts/check.sh`, a pre-commit `repo: local` hook's `entry: scripts/lint.sh`, a
// lefthook `run:`, a Claude Code hook command, an MCP server's `node tools/mcp.js`, a VS Code
// task, a Dev Container's `initializeCommand` and the compose file it names (whose `privileged:
// true` and `/:/host` mount a run could add) each run the named file on the host at the next
// commit, start or folder open, with the config itself unchanged (review, session 24). These
// paths are protected like the ones a repository's git config names (rule git-config-paths).
//
// What such a config runs through a package manager (`npm test`, `npx lint-staged`) is the
// repository's own code, which the run may change anyway: package.json is reported instead
// (builtin-protections.ts), and lint-staged's and husky 4's configs are protected by name.
//
// Only the configs at the top of each folder given (the lent trees and the repositories'
// worktrees) are read, as they were before the run: regular files only, no symlink followed,
// small ones. A word counts when it holds a `/` and no expansion but the project folder's own
// (`$CLAUDE_PROJECT_DIR`, `${workspaceFolder}`, `${localWorkspaceFolder}`).
import fs from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { readSmallFile as readSmallFileBytes } from "../util/read-fd.js";
import type { ConfigTarget } from "./git-config-paths.js";
import { shellWords } from "./path-sources.js";

const MAX_FILE_BYTES = 256 * 1024;
/** Hook files read in `.husky/`. */
const MAX_HOOK_FILES = 64;
/** Strings taken from one config. */
const MAX_STRINGS = 10_000;

const LEFTHOOK_FILES = [
  "lefthook.yml",
  "lefthook.yaml",
  ".lefthook.yml",
  ".lefthook.yaml",
  "lefthook-local.yml",
  "lefthook-local.yaml",
  ".lefthook-local.yml",
  ".lefthook-local.yaml",
];

/** JSON configs whose `command` and `args` strings start servers or run hooks and tasks. */
const COMMAND_CONFIGS: ReadonlyArray<{ file: string; key: string }> = [
  { file: ".claude/settings.json", key: "Claude Code command" },
  { file: ".claude/settings.local.json", key: "Claude Code command" },
  { file: ".mcp.json", key: "MCP server command" },
  { file: ".cursor/mcp.json", key: "MCP server command" },
  { file: ".vscode/mcp.json", key: "MCP server command" },
  { file: ".vscode/tasks.json", key: "VS Code task command" },
  { file: ".gemini/settings.json", key: "MCP server command" },
  { file: ".qwen/settings.json", key: "MCP server command" },
  { file: ".roo/mcp.json", key: "MCP server command" },
  { file: ".amazonq/mcp.json", key: "MCP server command" },
  { file: ".kiro/settings/mcp.json", key: "MCP server command" },
  { file: "opencode.json", key: "OpenCode command" },
  { file: "opencode.jsonc", key: "OpenCode command" },
  { file: "crush.json", key: "Crush command" },
  { file: ".crush.json", key: "Crush command" },
];

/** The files the configs at the top of `dirs` run by path (absolute), with the key and config that say so. */
export function namedScriptTargets(dirs: readonly string[]): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  const add = (dir: string, source: string, key: string, strings: Iterable<string>, base = dir) => {
    for (const target of pathWords(strings)) out.push({ path: path.resolve(base, target), key, source });
  };
  for (const dir of new Set(dirs)) {
    for (const hook of huskyHooks(dir)) add(dir, hook, "husky hook", (readText(hook) ?? "").split("\n"));
    const preCommit = path.join(dir, ".pre-commit-config.yaml");
    add(dir, preCommit, "pre-commit entry", stringsUnder(readYaml(preCommit), new Set(["entry", "args"])));
    for (const name of LEFTHOOK_FILES) {
      const file = path.join(dir, name);
      const config = readYaml(file);
      add(dir, file, "lefthook run", stringsUnder(config, new Set(["run"])));
      // `extends` loads other config files, whose commands run the same way.
      const extended = stringsUnder(config, new Set(["extends"]));
      for (const target of extended)
        if (plainPath(target)) out.push({ path: path.resolve(dir, target), key: "lefthook extends", source: file });
    }
    for (const { file, key } of COMMAND_CONFIGS) {
      const config = path.join(dir, file);
      add(dir, config, key, stringsUnder(readJsonc(config), new Set(["command", "args"])));
    }
    for (const config of devcontainerFiles(dir)) {
      const parsed = readJsonc(config);
      add(dir, config, "Dev Container initializeCommand", stringsUnder(parsed, new Set(["initializeCommand"])));
      // Compose files resolve against the devcontainer.json's folder; a run could add a privileged service there.
      for (const compose of stringsUnder(parsed, new Set(["dockerComposeFile"])))
        if (plainPath(compose))
          out.push({
            path: path.resolve(path.dirname(config), compose),
            key: "Dev Container dockerComposeFile",
            source: config,
          });
    }
  }
  return out;
}

/** The words of these command strings that name a path (relative to the project, or absolute). */
export function pathWords(strings: Iterable<string>): string[] {
  const out: string[] = [];
  for (const text of strings)
    for (let word of shellWords(text)) {
      word = word.replace(/^(?:\$\{?CLAUDE_PROJECT_DIR\}?|\$\{(?:workspaceFolder|localWorkspaceFolder)\})\//, "");
      // `--config=./x.json`: the value.
      if (word.startsWith("-") && word.includes("=")) word = word.slice(word.indexOf("=") + 1);
      if (word.includes("/") && plainPath(word)) out.push(word);
    }
  return out;
}

/** No expansion left, not a URL, not the home folder. */
function plainPath(word: string): boolean {
  return word !== "" && !/[$`]/.test(word) && !word.startsWith("~") && !word.includes("://");
}

/** Every string under one of `keys` (as a value, or in an array or object below it), depth-first, bounded. */
export function stringsUnder(value: unknown, keys: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const stack: Array<{ value: unknown; taken: boolean }> = [{ value, taken: false }];
  while (stack.length > 0 && out.length < MAX_STRINGS) {
    const { value: v, taken } = stack.pop()!;
    if (typeof v === "string") {
      if (taken) out.push(v);
    } else if (Array.isArray(v)) for (const item of v) stack.push({ value: item, taken });
    else if (v !== null && typeof v === "object")
      for (const [k, item] of Object.entries(v)) stack.push({ value: item, taken: taken || keys.has(k) });
  }
  return out.reverse();
}

/** `.husky/`'s hook files (not its `_` folder): regular files at its top. */
function huskyHooks(dir: string): string[] {
  const husky = path.join(dir, ".husky");
  try {
    if (!fs.lstatSync(husky).isDirectory()) return [];
    return fs
      .readdirSync(husky, { withFileTypes: true })
      .filter((e) => e.isFile())
      .slice(0, MAX_HOOK_FILES)
      .map((e) => path.join(husky, e.name));
  } catch {
    return [];
  }
}

/** `.devcontainer.json`, `.devcontainer/devcontainer.json` and `.devcontainer/<name>/devcontainer.json`. */
function devcontainerFiles(dir: string): string[] {
  const folder = path.join(dir, ".devcontainer");
  const out = [path.join(dir, ".devcontainer.json"), path.join(folder, "devcontainer.json")];
  try {
    if (fs.lstatSync(folder).isDirectory())
      for (const e of fs.readdirSync(folder, { withFileTypes: true }))
        if (e.isDirectory()) out.push(path.join(folder, e.name, "devcontainer.json"));
  } catch {
    // No such folder.
  }
  return out;
}

function readYaml(file: string): unknown {
  const text = readText(file);
  if (text === undefined) return undefined;
  try {
    return parseYaml(text, { maxAliasCount: 100 });
  } catch {
    return undefined;
  }
}

function readJsonc(file: string): unknown {
  const text = readText(file);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(withoutJsonComments(text));
  } catch {
    return undefined;
  }
}

/** JSON with comments (`//`, `/* *\/`) and trailing commas, as VS Code and Dev Containers write it, made JSON. */
export function withoutJsonComments(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      // A string, escapes and all.
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j;
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      out += "\n";
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? text.length : end + 1;
      out += " ";
    } else out += c;
  }
  return out.replace(/,(\s*[}\]])/g, "$1");
}

/** A small regular file's text (not through a symlink), or undefined. */
function readText(file: string): string | undefined {
  try {
    return readSmallFileBytes(file, MAX_FILE_BYTES)?.toString("utf8");
  } catch {
    return undefined;
  }
}
