// What the host may run from a workspace without being asked, and so what the sandbox must
// not leave behind in one. These apply to every writable workspace and writable root, at any
// depth, case-insensitively; a policy turns one off only by naming it (disableBuiltinProtections).
// docs/security.md has the same lists, with the same reasons.

/**
 * Names (lower case) that a tool on the host executes or loads as configuration when it meets
 * them in a directory, each with why. A directory name protects everything below it.
 */
export const PROTECTED_NAMES: ReadonlyMap<string, string> = new Map([
  [".bashrc", "bash runs it in every interactive shell started with this directory as HOME"],
  [".bash_profile", "bash runs it in login shells with this directory as HOME"],
  [".zshrc", "zsh runs it in interactive shells with this directory as ZDOTDIR/HOME"],
  [".zprofile", "zsh runs it in login shells with this directory as ZDOTDIR/HOME"],
  [".profile", "sh/bash login shells run it with this directory as HOME"],
  [".gitconfig", "git reads it as global configuration (core.fsmonitor, aliases) with this directory as HOME"],
  [".gitmodules", "git submodule commands read URLs and update commands (!cmd) from it"],
  [".ripgreprc", "ripgrep reads flags (--pre=<command>) from it when RIPGREP_CONFIG_PATH names it"],
  [".mcp.json", "agents (Claude Code, Pi) start the MCP servers it lists: commands"],
  [".envrc", "direnv runs it when a shell enters the directory (after `direnv allow`, or a trusted prefix)"],
  [".vscode/", "VS Code runs tasks.json tasks with runOn: folderOpen, and settings name executables"],
  [".idea/", "JetBrains IDEs run configured startup tasks and external tools from it"],
  [".pi/", "Pi loads extensions, settings and prompts from it when the project is trusted"],
]);

/** `.claude/<name>`: Claude Code loads commands and agents, and settings with hooks (commands). */
export const PROTECTED_CLAUDE_ENTRIES: ReadonlyMap<string, string> = new Map([
  ["commands", ".claude/commands/"],
  ["agents", ".claude/agents/"],
  ["settings.json", ".claude/settings.json"],
  ["settings.local.json", ".claude/settings.local.json"],
]);

/** Rules about git (see gitPathAllowed) and directory modes, by the name a policy uses to turn one off. */
export const GIT_AND_MODE_RULES: ReadonlyMap<string, string> = new Map([
  [
    "git-metadata",
    "inside a .git directory only what ordinary git work changes may change: config, hooks, info/attributes, commondir, config.worktree, modules/*/config ... make host git run code",
  ],
  [
    "new-repositories",
    "a new .git directory or .git file (gitdir: pointer), or a directory turned into a bare repository: shell prompts and tools run git there, with its config",
  ],
  [
    "directory-modes",
    "a directory made group/world-writable or setgid lets other local users plant files in the workspace",
  ],
]);

/** Every name disableBuiltinProtections accepts. */
export const BUILTIN_PROTECTION_NAMES: readonly string[] = [
  ...GIT_AND_MODE_RULES.keys(),
  ...[...PROTECTED_NAMES.keys()],
  ...PROTECTED_CLAUDE_ENTRIES.values(),
];

/**
 * Paths inside a git directory that ordinary git work (commit, checkout, fetch, merge, rebase,
 * stash, gc) writes, relative to that directory. None of them is read as configuration or
 * executed:
 *   objects/**           content-addressed object store (loose objects, packs, commit-graph),
 *                        except objects/info/alternates and http-alternates (they point git's
 *                        object lookup at other directories)
 *   refs/**, packed-refs branch, tag and remote pointers; logs/** their reflogs
 *   HEAD, ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, MERGE_MODE, MERGE_MSG, CHERRY_PICK_HEAD,
 *   REVERT_HEAD, AUTO_MERGE, REBASE_HEAD, BISECT_LOG ... state files of the current operation
 *   COMMIT_EDITMSG, SQUASH_MSG, TAG_EDITMSG  message drafts
 *   index, sharedindex.*  the staging area
 *   shallow              boundary commits of a shallow clone
 *   lfs/**               git-lfs's object store
 *   <any of these>.lock  git's lock files for them
 * Everything else is not: config, config.worktree, commondir, gitdir, hooks/**, info/**
 * (attributes can name filter drivers; exclude hides files from git status), modules/**
 * (submodule git dirs, with their own config), worktrees/*\/commondir|gitdir, description,
 * rebase-merge/** and sequencer/** (their todo lists hold `exec` lines run on --continue).
 */
const GIT_ALLOWED_FILES = new Set([
  "HEAD",
  "ORIG_HEAD",
  "FETCH_HEAD",
  "MERGE_HEAD",
  "MERGE_MODE",
  "MERGE_MSG",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "AUTO_MERGE",
  "REBASE_HEAD",
  "BISECT_LOG",
  "BISECT_START",
  "BISECT_TERMS",
  "BISECT_EXPECTED_REV",
  "BISECT_ANCESTORS_OK",
  "BISECT_NAMES",
  "COMMIT_EDITMSG",
  "SQUASH_MSG",
  "TAG_EDITMSG",
  "index",
  "packed-refs",
  "shallow",
]);
const GIT_ALLOWED_TREES = new Set(["objects", "refs", "logs", "lfs"]);
const GIT_ALTERNATES = /^objects\/info\/(http-)?alternates$/;

/** Whether ordinary git work may change this path (relative to its git directory). */
export function gitPathAllowed(relative: string): boolean {
  const path = relative.endsWith(".lock") ? relative.slice(0, -5) : relative;
  if (GIT_ALTERNATES.test(path)) return false;
  const slash = path.indexOf("/");
  const top = slash < 0 ? path : path.slice(0, slash);
  if (GIT_ALLOWED_TREES.has(top)) return true;
  return slash < 0 && (GIT_ALLOWED_FILES.has(path) || /^sharedindex\.[0-9a-f]+$/.test(path));
}

/**
 * Whether a path inside a git directory is part of its object store (not kept before a run,
 * and left as it is by a restore): objects/** except the alternates files, and lfs/**.
 */
export function gitObjectStorePath(relative: string): boolean {
  if (GIT_ALTERNATES.test(relative)) return false;
  return /^(objects|lfs)\//.test(relative);
}

/** Names whose appearance in an existing directory makes it look like a git directory. */
export const GIT_DIR_MARKERS = new Set(["HEAD", "objects", "refs", "commondir"]);

/**
 * The built-in protection covering a path, if any: its rule name and its scope (the protected
 * file or directory: what is restored as a whole). The outermost protection that is not
 * disabled wins.
 */
export function builtinProtectionOf(
  path: string,
  disabled: ReadonlySet<string>,
): { rule: string; scope: string } | undefined {
  if (path === "") return undefined;
  const parts = path.split("/");
  for (let i = 0; i < parts.length; i++) {
    const lower = parts[i]!.toLowerCase();
    let rule: string | undefined;
    let end = i;
    if (PROTECTED_NAMES.has(lower)) rule = lower;
    else if (PROTECTED_NAMES.has(`${lower}/`)) rule = `${lower}/`;
    else if (lower === ".claude" && i + 1 < parts.length) {
      rule = PROTECTED_CLAUDE_ENTRIES.get(parts[i + 1]!.toLowerCase());
      end = i + 1;
    }
    if (rule && !disabled.has(rule)) return { rule, scope: parts.slice(0, end + 1).join("/") };
  }
  return undefined;
}
