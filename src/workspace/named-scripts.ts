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
// worktrees) are read, as they were before the run: small regular files, through a symlink as the
// tools read them. A word counts when it holds a `/` and no expansion but the project folder's own
// (`$CLAUDE_PROJECT_DIR`, `${workspaceFolder}`, `${localWorkspaceFolder}`).
import fs from "node:fs";
import path from "node:path";
import { requireVendored } from "../util/vendored.js";
import { protectionRefusal, TargetBudget } from "./config-target-budget.js";
import { type ConfigTarget, GIT_HOOK_NAMES } from "./git-config-paths.js";
import { readConfigText as readText } from "./path-sources.js";
import { shellCommands, shellWords } from "./shell-commands.js";

/** Strings taken from one config, and values visited in it: past either the run is refused. */
const MAX_STRINGS = 10_000;
const MAX_VALUES = MAX_STRINGS * 4;

/**
 * A config holding more than the readers take: refused, never read in part (what it names past the
 * cap would go unguarded: session 26 documented that, session 27 refuses it).
 */
class ConfigTooLarge extends Error {}

/** JSON configs whose `command` and `args` strings start servers or run hooks and tasks. */
export const COMMAND_CONFIGS: ReadonlyArray<{ file: string; key: string }> = [
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
export function namedScriptTargets(dirs: readonly string[], budget: TargetBudget = new TargetBudget()): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  // One entry per path (the first config that names it), each word counted against the run's
  // budget: two hundred devcontainer.json links to one file of 125,000 commands once made 25 million.
  const seen = new Set<string>();
  const kinds = new Map<string, "file" | "directory" | undefined>();
  const guard = (target: string, key: string, source: string) => {
    if (seen.has(target)) return;
    seen.add(target);
    out.push({ path: target, key, source });
  };
  // A path the config names only through what an interpreter picks: one more against the budget.
  const guardCounted = (target: string, key: string, source: string) => {
    if (seen.has(target)) return;
    budget.take(source);
    guard(target, key, source);
  };
  const named = (file: string, key: string, target: string, code = false) => {
    // A folder named as an argument (`eslint src/`, `cd packages/app`) is data, not code the config
    // runs: guarding it whole refused the run's ordinary edits. A folder that is the program or an
    // interpreter's operand (`node tools/`, `python tools/`) runs what node and python pick in it:
    // its package.json and the file its `main` names before index.*, __main__.* and an
    // unchecked-hash pyc in __pycache__ (review, session 26: only index.js was guarded, and the run
    // added a package.json whose main it wrote). Not the whole folder: a Go package's sources
    // (`go run ./cmd/server`) are the repository's code the run is there to edit. A package's own
    // file under node_modules is the repository's code (what `npm ci` writes). A path that does not
    // exist yet is guarded: the run must not create what the config would run.
    if (/(^|\/)node_modules\//.test(target)) return;
    let kind = kinds.get(target);
    if (!kinds.has(target)) {
      budget.take(file);
      kind = entryKind(target);
      kinds.set(target, kind);
    }
    if (kind === "directory") {
      if (!code) return;
      for (const entry of FOLDER_CODE_ENTRIES) guardCounted(path.join(target, entry), key, file);
      const main = packageMain(path.join(target, "package.json"));
      if (main !== undefined) named(file, key, path.resolve(target, main), true);
    } else guard(target, key, file);
    // Code that is not an existing file resolves as node, tsx, bun and python resolve it:
    // `node scripts/check` runs scripts/check.js, `node tools` runs tools.js before the folder.
    // An existing file is run as it is (and guarded), so its resolutions never are.
    if (!code || kind === "file") return;
    for (const extension of CODE_EXTENSIONS) guardCounted(target + extension, key, file);
  };
  const add = (file: string, key: string, strings: Iterable<string>, base: string) => {
    for (const { word, code } of codePathWords(strings)) named(file, key, path.resolve(base, word), code);
  };
  for (const dir of new Set(dirs)) readWhole(dir, () => readFolder(dir));
  return out;

  function readFolder(dir: string): void {
    for (const hook of huskyHooks(dir)) add(hook, "husky hook", [readText(hook) ?? ""], dir);
    const preCommit = path.join(dir, ".pre-commit-config.yaml");
    for (const hook of objectsWith(readYaml(preCommit), "entry")) {
      add(preCommit, "pre-commit entry", commandLines(hook, "entry", "args"), dir);
      // `language: script` runs its entry as a path in the repository, with or without a `/`.
      if (hook.language === "script" && typeof hook.entry === "string") {
        const [script] = shellWords(hook.entry);
        if (script && plainPath(script)) named(preCommit, "pre-commit entry", path.resolve(dir, script));
      }
    }
    for (const file of lefthookFiles(dir)) {
      const config = file.endsWith(".toml")
        ? readTomlCommands(file)
        : file.endsWith("json") || file.endsWith("jsonc")
          ? readJsonc(file)
          : readYaml(file);
      // A command's `root` is the folder it runs in.
      for (const command of objectsWith(config, "run")) {
        const root =
          typeof command.root === "string" && plainPath(command.root) ? path.resolve(dir, command.root) : dir;
        add(file, "lefthook run", stringsUnder(command, new Set(["run"])), root);
      }
      // `extends` loads other config files, whose commands run the same way.
      for (const target of stringsUnder(config, new Set(["extends"])))
        if (plainPath(target)) named(file, "lefthook extends", path.resolve(dir, target));
    }
    for (const { file, key } of COMMAND_CONFIGS) {
      const config = path.join(dir, file);
      for (const command of objectsWith(readJsonc(config), "command")) {
        // A VS Code task's `options.cwd` is the folder its command runs in.
        const cwd = (command.options as { cwd?: unknown } | undefined)?.cwd;
        const base = typeof cwd === "string" ? (resolveWord(cwd, dir) ?? dir) : dir;
        add(config, key, commandLines(command, "command", "args"), base);
      }
    }
    for (const config of devcontainerFiles(dir)) {
      const parsed = readJsonc(config);
      // One command, in shell or exec form, or several by name.
      const init = (parsed as { initializeCommand?: unknown } | undefined)?.initializeCommand;
      const inits = init !== null && typeof init === "object" && !Array.isArray(init) ? Object.values(init) : [init];
      for (const one of inits)
        add(
          config,
          "Dev Container initializeCommand",
          commandLines({ initializeCommand: one }, "initializeCommand"),
          dir,
        );
      // Compose files resolve against the devcontainer.json's folder; a run could add a privileged
      // service there, or to what they include or extend, or change the .env compose reads beside
      // the first one for its ${VARIABLES}.
      const composeFiles = stringsUnder(parsed, new Set(["dockerComposeFile"])).filter(plainPath);
      composeFiles.forEach((compose, i) => {
        const file = path.resolve(path.dirname(config), compose);
        named(config, "Dev Container dockerComposeFile", file);
        if (i === 0) named(config, "Dev Container dockerComposeFile", path.join(path.dirname(file), ".env"));
        const included = stringsUnder(readYaml(file), new Set(["include", "extends", "env_file", "path", "file"]));
        for (const other of included.filter(plainPath))
          named(file, "Dev Container compose file", path.resolve(path.dirname(file), other));
      });
    }
  }
}

/** Runs one folder's readers; a config too large to read whole refuses the run, naming the folder. */
function readWhole(dir: string, read: () => void): void {
  try {
    read();
  } catch (error) {
    if (!(error instanceof ConfigTooLarge)) throw error;
    throw protectionRefusal(
      `a hook, agent or editor config in ${dir} holds more than ${MAX_VALUES} values or ${MAX_STRINGS} command strings, more than sandbox-run reads`,
      "sandbox-run protects every path such a config names and reads none in part: lend a tree without such a config",
    );
  }
}

/**
 * A config's command and its argument list as the one command line the tool runs (`command: node`,
 * `args: ["--test", "test/"]`; an exec-form array): each string read as a command of its own made
 * `test/` a program, guarded whole as code. Anything else (args as objects): each string on its own.
 */
function commandLines(config: Record<string, unknown>, commandKey: string, argsKey?: string): string[] {
  const command = config[commandKey];
  const args = argsKey === undefined ? [] : (config[argsKey] ?? []);
  const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === "string");
  const argv = typeof command === "string" ? [command] : strings(command) ? command.map(shellQuoted) : undefined;
  if (argv === undefined || !strings(args))
    return stringsUnder(config, new Set(argsKey === undefined ? [commandKey] : [commandKey, argsKey]));
  return [[...argv, ...args.map(shellQuoted)].join(" ")];
}

function shellQuoted(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** Lefthook's configs at a folder's top, in every format it reads (YAML, TOML, JSON, JSONC). */
function lefthookFiles(dir: string): string[] {
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir).filter((n) => LEFTHOOK_NAME.test(n));
  } catch {
    // Not a folder.
  }
  return names.sort().map((n) => path.join(dir, n));
}

export const LEFTHOOK_NAME = /^\.?lefthook(-local)?\.(ya?ml|toml|json|jsonc)$/;

/** Every object (at any depth) that has `key`, depth-first, bounded. */
function objectsWith(value: unknown, key: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const stack: unknown[] = [value];
  let visited = 0;
  while (stack.length > 0) {
    if (visited++ >= MAX_VALUES) throw new ConfigTooLarge();
    const v = stack.pop();
    if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (v !== null && typeof v === "object") {
      if (key in v) out.push(v as Record<string, unknown>);
      for (const item of Object.values(v)) stack.push(item);
    }
  }
  return out.reverse();
}

/**
 * A lefthook TOML file's commands, as far as they run anything: every `run = "..."` (with the `root`
 * of its table) and `extends = [...]`. Enough TOML for that: one value per line.
 */
function readTomlCommands(file: string): unknown {
  const text = readText(file);
  if (text === undefined) return undefined;
  const commands: Array<Record<string, string>> = [];
  const extended: string[] = [];
  // A table's `root` applies to its `run`s, before or after them.
  let tableRoot: string | undefined;
  let pending: Array<Record<string, string>> = [];
  const flush = () => {
    for (const found of pending) commands.push({ ...(tableRoot !== undefined ? { root: tableRoot } : {}), ...found });
    pending = [];
    tableRoot = undefined;
  };
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("[")) {
      flush();
      continue;
    }
    // `run = "..."`, a dotted `commands.lint.run = "..."` or an inline `lint = { run = "...", root = "web/" }`.
    const found: Record<string, string> = {};
    for (const m of line.matchAll(/(?:^|[\s{,.])(run|root|extends)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|\[[^\]]*\])/g)) {
      const strings = [...m[2]!.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)].map((x) => x[1] ?? x[2] ?? "");
      if (m[1] === "extends") extended.push(...strings);
      else if (strings[0] !== undefined) found[m[1]!] = strings[0];
    }
    if (found.root !== undefined && found.run === undefined) tableRoot = found.root;
    if (found.run !== undefined) pending.push(found);
  }
  flush();
  return { commands, extends: extended };
}

/** What `file` is, through a symlink as the tools run it; undefined when it is neither a file nor a folder. */
function entryKind(file: string): "file" | "directory" | undefined {
  try {
    const stat = fs.statSync(file);
    return stat.isFile() ? "file" : stat.isDirectory() ? "directory" : undefined;
  } catch {
    return undefined;
  }
}

/** A path word with the project folder's own variables resolved against `dir`; undefined for any other expansion. */
function resolveWord(word: string, dir: string): string | undefined {
  const bare = word.replace(
    /^(?:\$\{?CLAUDE_PROJECT_DIR\}?|\$\{(?:workspaceFolder|workspaceRoot|localWorkspaceFolder)\})(\/|$)/,
    "",
  );
  return plainPath(bare || ".") ? path.resolve(dir, bare || ".") : undefined;
}

/** The words of these command strings that name a path (relative to the project, or absolute). */
export function pathWords(strings: Iterable<string>): string[] {
  return codePathWords(strings).map((w) => w.word);
}

/**
 * The path words of these command strings, each saying whether it is the code the command runs:
 * the program itself, or the first operand of an interpreter (`node tools/`, `go run ./cmd/lint`,
 * `python tools/precommit`), which is code even when it is a folder, unless an option says the
 * code is elsewhere (`python -m pytest tests/`, `node --test test/`).
 */
export function codePathWords(strings: Iterable<string>): Array<{ word: string; code: boolean }> {
  const out: Array<{ word: string; code: boolean }> = [];
  for (const text of strings)
    for (const command of shellCommands(text)) {
      const words = command.filter((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) || w.startsWith("-"));
      const program = path.basename(words[0] ?? "");
      let script = INTERPRETERS.has(program) ? 1 : -1;
      if (script > 0 && SUBCOMMAND_RUNNERS.has(program) && words[1] === "run") script = 2;
      // Past the options, and the value of those that take one as a separate word (`--cwd packages/app`).
      while (script > 0 && script < words.length && words[script]!.startsWith("-"))
        script = NO_OPERAND_FLAGS.has(words[script]!) ? -1 : script + (VALUE_FLAGS.has(words[script]!) ? 2 : 1);
      words.forEach((raw, i) => {
        let word = raw.replace(
          /^(?:\$\{?CLAUDE_PROJECT_DIR\}?|\$\{(?:workspaceFolder|workspaceRoot|localWorkspaceFolder)\})\//,
          "",
        );
        // `--config=./x.json`: the value.
        if (word.startsWith("-") && word.includes("=")) word = word.slice(word.indexOf("=") + 1);
        // A flag is never the code; an interpreter's operand is a path even without a `/` (`node check`).
        const code = (i === 0 || i === script) && !raw.startsWith("-");
        const isPath = word.includes("/") || (code && i > 0 && !SUBCOMMAND_RUNNERS.has(program));
        if (isPath && plainPath(word)) out.push({ word, code });
      });
    }
  return out;
}

/** What node, tsx, ts-node, bun and python append to a code path they do not find as written. */
const CODE_EXTENSIONS = [".js", ".mjs", ".cjs", ".json", ".node", ".ts", ".tsx", ".mts", ".cts", ".py", ".pyc"];
/** What node and python run of a folder given as code (`__pycache__` whole: its pyc files). */
const FOLDER_CODE_ENTRIES = [
  "package.json",
  ...CODE_EXTENSIONS.filter((e) => e !== ".py" && e !== ".pyc").map((e) => `index${e}`),
  "__main__.py",
  "__main__.pyc",
  "__pycache__",
];

/** The `main` of a folder's package.json (a plain relative path), if it names one. */
function packageMain(file: string): string | undefined {
  const main = (readJsonc(file) as { main?: unknown } | undefined)?.main;
  return typeof main === "string" && plainPath(main) && !path.isAbsolute(main) ? main : undefined;
}
/** Options whose value is the next word (a folder to run in, a module to load first). */
const VALUE_FLAGS = new Set(["--cwd", "--directory", "--dir", "-C", "-I", "-r", "--require", "--import", "--loader"]);
/**
 * Options after which the operands are data, not the code run: a module (`python -m pytest tests/`),
 * inline code (`-c`, `-e`, `-` for stdin), or node's test runner (`node --test test/` runs the
 * repository's tests, as `npm test` does): taken for code, the tests' folder was guarded.
 */
const NO_OPERAND_FLAGS = new Set(["-m", "-c", "-e", "--eval", "-p", "--print", "--test", "-"]);

/** Programs whose first operand is the code they run. */
const INTERPRETERS = new Set([
  "sh",
  "bash",
  "zsh",
  "dash",
  "fish",
  "node",
  "deno",
  "bun",
  "python",
  "python3",
  "ruby",
  "perl",
  "php",
  "go",
  "uv",
  "tsx",
  "ts-node",
]);
/** Of those, the ones that take `run` before it. */
const SUBCOMMAND_RUNNERS = new Set(["go", "deno", "bun", "uv"]);

/** No expansion left, not a URL, not the home folder. */
function plainPath(word: string): boolean {
  return word !== "" && !/[$`]/.test(word) && !word.startsWith("~") && !word.includes("://");
}

/** Every string under one of `keys` (as a value, or in an array or object below it), depth-first, bounded. */
export function stringsUnder(value: unknown, keys: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const stack: Array<{ value: unknown; taken: boolean }> = [{ value, taken: false }];
  let visited = 0;
  while (stack.length > 0) {
    if (visited++ >= MAX_VALUES) throw new ConfigTooLarge();
    const { value: v, taken } = stack.pop()!;
    if (typeof v === "string") {
      if (!taken) continue;
      if (out.length >= MAX_STRINGS) throw new ConfigTooLarge();
      out.push(v);
    } else if (Array.isArray(v)) for (const item of v) stack.push({ value: item, taken });
    else if (v !== null && typeof v === "object")
      for (const [k, item] of Object.entries(v)) stack.push({ value: item, taken: taken || keys.has(k) });
  }
  return out.reverse();
}

/** The git hooks husky runs from `.husky/` (by git's hook names: it ignores any other file there). */
function huskyHooks(dir: string): string[] {
  return GIT_HOOK_NAMES.map((name) => path.join(dir, ".husky", name));
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
  // Loaded here, for a tree that has such a file (outside the try: a yaml that cannot load must not
  // read as no file): loading it costs ~60 ms of CPU, which every run paid before its container
  // started, though most trees have none.
  const { parseAllDocuments } = requireVendored<typeof import("yaml")>("yaml", (load) => load("yaml"));
  try {
    // The first document, duplicate keys allowed (the last wins), as the tools' own readers take it.
    const [first] = parseAllDocuments(text, { uniqueKeys: false });
    return first && "toJS" in first ? first.toJS({ maxAliasCount: 100 }) : undefined;
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
