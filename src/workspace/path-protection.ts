// Whether a path is protected, by the same rules the worktree gets (workspace-rules.ts), for a
// path that is not an entry of the tree but one a git pointer names: an index entry, or a path a
// commit on a ref changes. Host git writes such a path when a person checks the ref out, resets
// to it or pops the stash, so a protected path there is judged as if the run had written it.
import { builtinProtectionOf, nestedProtectionParent } from "./builtin-protections.js";
import { type CommandFolder, commandFolderGuarding, guardedAncestors, noLongerADirectory } from "./git-config-paths.js";
import { compileGlobs } from "./path-glob.js";
import type { RuleConfig } from "./workspace-rules.js";

export interface Protection {
  /** The rule's name, as in a worktree violation (".husky/", "git-config-paths", "protectedPaths"). */
  rule: string;
  /** Why, where the rule says (the git config key that names the path). */
  why?: string;
}

/**
 * `mode`: the git mode the pointer puts at the path (0 or absent: nothing). A blob, link or gitlink
 * where a guarded path's parent is counts as the worktree judge counts it: the host's checkout
 * makes that parent a link to a folder the run filled (review, session 26).
 */
export type ProtectionOf = (path: string, mode?: number) => Protection | undefined;

const GIT_TYPE_BITS = 0o170000;
const GIT_TREE = 0o040000;

/** The protection of a tree path (relative to the lent tree's root), or undefined. */
export function pathProtection(config: RuleConfig): ProtectionOf {
  const disabled = new Set(config.disabled ?? []);
  const globs = config.protectedPaths ?? [];
  const caller = globs.length > 0 ? compileGlobs(globs) : undefined;
  const off = disabled.has("git-config-paths");
  const configPaths = off ? new Map<string, string>() : (config.configPaths ?? new Map());
  const commandFolders = off ? new Map<string, CommandFolder>() : (config.commandFolders ?? new Map());
  const hostCommands = config.hostCommands ?? new Set<string>();
  const ancestors = guardedAncestors(configPaths, commandFolders);
  return (path, mode = 0) => {
    const builtin = builtinProtectionOf(path, disabled);
    if (builtin) return { rule: builtin.rule };
    for (let end = path.length; end > 0; end = path.lastIndexOf("/", end - 1)) {
      const why = configPaths.get(path.slice(0, end));
      if (why !== undefined) return { rule: "git-config-paths", why };
    }
    const folder = commandFolderGuarding(path, commandFolders, hostCommands);
    if (folder) return { rule: "git-config-paths", why: folder.why };
    if (mode !== 0 && (mode & GIT_TYPE_BITS) !== GIT_TREE) {
      const ancestor = ancestors.get(path);
      if (ancestor) return { rule: "git-config-paths", why: noLongerADirectory(ancestor) };
      const name = path.slice(path.lastIndexOf("/") + 1);
      const nested = nestedProtectionParent(name.toLowerCase(), disabled);
      if (nested)
        return {
          rule: nested,
          why: `a parent of ${path}${nested.slice(nested.indexOf("/"))} is no longer a directory`,
        };
    }
    if (caller?.(path)) return { rule: "protectedPaths" };
    return undefined;
  };
}
