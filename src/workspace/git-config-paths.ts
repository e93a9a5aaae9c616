// Which paths of the lent trees the repositories' own git configuration makes executable or
// configuration, resolved before the run from the configuration as it was: core.hooksPath (its
// scripts run at the host's next commit), include and includeIf targets (more config), the
// attributes and excludes files, commit.template, and every path a command-valued key names
// (fsmonitor, sshCommand, askPass, credential helpers, editors, pagers, gpg, diff/merge/filter
// drivers, aliases, ...). The run then protects them like built-in protected names
// (rule git-config-paths).
//
// git is never run: the files are read here (config, config.worktree of each git directory and
// its common directory, the host's global and system files, and everything they include),
// regular files only, at most MAX_CONFIG_BYTES each and MAX_CONFIG_FILES in all (more refuses
// the run, as more paths than the run's budget does: config-target-budget.ts). Conditions of
// includeIf are not evaluated: every target counts, since a condition may hold later
// (onbranch:, another checkout of the same tree). Relative paths resolve as git resolves them:
// includes against the including file's folder, the rest against the worktree's top (where git
// runs hooks, drivers and aliases), or the git directory of a bare repository.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { readSmallFile } from "../util/read-fd.js";
import { realPathOr, resolvedPath } from "../util/resolved-path.js";
import { protectionRefusal, TargetBudget } from "./config-target-budget.js";
import { borrowedStores } from "./git-alternates.js";
import { type ConfigEntry, lastConfigValue, parseGitConfig } from "./git-config-parse.js";

const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_CONFIG_FILES = 1024;
const MAX_POINTER_BYTES = 4096;

/** A path of a lent tree that configuration names, with why. */
export interface ConfigTarget {
  /** Absolute. */
  path: string;
  /** The key, as git documents it (core.hooksPath). */
  key: string;
  /** The file that says so. */
  source: string;
  /**
   * A folder on PATH where only the host's command names are guarded (`layout node`'s
   * node_modules/.bin, a venv's bin): `path` is the folder, judged by name at each entry
   * (rule-engine side: CommandFolder), never one target per name. `except`: names its own tool
   * writes there (a venv's python and pip), not guarded.
   */
  commands?: { except?: RegExp };
}

/** A folder of a lent tree (relative) where the host's command names are guarded, with why. */
export interface CommandFolder {
  why: string;
  /** The source of a RegExp of names not guarded (a venv's own python and pip). */
  except?: string;
}

/** One repository: its git directory, the common directory it shares objects and config with, and its worktree. */
export interface GitRepository {
  gitDir: string;
  commonDir: string;
  /** Absent for a bare repository. */
  worktree?: string;
}

/** Keys whose value is a path (lower case as parsed -> as documented). "*" stands for a subsection. */
const PATH_KEYS = new Map([
  ["core.hookspath", "core.hooksPath"],
  ["core.attributesfile", "core.attributesFile"],
  ["core.excludesfile", "core.excludesFile"],
  ["commit.template", "commit.template"],
  ["http.sslcainfo", "http.sslCAInfo"],
  ["http.*.sslcainfo", "http.<url>.sslCAInfo"],
  ["http.sslcapath", "http.sslCAPath"],
  ["http.*.sslcapath", "http.<url>.sslCAPath"],
]);

const INCLUDE_KEYS = new Map([
  ["include.path", "include.path"],
  ["includeif.*.path", "includeIf.<condition>.path"],
]);

/** Keys whose value is a command line: each word of it that is a path is protected. */
const COMMAND_KEYS = new Map([
  ["core.fsmonitor", "core.fsmonitor"],
  ["core.sshcommand", "core.sshCommand"],
  ["core.askpass", "core.askPass"],
  ["core.editor", "core.editor"],
  ["core.pager", "core.pager"],
  ["core.gitproxy", "core.gitProxy"],
  ["core.alternaterefscommand", "core.alternateRefsCommand"],
  ["sequence.editor", "sequence.editor"],
  ["credential.helper", "credential.helper"],
  ["credential.*.helper", "credential.<url>.helper"],
  ["gpg.program", "gpg.program"],
  ["gpg.*.program", "gpg.<format>.program"],
  ["gpg.ssh.defaultkeycommand", "gpg.ssh.defaultKeyCommand"],
  ["diff.external", "diff.external"],
  ["diff.*.command", "diff.<driver>.command"],
  ["diff.*.textconv", "diff.<driver>.textconv"],
  ["merge.*.driver", "merge.<driver>.driver"],
  ["filter.*.clean", "filter.<driver>.clean"],
  ["filter.*.smudge", "filter.<driver>.smudge"],
  ["filter.*.process", "filter.<driver>.process"],
  ["difftool.*.cmd", "difftool.<tool>.cmd"],
  ["difftool.*.path", "difftool.<tool>.path"],
  ["mergetool.*.cmd", "mergetool.<tool>.cmd"],
  ["mergetool.*.path", "mergetool.<tool>.path"],
  ["alias.*", "alias.<name>"],
  ["pager.*", "pager.<command>"],
  ["interactive.difffilter", "interactive.diffFilter"],
  ["remote.*.uploadpack", "remote.<name>.uploadpack"],
  ["remote.*.receivepack", "remote.<name>.receivepack"],
  ["sendemail.smtpserver", "sendemail.smtpServer"],
  ["sendemail.*.smtpserver", "sendemail.<identity>.smtpServer"],
  ["sendemail.tocmd", "sendemail.toCmd"],
  ["sendemail.cccmd", "sendemail.ccCmd"],
  ["sendemail.headercmd", "sendemail.headerCmd"],
  ["browser.*.cmd", "browser.<tool>.cmd"],
  ["browser.*.path", "browser.<tool>.path"],
  ["man.*.cmd", "man.<tool>.cmd"],
  ["man.*.path", "man.<tool>.path"],
  ["imap.tunnel", "imap.tunnel"],
  ["submodule.*.update", "submodule.<name>.update"],
  ["trailer.*.command", "trailer.<token>.command"],
  ["trailer.*.cmd", "trailer.<token>.cmd"],
  ["uploadpack.packobjectshook", "uploadpack.packObjectsHook"],
  ["hook.*.command", "hook.<name>.command"],
  ["lfs.customtransfer.*.path", "lfs.customtransfer.<name>.path"],
  ["lfs.extension.*.clean", "lfs.extension.<name>.clean"],
  ["lfs.extension.*.smudge", "lfs.extension.<name>.smudge"],
]);

/** The git hooks a hooks directory may hold (githooks(5)), protected one by one when that directory is a tree's root. */
export const GIT_HOOK_NAMES = [
  "applypatch-msg",
  "pre-applypatch",
  "post-applypatch",
  "pre-commit",
  "pre-merge-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "pre-rebase",
  "post-checkout",
  "post-merge",
  "pre-push",
  "pre-receive",
  "update",
  "proc-receive",
  "post-receive",
  "post-update",
  "reference-transaction",
  "push-to-checkout",
  "pre-auto-gc",
  "post-rewrite",
  "sendemail-validate",
  "fsmonitor-watchman",
  "post-index-change",
  "p4-changelist",
  "p4-prepare-changelist",
  "p4-post-changelist",
  "p4-pre-submit",
];

/** The documented name of a parsed key, and how its value is read; undefined for keys that name nothing here. */
function classify(entry: ConfigEntry): { key: string; kind: "path" | "include" | "command" } | undefined {
  const exact = entry.name;
  const wild = entry.subsection !== undefined ? `${entry.section}.*.${entry.key}` : undefined;
  for (const [table, kind] of [
    [PATH_KEYS, "path"],
    [INCLUDE_KEYS, "include"],
    [COMMAND_KEYS, "command"],
  ] as const) {
    const key = table.get(exact) ?? (wild ? table.get(wild) : undefined);
    if (key) return { key, kind };
  }
  // alias.<name> and pager.<command> carry the name as the key, not as a subsection.
  if (entry.subsection === undefined && (entry.section === "alias" || entry.section === "pager"))
    return { key: `${entry.section}.<name>`, kind: "command" };
  return undefined;
}

/**
 * Every repository whose configuration counts for the lent trees: the one each tree is in (found
 * upwards from its root, as git finds it), every git directory found inside the trees, and the
 * git directories their `gitdir:` files and `commondir` files name.
 */
export function repositoriesOf(input: {
  roots: readonly string[];
  /** Git directories found inside the trees (absolute). */
  gitDirs: readonly string[];
  /** `.git` files and `commondir` files found inside the trees (absolute). */
  pointerFiles: readonly string[];
}): GitRepository[] {
  const found = new Map<string, GitRepository>();
  const add = (gitDir: string, worktree?: string) => {
    const key = realPathOr(gitDir);
    if (found.has(key) || !isDirectory(gitDir)) return;
    const common = readSmall(path.join(gitDir, "commondir"))?.trim();
    const commonDir = common ? path.resolve(gitDir, common) : gitDir;
    found.set(key, { gitDir, commonDir, worktree: worktree ?? worktreeOf(gitDir, commonDir) });
  };
  for (const root of input.roots) {
    const upward = repositoryAbove(root);
    if (upward) add(upward.gitDir, upward.worktree);
  }
  for (const gitDir of input.gitDirs) add(gitDir);
  for (const file of input.pointerFiles) {
    const text = readSmall(file)?.trim();
    if (!text) continue;
    if (path.basename(file) === ".git") {
      const target = /^gitdir:\s*(.+)$/.exec(text)?.[1];
      if (target) add(path.resolve(path.dirname(file), target), path.dirname(file));
    } else add(path.resolve(path.dirname(file), text));
  }
  return [...found.values()];
}

/** The repository git would find for a directory: `.git` in it or above it, or the directory itself when bare. */
function repositoryAbove(dir: string): { gitDir: string; worktree?: string } | undefined {
  for (let current = dir; ; current = path.dirname(current)) {
    const dotGit = path.join(current, ".git");
    // git follows a `.git` that is a link (to a git directory or a gitdir: file), so this does too:
    // read only as a link, its repository's config and what that names went unguarded (review, session 25).
    const linked = lstatOrUndefined(dotGit);
    const stat = linked?.isSymbolicLink() ? statOrUndefined(dotGit) : linked;
    if (stat?.isDirectory()) return { gitDir: dotGit, worktree: current };
    if (stat?.isFile()) {
      const target = /^gitdir:\s*(.+)$/.exec(readSmall(dotGit)?.trim() ?? "")?.[1];
      if (target) return { gitDir: path.resolve(current, target), worktree: current };
    }
    if (looksBare(current)) return { gitDir: current };
    if (current === path.dirname(current)) return undefined;
  }
}

function statOrUndefined(p: string): fs.Stats | undefined {
  try {
    return fs.statSync(p);
  } catch {
    return undefined;
  }
}

function looksBare(dir: string): boolean {
  const has = (name: string) => lstatOrUndefined(path.join(dir, name)) !== undefined;
  return has("HEAD") && ((has("objects") && has("refs")) || has("commondir"));
}

/** Where a git directory's worktree is: its parent for `.git`, its gitdir file's folder for a linked worktree, core.worktree, or none (bare). */
function worktreeOf(gitDir: string, commonDir: string): string | undefined {
  if (path.basename(gitDir).toLowerCase() === ".git") return path.dirname(gitDir);
  const linked = readSmall(path.join(gitDir, "gitdir"))?.trim();
  if (linked) return path.dirname(path.resolve(gitDir, linked));
  for (const dir of new Set([gitDir, commonDir])) {
    const text = readSmall(path.join(dir, "config"), MAX_CONFIG_BYTES);
    const worktree = text ? lastConfigValue(text, "core.worktree") : undefined;
    if (worktree) return path.resolve(gitDir, worktree);
  }
  return undefined;
}

/** The host's own configuration files (global and system), which apply to every repository. */
function hostConfigFiles(env: NodeJS.ProcessEnv = process.env): string[] {
  const home = env.HOME ?? os.homedir();
  const xdg = env.XDG_CONFIG_HOME || path.join(home, ".config");
  return [
    env.GIT_CONFIG_SYSTEM ?? "/etc/gitconfig",
    ...(env.GIT_CONFIG_GLOBAL
      ? [env.GIT_CONFIG_GLOBAL]
      : [path.join(xdg, "git/config"), path.join(home, ".gitconfig")]),
  ];
}

/** Every path the configuration of these repositories (and the host's own) names. */
export function configTargets(
  repositories: readonly GitRepository[],
  options: { hostFiles?: readonly string[]; home?: string; budget?: TargetBudget } = {},
): ConfigTarget[] {
  const home = options.home ?? process.env.HOME ?? os.homedir();
  const hostFiles = options.hostFiles ?? hostConfigFiles();
  const budget = options.budget ?? new TargetBudget();
  const out: ConfigTarget[] = [];
  const seen = new Set<string>();
  // Every path counts against the run's budget, per file and in all: past it the run is refused.
  // A cap shared by all repositories past which targets were dropped let a committed fixture's
  // config of 10,000 paths, read first, leave a submodule's core.hooksPath unguarded (review, session 25).
  const push = (target: ConfigTarget) => {
    const key = `${target.path}\0${target.key}`;
    if (seen.has(key)) return;
    seen.add(key);
    budget.take(target.source);
    out.push(target);
  };
  // Each file is read and parsed once, whichever repositories include it.
  const parsed = new Map<string, ConfigEntry[] | undefined>();
  const entriesOf = (file: string): ConfigEntry[] | undefined => {
    if (!parsed.has(file)) {
      if (parsed.size >= MAX_CONFIG_FILES)
        throw protectionRefusal(
          `the lent trees' repositories read more than ${MAX_CONFIG_FILES} git config files (the last one: ${file})`,
          "sandbox-run protects what every config of the repositories in a lent tree names, and refuses rather than protect fewer: lend fewer repositories at once",
        );
      const text = readSmall(file, MAX_CONFIG_BYTES);
      parsed.set(file, text === undefined ? undefined : parseGitConfig(text));
    }
    return parsed.get(file);
  };
  for (const repo of repositories) {
    const base = repo.worktree ?? repo.gitDir;
    const queue = [
      ...hostFiles,
      path.join(repo.commonDir, "config"),
      path.join(repo.commonDir, "config.worktree"),
      path.join(repo.gitDir, "config.worktree"),
    ];
    // The stores its objects are borrowed from (git-alternates.ts). A plain folder in a lent tree
    // (`clone --reference ./store`) is judged by nothing else, and git checks no blob it reads from
    // it for a checkout: all of it is protected (git never writes to a store it borrows from; a
    // forged blob there became the user's .envrc on `git restore`: review, session 37). A git
    // directory's own store keeps that directory's rules; what git follows out of it, its
    // alternates files, are protected here.
    for (const { store, source } of borrowedStores(path.join(repo.commonDir, "objects"))) {
      if (!isGitDirectoryStore(store)) push({ path: store, key: BORROWED_STORE_KEY, source });
      else
        for (const name of ["alternates", "http-alternates"])
          push({ path: path.join(store, "info", name), key: BORROWED_STORE_KEY, source });
    }
    const visited = new Set<string>();
    while (queue.length > 0) {
      const file = queue.shift()!;
      if (visited.has(file)) continue;
      visited.add(file);
      for (const entry of entriesOf(file) ?? []) {
        const kind = classify(entry);
        if (!kind || entry.value === null || entry.value === "") continue;
        const value = entry.value;
        if (kind.kind === "include") {
          const target = expandPath(value, path.dirname(file), home);
          if (target) {
            queue.push(target);
            push({ path: target, key: kind.key, source: file });
          }
        } else if (kind.kind === "path") {
          const target = expandPath(value, base, home);
          if (target) push({ path: target, key: kind.key, source: file });
        } else {
          for (const word of commandPaths(value)) {
            const target = expandPath(word, base, home);
            if (target) push({ path: target, key: kind.key, source: file });
          }
        }
      }
    }
  }
  return out;
}

/** The key a borrowed store's protection names (ConfigTarget.key): its violations say it first. */
export const BORROWED_STORE_KEY = "objects/info/alternates";

/** Whether a violation's detail (`<key> in <source>`, targetsInTree) is a borrowed store's: the refs borrowing from it cannot be checked. */
export function isBorrowedStoreDetail(detail: string | undefined): boolean {
  return detail?.startsWith(`${BORROWED_STORE_KEY} in `) === true;
}

/** `objects` of a git directory (its HEAD and refs beside it), as the host has it before the run. */
function isGitDirectoryStore(store: string): boolean {
  const dir = path.dirname(store);
  return (
    path.basename(store) === "objects" &&
    isDirectory(path.join(dir, "refs")) &&
    readSmall(path.join(dir, "HEAD")) !== undefined
  );
}

/** A config path value as git expands it: `~/` is the home folder, relative paths are relative to `base`. */
function expandPath(value: string, base: string, home: string): string | undefined {
  if (value.includes("\0") || value.startsWith("%(prefix)/")) return undefined;
  if (value === "~" || value.startsWith("~/")) return path.join(home, value.slice(1));
  if (value.startsWith("~")) return undefined; // ~user: another user's home
  return path.resolve(base, value);
}

/** The words of a command line that are paths: they hold a "/" (or start with "~/"), and are no URL. */
export function commandPaths(command: string): string[] {
  const out: string[] = [];
  const text = command.startsWith("!") ? command.slice(1) : command;
  for (const raw of text.split(/[\s;&|()<>`]+/)) {
    let word = withoutQuotesAround(raw);
    const eq = word.indexOf("=");
    if (word.startsWith("-") && eq > 0) word = word.slice(eq + 1); // --file=./x
    if (word.startsWith("$") || word.includes("://")) continue;
    if (word.includes("/") || word.startsWith("~")) out.push(word);
  }
  return out;
}

/**
 * The targets that lie in one lent tree, relative to its root, each with why. A target is
 * matched as written and, where it (or the part of it that exists) resolves through symlinks,
 * as resolved: a link in the tree is protected along with what it points at. A hooks folder
 * that is the tree's root itself gets its hook names protected instead of the whole tree.
 */
export function targetsInTree(root: string, targets: readonly ConfigTarget[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const target of targets) {
    if (target.commands) continue; // commandFoldersInTree
    const why = `${target.key} in ${target.source}`;
    for (const candidate of new Set([path.normalize(target.path), resolvedPath(target.path)])) {
      if (candidate === root || isAbove(candidate, root)) {
        if (candidate === root && target.key === "core.hooksPath")
          for (const hook of GIT_HOOK_NAMES) if (!out.has(hook)) out.set(hook, why);
        continue;
      }
      const relative = relativeBelow(root, candidate);
      if (relative !== undefined && !out.has(relative)) out.set(relative, why);
    }
  }
  return out;
}

/** The command-name folders among `targets` inside the tree at `root` (relative; the tree's own top is ""). */
export function commandFoldersInTree(root: string, targets: readonly ConfigTarget[]): Map<string, CommandFolder> {
  const out = new Map<string, CommandFolder>();
  for (const target of targets) {
    if (!target.commands) continue;
    const folder: CommandFolder = {
      why: `${target.key} in ${target.source}`,
      ...(target.commands.except ? { except: target.commands.except.source } : {}),
    };
    for (const candidate of new Set([path.normalize(target.path), resolvedPath(target.path)])) {
      const relative = candidate === root ? "" : relativeBelow(root, candidate);
      if (relative !== undefined && !out.has(relative)) out.set(relative, folder);
    }
  }
  return out;
}

/**
 * The links already in the command folders among `targets` under a guarded name: what each points
 * at runs under that name (`node_modules/.bin/node -> ../node/bin/node`), so it is protected as a
 * whole target, as it was when each name was a target of its own (review, session 25).
 */
export function commandLinkTargets(
  targets: readonly ConfigTarget[],
  hostCommands: ReadonlySet<string>,
): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  for (const target of targets) {
    if (!target.commands) continue;
    const folder: CommandFolder = {
      why: "",
      ...(target.commands.except ? { except: target.commands.except.source } : {}),
    };
    let names: string[];
    try {
      names = fs.readdirSync(target.path);
    } catch {
      continue;
    }
    for (const name of names) {
      const file = path.join(target.path, name);
      if (guardsCommand(folder, name, hostCommands) && lstatOrUndefined(file)?.isSymbolicLink()) {
        out.push({ path: file, key: target.key, source: target.source });
        // Where it points as written too: a dangling link (`../node/bin/node` before the package is
        // installed) resolves to nothing, and the run could create its target (review, session 26).
        try {
          out.push({ path: path.resolve(target.path, fs.readlinkSync(file)), key: target.key, source: target.source });
        } catch {}
      }
    }
  }
  return out;
}

/** Whether `name` in a command-name folder is guarded: a host command's name, not one its own tool writes. */
export function guardsCommand(folder: CommandFolder, name: string, hostCommands: ReadonlySet<string>): boolean {
  return hostCommands.has(name) && !(folder.except && exceptPattern(folder.except).test(name));
}

/** The command folder that guards the tree path `relativePath` by its name, if one does. */
export function commandFolderGuarding(
  relativePath: string,
  folders: ReadonlyMap<string, CommandFolder>,
  hostCommands: ReadonlySet<string>,
): CommandFolder | undefined {
  if (folders.size === 0) return undefined;
  const slash = relativePath.lastIndexOf("/");
  const folder = folders.get(slash < 0 ? "" : relativePath.slice(0, slash));
  return folder && guardsCommand(folder, relativePath.slice(slash + 1), hostCommands) ? folder : undefined;
}

/** Compiled once per pattern: the rules ask at every entry of a command folder. */
const exceptPatterns = new Map<string, RegExp>();
function exceptPattern(source: string): RegExp {
  let pattern = exceptPatterns.get(source);
  if (!pattern) exceptPatterns.set(source, (pattern = new RegExp(source)));
  return pattern;
}

/** `candidate` relative to `root` when it lies strictly below it. */
function relativeBelow(root: string, candidate: string): string | undefined {
  return isAbove(root, candidate) ? candidate.slice(root === "/" ? 1 : root.length + 1) : undefined;
}

function isAbove(ancestor: string, p: string): boolean {
  return ancestor === "/" ? p !== "/" : p.startsWith(`${ancestor}/`);
}

/** Whether `p` is a folder, through links (false when it is not there). */
export function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function lstatOrUndefined(p: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(p);
  } catch {
    return undefined;
  }
}

/**
 * A small regular file's text, or undefined. These files are the host's own, read before the
 * run (bind mode) or never given to the sandbox (copy mode); they are opened non-blocking, so a
 * FIFO cannot hang the read, and capped.
 */
function readSmall(file: string, max = MAX_POINTER_BYTES): string | undefined {
  try {
    return readSmallFile(file, max, true)?.toString("utf8");
  } catch {
    return undefined;
  }
}

/** The word without the quotes at its ends (a loop: `/["']+$/` backtracks over a long run of quotes). */
function withoutQuotesAround(word: string): string {
  let start = 0;
  let end = word.length;
  while (start < end && (word[start] === '"' || word[start] === "'")) start++;
  while (end > start && (word[end - 1] === '"' || word[end - 1] === "'")) end--;
  return word.slice(start, end);
}

/** A proper ancestor of a guarded path: the guarded path below it, and why that one is guarded. */
export interface GuardedAncestor {
  below: string;
  why: string;
}

/**
 * The proper ancestors of the config paths and command folders (a command's place in one): a
 * non-directory there redirects the guarded path. One table for both judges (workspace-rules.ts).
 */
export function guardedAncestors(
  configPaths: ReadonlyMap<string, string>,
  commandFolders: ReadonlyMap<string, CommandFolder>,
): Map<string, GuardedAncestor> {
  const out = new Map<string, GuardedAncestor>();
  const below = (p: string, why: string) => {
    for (let i = p.indexOf("/"); i > 0; i = p.indexOf("/", i + 1)) out.set(p.slice(0, i), { below: p, why });
  };
  for (const [p, why] of configPaths) below(p, why);
  for (const [folder, { why }] of commandFolders) below(`${folder}/<a host command>`, why);
  return out;
}

export const noLongerADirectory = (ancestor: GuardedAncestor) =>
  `a parent of ${ancestor.below} (${ancestor.why}) is no longer a directory`;
