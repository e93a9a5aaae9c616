// The folders below a tree's top that hold an environment, hook, agent or editor config: they are
// read like the top's (path-sources.ts, named-scripts.ts), because a person enters a tree there
// too: direnv loads a monorepo's allowed `packages/web/.envrc` on `cd`, an editor opened on
// `packages/web` runs its `.vscode/tasks.json`, an agent started there reads its `.claude/` and
// `.mcp.json`. What those configs name must be protected as the top's are (review, session 24:
// only the top was read). Found by name during a walk of the tree as it was before the run.
import { TargetBudget } from "./config-target-budget.js";
import { type ConfigTarget, configTargets, type GitRepository } from "./git-config-paths.js";
import { COMMAND_CONFIGS, LEFTHOOK_NAME, namedScriptTargets } from "./named-scripts.js";
import { MISE_FILES, pathSourceTargets } from "./path-sources.js";

/** Folders read at most (a tree holding more has the rest unread: documented). */
export const MAX_CONFIG_FOLDERS = 1_000;

/** First names of every file the two readers read at a folder's top. */
const CONFIG_NAMES = new Set([
  ".envrc",
  ".tool-versions",
  ...MISE_FILES.map(firstName),
  ".husky",
  ".pre-commit-config.yaml",
  ...COMMAND_CONFIGS.map((c) => firstName(c.file)),
  ".devcontainer",
  ".devcontainer.json",
]);
/** mise's per-environment files (`mise.<env>.toml`, `.mise.<env>.local.toml`). */
const MISE_ENV_NAME = /^\.?mise\.[^/]+\.toml$/;

function firstName(file: string): string {
  const slash = file.indexOf("/");
  return slash < 0 ? file : file.slice(0, slash);
}

/** Whether an entry of this name makes its folder one to read. */
export function isConfigName(name: string): boolean {
  return CONFIG_NAMES.has(name) || MISE_ENV_NAME.test(name) || LEFTHOOK_NAME.test(name);
}

/**
 * Collects, entry by entry in walk order, the folders (relative, never the top "") that hold a
 * config. Nothing under `node_modules` (a package's own files) or a `.git` is taken.
 */
export class ConfigFolders {
  readonly folders: string[] = [];
  private readonly seen = new Set<string>();

  consider(relativePath: string): void {
    if (this.folders.length >= MAX_CONFIG_FOLDERS) return;
    const slash = relativePath.lastIndexOf("/");
    if (slash < 0) return;
    if (!isConfigName(relativePath.slice(slash + 1))) return;
    const folder = relativePath.slice(0, slash);
    if (this.seen.has(folder) || /(^|\/)(node_modules|\.git)(\/|$)/.test(folder)) return;
    this.seen.add(folder);
    this.folders.push(folder);
  }
}

/** The config folders of a list of entries (copy mode's host tree). */
export function configFoldersOf(entries: Iterable<{ path: string }>): string[] {
  const found = new ConfigFolders();
  for (const entry of entries) found.consider(entry.path);
  return found.folders;
}

/**
 * What the repositories' git config and the environment, hook, agent and editor configs at each
 * of `folders` name (git-config-paths.ts, path-sources.ts, named-scripts.ts), on one budget: past
 * it the run is refused (config-target-budget.ts). Bind mode's watch and copy mode's check both ask.
 */
export function configuredTargets(repositories: readonly GitRepository[], folders: readonly string[]): ConfigTarget[] {
  const budget = new TargetBudget();
  return [
    ...configTargets(repositories, { budget }),
    ...pathSourceTargets(folders, undefined, budget),
    ...namedScriptTargets(folders, budget),
  ];
}
