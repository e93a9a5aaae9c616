// What the host may run from a workspace without being asked, and so what the sandbox must
// not leave behind in one. These apply to every writable workspace and writable root, at any
// depth, case-insensitively; a policy turns one off only by naming it (disableBuiltinProtections).
// docs/security.md has the same lists, with the same reasons.
import { HIDING_OR_SPLITTING } from "../util/unsafe-chars.js";

/**
 * Names (lower case) that a tool on the host executes or loads as configuration when it meets
 * them in a directory, each with why. A directory name protects everything below it. The rule
 * for choosing: what runs code on the host without being asked (a shell, git, an editor or an
 * agent opening the folder, a hook manager's hook, a version manager on `cd`) is protected here;
 * what only configures a tool a person runs on purpose is reported instead (HOST_RUN_REPORTED).
 */
const PROTECTED_NAMES: ReadonlyMap<string, string> = new Map([
  [".bashrc", "bash runs it in every interactive shell started with this directory as HOME"],
  [".bash_profile", "bash runs it in login shells with this directory as HOME"],
  [".zshrc", "zsh runs it in interactive shells with this directory as ZDOTDIR/HOME"],
  [".zprofile", "zsh runs it in login shells with this directory as ZDOTDIR/HOME"],
  [".profile", "sh/bash login shells run it with this directory as HOME"],
  [".bash_login", "bash login shells run it with this directory as HOME (when there is no .bash_profile)"],
  [".bash_logout", "bash runs it when a login shell with this directory as HOME exits"],
  [".zshenv", "zsh runs it in every shell, `zsh -c` included, with this directory as ZDOTDIR/HOME"],
  [".zlogin", "zsh runs it in login shells with this directory as ZDOTDIR/HOME"],
  [".zlogout", "zsh runs it when a login shell with this directory as ZDOTDIR/HOME exits"],
  [".gitconfig", "git reads it as global configuration (core.fsmonitor, aliases) with this directory as HOME"],
  [".gitmodules", "git submodule commands read URLs and update commands (!cmd) from it"],
  [".ripgreprc", "ripgrep reads flags (--pre=<command>) from it when RIPGREP_CONFIG_PATH names it"],
  [".mcp.json", "agents (Claude Code, Pi) start the MCP servers it lists: commands"],
  [".envrc", "direnv runs it when a shell enters the directory (after `direnv allow`, or a trusted prefix)"],
  [".vscode/", "VS Code runs tasks.json tasks with runOn: folderOpen, and settings name executables"],
  [".idea/", "JetBrains IDEs run configured startup tasks and external tools from it"],
  [".pi/", "Pi loads extensions, settings and prompts from it when the project is trusted"],
  [
    ".claude/",
    "Claude Code runs hooks (settings.json, and the scripts in .claude/hooks they name), loads commands, agents and skills",
  ],
  // Hook managers: their hook, installed once in .git/hooks or core.hooksPath, reads these on every commit.
  [".husky/", "husky: core.hooksPath is .husky/_ (or .husky); the scripts in .husky run at the host's next git commit"],
  [
    ".pre-commit-config.yaml",
    "pre-commit: its git hook runs the `entry` commands of `repo: local` hooks listed here at every commit",
  ],
  ["lefthook.yml", "lefthook: its git hook runs the commands listed here at every commit"],
  ["lefthook.yaml", "lefthook: its git hook runs the commands listed here at every commit"],
  [".lefthook.yml", "lefthook: its git hook runs the commands listed here at every commit"],
  [".lefthook.yaml", "lefthook: its git hook runs the commands listed here at every commit"],
  ["lefthook-local.yml", "lefthook: local overrides of the commands its git hook runs"],
  ["lefthook-local.yaml", "lefthook: local overrides of the commands its git hook runs"],
  [".lefthook-local.yml", "lefthook: local overrides of the commands its git hook runs"],
  [".lefthook-local.yaml", "lefthook: local overrides of the commands its git hook runs"],
  [".lefthook/", "lefthook: its git hook runs the scripts in this source_dir"],
  ["hk.pkl", "hk: its git hooks run the steps it lists at every commit"],
  ["captainhook.json", "CaptainHook: its git hooks run the actions it lists at every commit"],
  [".rusty-hook.toml", "rusty-hook: its git hooks run the commands it lists at every commit"],
  ["rusty-hook.toml", "rusty-hook: its git hooks run the commands it lists at every commit"],
  [".lefthook-local/", "lefthook: its git hook runs the scripts in this source_dir_local"],
  [".huskyrc", "husky 4: its git hooks run the commands it lists at every commit"],
  [".huskyrc.json", "husky 4: its git hooks run the commands it lists at every commit"],
  [".huskyrc.js", "husky 4: its git hooks run the commands it lists at every commit"],
  [".huskyrc.cjs", "husky 4: its git hooks run the commands it lists at every commit"],
  [".huskyrc.yaml", "husky 4: its git hooks run the commands it lists at every commit"],
  [".huskyrc.yml", "husky 4: its git hooks run the commands it lists at every commit"],
  ["husky.config.js", "husky 4: its git hooks run the commands it lists at every commit"],
  ["husky.config.cjs", "husky 4: its git hooks run the commands it lists at every commit"],
  [
    ".lintstagedrc",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.json",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.yaml",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.yml",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.js",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.cjs",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.mjs",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.ts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.js",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.cjs",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.mjs",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.ts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.mts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    ".lintstagedrc.cts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.mts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  [
    "lint-staged.config.cts",
    "lint-staged, which commit hooks run (husky's usual `npx lint-staged`), runs the commands it lists (a .js config is itself run) at every commit",
  ],
  // Version managers activated in the shell act on `cd`, before anyone runs a project command.
  [
    "mise.toml",
    "mise (activated in the shell) runs [hooks] enter commands and env _.source scripts on cd; trust is by path, not content",
  ],
  [".mise.toml", "mise (activated in the shell) runs [hooks] enter commands and env _.source scripts on cd"],
  ["mise.local.toml", "mise (activated in the shell) runs [hooks] enter commands and env _.source scripts on cd"],
  [".mise.local.toml", "mise (activated in the shell) runs [hooks] enter commands and env _.source scripts on cd"],
  [".mise/", "mise reads .mise/config.toml like mise.toml"],
  [".miserc.toml", "mise reads its settings from it before the configs (env: which mise.<env>.toml files it reads)"],
  ["miserc.toml", "mise reads .config/miserc.toml like .miserc.toml (env: which mise.<env>.toml files it reads)"],
  [".rtx.toml", "mise reads .rtx.toml (rtx's old name) like mise.toml, trusted with its folder"],
  [".rtx.local.toml", "mise reads .rtx.local.toml like mise.toml, trusted with its folder"],
  [
    ".tool-versions",
    "asdf/mise put the named tool versions first on PATH on cd; a `path:` version puts a workspace folder there, so the commands a person types run from it",
  ],
  // Editors and agents that run what a folder says when it is opened.
  [".devcontainer/", "Dev Containers run initializeCommand on the host when the folder is opened in a container"],
  [".devcontainer.json", "Dev Containers run initializeCommand on the host when the folder is opened in a container"],
  [".cursor/", "Cursor starts the MCP servers of .cursor/mcp.json (commands) and runs .cursor hooks"],
  [".gemini/", "Gemini CLI starts the MCP servers and tool-discovery commands of .gemini/settings.json"],
  [".codex/", "Codex CLI reads .codex/config.toml (MCP servers and notify: commands) for a trusted project"],
  [
    ".opencode/",
    "OpenCode loads the plugins in .opencode/plugins at start and starts the MCP servers its config lists",
  ],
  ["opencode.json", "OpenCode starts the local MCP servers (commands) and loads the plugins it lists"],
  ["opencode.jsonc", "OpenCode starts the local MCP servers (commands) and loads the plugins it lists"],
  [".qwen/", "Qwen Code starts the MCP servers (commands) of .qwen/settings.json"],
  [".roo/", "Roo Code starts the MCP servers (commands) of .roo/mcp.json"],
  [".kiro/", "Kiro starts the MCP servers of .kiro/settings/mcp.json and runs its agent hooks"],
  [".continue/", "Continue starts the MCP servers (commands) its .continue/ config lists"],
  [".amazonq/", "Amazon Q starts the MCP servers (commands) of .amazonq/mcp.json"],
  ["crush.json", "Crush starts the MCP servers and language servers (commands) it lists"],
  [".crush.json", "Crush starts the MCP servers and language servers (commands) it lists"],
  [".helix/", "Helix starts the language servers (commands) of .helix/languages.toml when a file is opened"],
  [
    ".zed/",
    "Zed starts the language servers and context servers (commands) of .zed/settings.json in a trusted worktree",
  ],
  [
    ".aider.conf.yml",
    "aider runs its lint-cmd after every edit (auto-lint is on by default) and test-cmd with auto-test",
  ],
]);

/** Names (lower case) ending with one of these are protected like PROTECTED_NAMES. */
const PROTECTED_SUFFIXES: ReadonlyMap<string, string> = new Map([
  [
    ".code-workspace",
    "VS Code reads settings and runs tasks (runOn: folderOpen) of a .code-workspace file when it opens it, like .vscode/",
  ],
]);

/**
 * Two-level names (lower case, "parent/child"; a trailing "/" protects a directory): the child is
 * protected, and so is the parent's kind (a parent swapped for a symlink would hand the host
 * another child without the walk ever seeing it).
 */
const PROTECTED_NESTED: ReadonlyMap<string, string> = new Map([
  [".config/mise.toml", "mise reads .config/mise.toml like mise.toml"],
  [".config/mise/", "mise reads .config/mise/config.toml like mise.toml"],
  ["mise/config.toml", "mise reads mise/config.toml like mise.toml, trusted with its folder"],
  ["mise/config.local.toml", "mise reads mise/config.local.toml like mise.toml, trusted with its folder"],
  [".config/git/", "git reads .config/git/config as global configuration (core.fsmonitor) with this directory as HOME"],
  [".config/fish/", "fish runs config.fish and conf.d/*.fish in every shell with this directory as HOME"],
]);

/** Two-level names by pattern (lower case): the parent's name and the child's pattern, under the rule name. */
const PROTECTED_NESTED_PATTERNS: ReadonlyMap<string, { parent: string; child: RegExp }> = new Map([
  ["mise/config.*.toml", { parent: "mise", child: /^config\.[^/]+\.toml$/ }],
]);

/**
 * Names by pattern (lower case), each under its rule name: mise's per-environment files
 * (`mise.<env>.toml`, `.mise.<env>.local.toml`, ...), which it reads when MISE_ENV names that
 * environment and trusts with their folder.
 */
const PROTECTED_PATTERNS: ReadonlyMap<string, { pattern: RegExp; why: string }> = new Map([
  [
    "lefthook.{toml,json,jsonc}",
    {
      pattern: /^\.?lefthook(-local)?\.(toml|json|jsonc)$/,
      why: "lefthook reads its configs in TOML and JSON too (a lefthook-local.json beside lefthook.yml is merged): its git hook runs their commands at every commit",
    },
  ],
  [
    "mise.*.toml",
    {
      pattern: /^\.?mise\.[^/]+\.toml$/,
      why: "mise reads mise.<env>.toml (and .mise.<env>.toml, their .local variants) like mise.toml for MISE_ENV=<env>",
    },
  ],
]);

/**
 * `.claude/<name>`: names an earlier release protected one by one (now .claude/ as a whole). A
 * policy that turns one of them off still may change that part of .claude/.
 */
const PROTECTED_CLAUDE_ENTRIES: ReadonlyMap<string, string> = new Map([
  ["commands", ".claude/commands/"],
  ["agents", ".claude/agents/"],
  ["settings.json", ".claude/settings.json"],
  ["settings.local.json", ".claude/settings.local.json"],
]);

/**
 * Files a host tool reads when a person runs that tool on purpose, in a tree whose other inputs
 * (package.json scripts, sources, tests) the run may change anyway. A change is not a violation:
 * it is reported as "host-run file changed" (an event and `hostRunFiles` in the result), so a
 * caller can refuse the run's output.
 */
const HOST_RUN_REPORTED: ReadonlyMap<string, string> = new Map([
  [
    "package.json",
    "npm, yarn and pnpm run its scripts when a person runs them, and so does a commit hook that runs `npm test` or `npx lint-staged` (husky's default hook) at every commit; husky 4 and yorkie read their hooks from it",
  ],
  [
    ".npmrc",
    "npm reads it on every npm command (registry, node-options, script-shell): it changes what a later `npm install` or `npm run` does",
  ],
  [
    ".yarnrc.yml",
    "yarn runs the file yarnPath names instead of itself, and loads plugins, when a person runs yarn there",
  ],
  [".yarnrc", "yarn 1 runs the file yarn-path names instead of itself when a person runs yarn there"],
  [".pnpmfile.cjs", "pnpm runs its hooks during a `pnpm install` a person starts"],
  [
    ".env",
    "shell plugins (oh-my-zsh's dotenv) source it as shell code on cd once its folder is trusted, whatever it holds; dotenv loaders put its variables (NODE_OPTIONS among them) into the programs that read it",
  ],
  [
    ".lfsconfig",
    "git-lfs reads only URLs and fetch filters from it (no commands): a later `git lfs push` or fetch may go elsewhere",
  ],
  [
    ".gitattributes",
    "names the filter, diff and merge drivers (defined only in git config, which stays protected) host git applies to each path",
  ],
]);

/** Rules about git (see gitPathAllowed) and directory modes, by the name a policy uses to turn one off. */
const GIT_AND_MODE_RULES: ReadonlyMap<string, string> = new Map([
  [
    "git-metadata",
    "inside a .git directory only what ordinary git work changes may change: config, hooks, info/attributes, commondir, config.worktree, modules/*/config ... make host git run code",
  ],
  [
    "git-entry-kinds",
    "inside a git directory only regular files and directories, each file with one link: host git writes through a symlink or hard link (COMMIT_EDITMSG, logs/HEAD, refs/) into whatever it names, and blocks on a FIFO; in a worktree no FIFO, socket or device named .gitignore, .gitattributes or .mailmap (git status blocks on it)",
  ],
  [
    "git-modes",
    "inside a git directory no file is setuid, setgid, group- or world-writable: another local user could rewrite what host git reads",
  ],
  [
    "git-pointers",
    "HEAD, refs/**, packed-refs and the *_HEAD files hold object ids and `ref: refs/...` with names git's check-ref-format accepts, and nothing else",
  ],
  [
    "git-objects",
    "object-store files the run created or changed are what their names say: loose objects hash to their names, a new pack's .idx is what git index-pack makes of it (host git reads objects by name without checking); caches derived from them (commit-graph, multi-pack-index, .rev, .bitmap) are dropped, git rebuilds them",
  ],
  [
    "git-refs",
    "the commits the run's refs, reflogs and *_HEAD files name, and its index entries, change no protected path to content the worktree did not hold: host git writes them at a checkout, reset --hard, stash pop or restore",
  ],
  [
    "git-config-paths",
    "what the repository's git config (as it was before the run) makes executable or configuration inside a lent tree: core.hooksPath, include/includeIf targets, attributes and excludes files, commit.template, the commands of fsmonitor, sshCommand, askPass, credential helpers, editors, gpg, diff/merge/filter drivers; the folders the trees' .envrc (PATH_add, PATH=; for layout node, the host command names in node_modules/.bin), mise files (_.path, path: tools) and .tool-versions put on PATH and the files they source; and the scripts the protected hook, agent and editor configs run by path (husky hooks, pre-commit entries, lefthook run, Claude Code hooks, MCP servers, VS Code tasks, Dev Container initializeCommand and compose files)",
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
  ...PROTECTED_NAMES.keys(),
  ...[...PROTECTED_SUFFIXES.keys()].map((suffix) => `*${suffix}`),
  ...PROTECTED_PATTERNS.keys(),
  ...PROTECTED_NESTED_PATTERNS.keys(),
  ...PROTECTED_NESTED.keys(),
  ...PROTECTED_CLAUDE_ENTRIES.values(),
];

/**
 * Paths inside a git directory that ordinary git work (commit, checkout, fetch, merge, rebase,
 * stash, gc) writes, relative to that directory. None of them is read as configuration or
 * executed:
 *   objects/**           content-addressed object store (loose objects, packs, commit-graph),
 *                        except objects/info/alternates and http-alternates (they point git's
 *                        object lookup at other directories)
 *   refs/**, packed-refs branch, tag and remote pointers; logs/** their reflogs (not
 *                        refs/replace/**: git reads through a replace ref everywhere, so one
 *                        for the blob of a tracked hook makes the host's next checkout write
 *                        the sandbox's content there; ordinary git work never writes one)
 *   HEAD, ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, MERGE_MODE, MERGE_MSG, CHERRY_PICK_HEAD,
 *   REVERT_HEAD, AUTO_MERGE, REBASE_HEAD, BISECT_LOG ... state files of the current operation
 *   COMMIT_EDITMSG, SQUASH_MSG, TAG_EDITMSG  message drafts
 *   index, sharedindex.*  the staging area
 *   shallow              boundary commits of a shallow clone
 *   info/refs            the ref list `git gc` writes for dumb-HTTP serving (read by nothing local)
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
/** Written by `git gc` and `repack` (update-server-info) for dumb-HTTP serving; no local command reads it. */
const GIT_SERVER_INFO = "info/refs";
const GIT_ALTERNATES = /^objects\/info\/(http-)?alternates$/;
/** Replace refs: git substitutes the object they name for another, in every command. */
export const GIT_REPLACE_REFS = /^refs\/replace(\/|$)/;

/** Whether ordinary git work may change this path (relative to its git directory). */
export function gitPathAllowed(relative: string): boolean {
  const path = relative.endsWith(".lock") ? relative.slice(0, -5) : relative;
  if (GIT_ALTERNATES.test(path) || GIT_REPLACE_REFS.test(path)) return false;
  const slash = path.indexOf("/");
  const top = slash < 0 ? path : path.slice(0, slash);
  if (GIT_ALLOWED_TREES.has(top) || path === GIT_SERVER_INFO) return true;
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

/**
 * Names whose appearance in an existing directory makes it look like a git directory, folded
 * (foldCase): on a case-insensitive disk `head` is the HEAD git looks up.
 */
export const GIT_DIR_MARKERS = new Set(["head", "objects", "refs", "commondir"]);

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
    // Inside installed packages no tool reads these names when a person opens or enters the tree
    // (the configs are read outside node_modules too: config-folders.ts), and packages ship them:
    // `npm install dockerode` brought `.vscode/` and `.pre-commit-config.yaml` and failed the run
    // (review of real repositories, session 26). npm writes the folder's name in lower case only.
    if (parts[i] === "node_modules") return undefined;
    const lower = comparable(parts[i]!);
    const next = parts[i + 1] === undefined ? undefined : comparable(parts[i + 1]!);
    let rule: string | undefined;
    let end = i;
    if (PROTECTED_NAMES.has(lower)) rule = lower;
    else if (PROTECTED_NAMES.has(`${lower}/`)) rule = `${lower}/`;
    else rule = suffixRule(lower) ?? patternRule(lower);
    if (rule === ".claude/" && next !== undefined) {
      // A policy that turned off one of the older, narrower names keeps that part open.
      const legacy = PROTECTED_CLAUDE_ENTRIES.get(next);
      if (legacy && disabled.has(legacy)) continue;
      if (legacy && disabled.has(rule)) {
        rule = legacy;
        end = i + 1;
      }
    }
    if (!rule && next !== undefined) {
      const nested = PROTECTED_NESTED.has(`${lower}/${next}`) ? `${lower}/${next}` : `${lower}/${next}/`;
      if (PROTECTED_NESTED.has(nested)) {
        rule = nested;
        end = i + 1;
      } else
        for (const [name, { parent, child }] of PROTECTED_NESTED_PATTERNS)
          if (lower === parent && child.test(next)) {
            rule = name;
            end = i + 1;
          }
    }
    if (rule && !disabled.has(rule)) return { rule, scope: parts.slice(0, end + 1).join("/") };
  }
  return undefined;
}

/**
 * A name as the tools that read it may take it: case aside (case-insensitive file systems), and
 * without trailing spaces, tabs and dots, which GNU `patch` drops from a patch's file names and
 * Windows from every name (`.pre-commit-config.yaml ` becomes the protected file when applied).
 */
function comparable(name: string): string {
  return foldCase(name).replace(/[ \t.]+$/, "");
}

/**
 * Case aside as a case-insensitive file system may take it, not only as `toLowerCase` does:
 * `.huſky` (long s) and `.ıdea` (dotless i) lowercase to themselves, but upper-case to `.HUSKY`
 * and `.IDEA`, and NFKC makes compatibility forms (the Kelvin sign, full-width letters) plain: a
 * branch or patch with such a name, checked out on macOS or Windows, may land on the protected
 * one (review, session 25).
 */
export function foldCase(name: string): string {
  return /[^ -~]/.test(name) ? name.normalize("NFKC").toUpperCase().toLowerCase() : name.toLowerCase();
}

function patternRule(lowerName: string): string | undefined {
  for (const [rule, { pattern }] of PROTECTED_PATTERNS) if (pattern.test(lowerName)) return rule;
  return undefined;
}

function suffixRule(lowerName: string): string | undefined {
  for (const suffix of PROTECTED_SUFFIXES.keys())
    if (lowerName.endsWith(suffix) && lowerName.length > suffix.length) return `*${suffix}`;
  return undefined;
}

/**
 * Whether a directory name is the parent of a two-level protection (`.config` of
 * `.config/mise.toml`): such a directory turned into anything else is judged like the protected
 * child, whose name the walk then never meets.
 */
export function nestedProtectionParent(lowerName: string, disabled: ReadonlySet<string>): string | undefined {
  for (const rule of PROTECTED_NESTED.keys()) if (rule.startsWith(`${lowerName}/`) && !disabled.has(rule)) return rule;
  return undefined;
}

/** Why a built-in protection (by its rule name, e.g. ".husky/") exists: what on the host runs it. */
export function protectionWhy(rule: string): string | undefined {
  const lower = rule.toLowerCase();
  return PROTECTED_NAMES.get(lower) ?? PROTECTED_NESTED.get(lower) ?? PROTECTED_PATTERNS.get(lower)?.why;
}

/**
 * A virtualenv's own files that a host tool runs when it picks the venv up, with no project command
 * (review, session 27): VS Code's Python extension selects a workspace `.venv` and sources its
 * activate script in each new terminal (`python.terminal.activateEnvironment`, on by default),
 * oh-my-zsh's python plugin on `cd` (PYTHON_AUTO_VRUN), and every start of its interpreter reads
 * `pyvenv.cfg` (`home`: where the standard library is loaded from) and runs the `import` lines of
 * the `.pth` files in site-packages. Reported, not refused: making or refreshing a venv (`python -m
 * venv`, `uv sync`, `pip install` of a package with a .pth) writes them.
 */
const VENV_REPORTED: ReadonlyArray<{ pattern: RegExp; name: string; why: string }> = [
  {
    pattern: /(^|\/)pyvenv\.cfg$/,
    name: "pyvenv.cfg",
    why: "a virtualenv's interpreter loads its standard library from the home this file names, at every start (VS Code's Python extension starts a workspace venv's when the folder opens)",
  },
  {
    pattern: /(^|\/)(bin|scripts)\/(activate(\.(csh|fish|nu|ps1|bat|xsh))?|activate_this\.py)$/,
    name: "venv activate script",
    why: "VS Code's Python extension sources a workspace venv's activate script in every new terminal (on by default), and shell plugins on cd (oh-my-zsh's PYTHON_AUTO_VRUN)",
  },
  {
    pattern: /(^|\/)(bin|scripts)\/python[0-9.]*(\.exe)?$/,
    name: "venv interpreter",
    why: "the program VS Code's Python extension and an activated venv run as python (a venv's is a link to the host's interpreter)",
  },
  {
    pattern: /(^|\/)site-packages\/([^/]+\.pth|(site|user)customize\.py)$/,
    name: "site-packages .pth",
    why: "Python runs a .pth file's `import` lines, and imports sitecustomize and usercustomize, at every start of that interpreter (a venv's, when VS Code or an activated shell starts it)",
  },
];

/**
 * Other toolchains' counterparts of .npmrc (session 27): configs that name a program the tool runs
 * or downloads and runs when a person runs it (or an IDE's project import does), by their path.
 */
const TOOLCHAIN_REPORTED: ReadonlyArray<{ pattern: RegExp; name: string; why: string }> = [
  {
    pattern: /(^|\/)\.cargo\/config(\.toml)?$/,
    name: ".cargo/config.toml",
    why: "cargo runs the programs it names (build.rustc-wrapper, a target's runner and linker) and its aliases when a person runs cargo below it, and rust-analyzer's cargo check when an editor opens the folder",
  },
  {
    pattern: /(^|\/)rust-toolchain(\.toml)?$/,
    name: "rust-toolchain.toml",
    why: "rustup runs the toolchain it names (a `path` toolchain: a folder's own cargo and rustc) for every cargo or rustc a person runs below it",
  },
  {
    pattern: /(^|\/)\.(bazelrc|bazeliskrc|bazelversion)$/,
    name: "bazel config",
    why: "bazelisk downloads and runs the bazel its version and base URL name, and bazel takes startup options from .bazelrc, when a person runs bazel there",
  },
  {
    pattern: /(^|\/)gradle\/wrapper\/gradle-wrapper\.properties$/,
    name: "gradle-wrapper.properties",
    why: "./gradlew (and an IDE's Gradle import when it opens the project) downloads and runs the distribution its distributionUrl names",
  },
  {
    pattern: /(^|\/)\.mvn\/(wrapper\/maven-wrapper\.properties|extensions\.xml|jvm\.config|maven\.config)$/,
    name: ".mvn config",
    why: "./mvnw downloads and runs the Maven its distributionUrl names, and Maven loads the extensions and JVM options .mvn names, when a person runs it",
  },
  {
    pattern: /(^|\/)(pip\.conf|uv\.toml)$/,
    name: "pip.conf / uv.toml",
    why: "pip (a venv's pip.conf) and uv read the package index and options from it when a person installs there",
  },
];

/**
 * The folders of the reported paths above, when the entry there is no folder: a link the tools follow
 * to a config the walk meets under another name (review, session 27: `.cargo -> cfg` holding
 * `config.toml`, and a `.cargo/` folder swapped for such a link, which read as the config deleted).
 */
const REPORTED_FOLDER_LINKS: ReadonlyArray<{ pattern: RegExp; name: string }> = [
  { pattern: /(^|\/)\.cargo$/, name: ".cargo/config.toml" },
  { pattern: /(^|\/)gradle(\/wrapper)?$/, name: "gradle-wrapper.properties" },
  { pattern: /(^|\/)\.mvn(\/wrapper)?$/, name: ".mvn config" },
  { pattern: /(^|\/)site-packages$/, name: "site-packages .pth" },
  { pattern: /(^|\/)\.?venv$/, name: "venv activate script" },
  // A venv's bin/ (Scripts/ on Windows) as a link: by the usual venv folder names only (a repository's
  // own bin/ link is no venv's).
  { pattern: /(^|\/)\.?venv[^/]*\/(bin|scripts)$/, name: "venv activate script" },
];

/** The most of a link's target a report quotes. */
const QUOTED_TARGET_CHARS = 200;

/**
 * Why a link the run left that leads out of its tree is reported as a host-run change
 * (outward-links.ts finds them): the sandbox cannot follow it to the host, but host tools that
 * follow links can, after the run (an artifact upload, `zip -r`, `tar -h`, `cp -L`, a static site's
 * deploy), reading or writing whatever the host has there (a link `dist/notes.txt ->
 * /home/runner/.git-credentials` the CI's next step uploads). Reported, not refused: tools in the
 * sandbox make such links honestly (a venv's `bin/python -> /usr/bin/python3`).
 */
export function outwardLinkWhy(target: string, leads: "text" | "through" | "unresolved"): string {
  const quoted = target.length > QUOTED_TARGET_CHARS ? `${target.slice(0, QUOTED_TARGET_CHARS)}…` : target;
  const how = {
    text: ", outside the tree",
    through: ", which leads out of the tree through other links the run left",
    unresolved: ", in a tree of too many links to follow where it leads",
  }[leads];
  return `a link to ${JSON.stringify(quoted)}${how}: host tools that follow links (an artifact upload, zip, tar -h, cp -L) read or write what the host has there`;
}

/** Why a link the run made onto a host-run file inside its tree is reported. */
export function landingWhy(lands: string, why: string): string {
  return `a link to ${JSON.stringify(lands)}, a file host tools run or read (${why}): a host write through the link rewrites it, and a tool that follows links (an artifact upload, zip, cp -L) reads what the host keeps there`;
}

/** Why a link the run made onto its tree's top, or a folder holding it, is reported. */
export function ancestorLinkWhy(lands: string): string {
  return `a link to ${lands === "" ? "the tree's top" : JSON.stringify(lands)}, a folder that holds the link itself: a host tool that follows links (an artifact upload, zip -r, tar -h) packs everything there, .env and .git/config too, and loops`;
}

/**
 * A new file or folder whose name host commands misread (reported, not refused: a repository may
 * name a file so, and nothing in the sandbox is harmed by it):
 * - a word starting with `-` (the name's start, or after a blank): a command given a glob there
 *   (`tar czf out.tgz *`, `rm -rf *` in a CI step after the run), or the names through `xargs`,
 *   takes it as an option (`--checkpoint-action=exec=sh x.sh` runs a command; a folder `-rf`
 *   widens an `rm`);
 * - a control character, a line or paragraph separator, or a character that hides or reorders
 *   text (util/unsafe-chars.ts): a script that reads names line by line (`find . | while read f`,
 *   Python's `splitlines()`) takes `x\n/home/runner/.ssh/id_rsa` for two names, the second a host
 *   path it then copies or uploads; a bidi override makes `invoice\u202efdp.sh` look like a PDF;
 * - shell syntax (`$(`, a backquote, `;`, `|`, `<`, `>`): a script that pastes names into a shell
 *   command (`find -exec sh -c 'echo {}'`) runs it (`&` is left out: honest names hold it, `Q&A.md`).
 * (Blanks alone are not reported: honest names hold them, and quoting handles them.)
 */
export function trickyNameReport(path: string): { name: string; why: string } | undefined {
  const name = path.slice(path.lastIndexOf("/") + 1);
  // Quotes and backslashes before it too: xargs takes them away (`''--checkpoint-action=…`).
  if (/(^|\s)['"\\]*-[^\s'"]/.test(name))
    return {
      name: "a name with a word starting with -",
      why: "a name with a word starting with '-': a host command given a glob or xargs here (tar czf out.tgz *, rm -rf *) reads it as an option, and tar's --checkpoint-action=exec= runs a command",
    };
  if (HIDING_OR_SPLITTING.test(name))
    return {
      name: "a name with a control or invisible character",
      why: "a name holding a line break, a control character or one that hides or reorders text: a host script that reads names line by line (find | while read, splitlines) takes it for several names and acts on paths the sandbox chose, and a listing shows it as another name",
    };
  if (/\$\(|[`;|<>]/.test(name))
    return {
      name: "a name with shell syntax",
      why: "a name holding $(, a backquote, ;, |, < or >: a host script that pastes names into a shell command (find -exec sh -c '… {}') runs what follows",
    };
  return undefined;
}

/** A file whose change is reported as "host-run file changed" (not a violation), with why. */
export function hostRunReportOf(path: string): { name: string; why: string } | undefined {
  // A package's own package.json or .npmrc: what `npm install` writes, read by no one's command.
  if (/(^|\/)node_modules\//.test(path)) return undefined;
  const name = foldCase(path.slice(path.lastIndexOf("/") + 1));
  const why = HOST_RUN_REPORTED.get(name);
  if (why) return { name, why };
  const folded = path.toLowerCase();
  const found = [...VENV_REPORTED, ...TOOLCHAIN_REPORTED].find((v) => v.pattern.test(folded));
  if (found) return { name: found.name, why: found.why };
  // Asked of entries that are no folder: at a reported folder's name, a link (or a file) in its place.
  const link = REPORTED_FOLDER_LINKS.find((l) => l.pattern.test(folded));
  const linked = link && [...VENV_REPORTED, ...TOOLCHAIN_REPORTED].find((v) => v.name === link.name);
  return linked
    ? { name: `${link.name} (through a link at ${path.slice(path.lastIndexOf("/") + 1)})`, why: linked.why }
    : undefined;
}
