// The folders below a tree's top that hold an environment, hook, agent or editor config: they are
// read like the top's (path-sources.ts, named-scripts.ts), because a person enters a tree there
// too: direnv loads a monorepo's allowed `packages/web/.envrc` on `cd`, an editor opened on
// `packages/web` runs its `.vscode/tasks.json`, an agent started there reads its `.claude/` and
// `.mcp.json`. What those configs name must be protected as the top's are (review, session 24:
// only the top was read). Found by name during a walk of the tree as it was before the run.
import fs from "node:fs";
import path from "node:path";
import type { SandboxRunError } from "../errors.js";
import { atOrBelow } from "../util/path-inside.js";
import { resolvedPath } from "../util/resolved-path.js";
import { builtinProtectionOf } from "./builtin-protections.js";
import { protectionRefusal, TargetBudget } from "./config-target-budget.js";
import {
  type ConfigTarget,
  commandLinkTargets,
  configTargets,
  GIT_HOOK_NAMES,
  type GitRepository,
  isDirectory,
} from "./git-config-paths.js";
import { COMMAND_CONFIGS, LEFTHOOK_NAME, namedScriptTargets } from "./named-scripts.js";
import { callerPathTargets, hostCommandNames, MISE_FILES, pathSourceTargets } from "./path-sources.js";

/** Folders read at most per tree: more refuses the run (never a config left unread in silence). */
export const MAX_CONFIG_FOLDERS = 1_000;
/** Links at protected names followed at most per tree (past it, as past the folders: refused). */
const MAX_PROTECTED_LINKS = 1_000;
const NONE_DISABLED: ReadonlySet<string> = new Set();

const regexText = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Every file the two readers read at a folder's top, as a path ending: the folder is what comes
 * before it. Whole paths, not first names: a plain `.config/` or `mise/` folder is no config (a
 * run that made 1,000 of them, none a protected name, once used up the cap for the next run;
 * review, session 25), and every file here is a protected name, so a run cannot plant decoys.
 */
const READ_FILES: readonly string[] = [
  ".envrc",
  ".tool-versions",
  ".pre-commit-config.yaml",
  ".devcontainer.json",
  ".devcontainer/devcontainer.json",
  ...MISE_FILES,
  ...COMMAND_CONFIGS.map((c) => c.file),
];

const CONFIG_FILES: readonly RegExp[] = READ_FILES.map((file) => new RegExp(`(?:^|/)${regexText(file)}$`)).concat([
  /(?:^|\/)\.?mise\.[^/]+\.toml$/,
  /(?:^|\/)(?:\.mise|mise|\.config\/mise)\/config\.[^/]+\.toml$/,
  /(?:^|\/)\.config\/mise\.[^/]+\.toml$/,
  /(?:^|\/)\.config\/mise\/conf\.d\/[^/]+\.toml$/,
  /(?:^|\/)\.devcontainer\/[^/]+\/devcontainer\.json$/,
  new RegExp(`(?:^|/)\\.husky/(?:${GIT_HOOK_NAMES.map(regexText).join("|")})$`),
  new RegExp(`(?:^|/)${LEFTHOOK_NAME.source.replace(/^\^/, "")}`),
]);

/**
 * The folders a config path passes through (`.claude` of `.claude/settings.json`, `.config` and
 * `.config/mise` of `.config/mise/config.toml`): one of them that is a symbolic link hides the
 * files below it from the walk, but the tools follow it (a package's `.claude` linked to a shared
 * folder: its hooks went unread; review, session 25). Each is a protected name too.
 */
const CONFIG_FOLDER_PARTS: readonly RegExp[] = [
  ...new Set(
    [...READ_FILES, ".husky/pre-commit", ".config/mise/conf.d/x.toml"].flatMap((file) => {
      const parts = file.split("/").slice(0, -1);
      return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
    }),
  ),
]
  .map((folder) => new RegExp(`(?:^|/)${regexText(folder)}$`))
  .concat([/(?:^|\/)\.devcontainer\/[^/]+$/]);

/** The folder holding a config reached through the link at `relativePath`, if its name is one a config path passes through. */
export function configFolderOfLink(relativePath: string): string | undefined {
  let at: number | undefined;
  for (const part of CONFIG_FOLDER_PARTS) {
    const match = part.exec(relativePath);
    if (match && (at === undefined || match.index < at)) at = match.index;
  }
  return at === undefined ? undefined : relativePath.slice(0, at);
}

/** Last names worth trying the endings on (most entries of a tree are none of these). */
function mayEndAConfig(name: string): boolean {
  return (
    name.startsWith(".") || /\.(toml|jsonc?|ya?ml)$/.test(name) || (GIT_HOOK_NAMES as readonly string[]).includes(name)
  );
}

/** The folder (relative; "" for the top) that holds the config file at `relativePath`, if it is one. */
export function configFolderOf(relativePath: string): string | undefined {
  if (!mayEndAConfig(relativePath.slice(relativePath.lastIndexOf("/") + 1))) return undefined;
  // The longest ending wins: `.config/mise.toml` is the folder's, not `.config`'s `mise.toml`.
  let at: number | undefined;
  for (const ending of CONFIG_FILES) {
    const match = ending.exec(relativePath);
    if (match && (at === undefined || match.index < at)) at = match.index;
  }
  return at === undefined ? undefined : relativePath.slice(0, at);
}

/**
 * Collects, entry by entry in walk order, the folders (relative, never the top "") that hold a
 * config. Nothing under `node_modules` (a package's own files) or a `.git` is taken. More than
 * MAX_CONFIG_FOLDERS: `overflow` (the caller refuses the run).
 */
export class ConfigFolders {
  readonly folders: string[] = [];
  /**
   * Links at a built-in protected name (relative): what they point at is what the tools read and
   * run (`.husky/pre-commit -> ../conf/pre-commit`, `.claude/settings.json`, a package's `.claude`
   * linked to a shared folder), so it is protected with them (configuredTargets). The link alone
   * was, and the run rewrote its target (review, session 26).
   */
  readonly links: string[] = [];
  overflow = false;
  /** What came first past a cap: named in the refusal. */
  leftOut?: { path: string; cap: "folders" | "links" };
  private readonly seen = new Set<string>();

  private over(path: string, cap: "folders" | "links"): void {
    this.overflow = true;
    this.leftOut ??= { path, cap };
  }

  consider(relativePath: string, kind?: string): void {
    if (
      kind === "symlink" &&
      !/(^|\/)(node_modules|\.git)\//.test(relativePath) &&
      builtinProtectionOf(relativePath, NONE_DISABLED)
    ) {
      if (this.links.length >= MAX_PROTECTED_LINKS) this.over(relativePath, "links");
      else this.links.push(relativePath);
    }
    const folder =
      kind === "symlink"
        ? (configFolderOf(relativePath) ?? configFolderOfLink(relativePath))
        : configFolderOf(relativePath);
    if (!folder || this.seen.has(folder) || /(^|\/)(node_modules|\.git)(\/|$)/.test(folder)) return;
    if (this.folders.length >= MAX_CONFIG_FOLDERS) {
      this.over(folder, "folders");
      return;
    }
    this.seen.add(folder);
    this.folders.push(folder);
  }
}

/**
 * The usage error for a tree with more config folders (or links at their names) than a run reads,
 * naming the first ones and the first left out (review, session 27: the message named neither cap's
 * count nor any folder). Past the cap nothing is read: with `git-config-paths` off nothing would be,
 * and the callers do not refuse.
 */
export function tooManyConfigFolders(root: string, found: ConfigFolders): SandboxRunError {
  const links = found.leftOut?.cap === "links";
  const listed = (links ? found.links : found.folders).slice(0, 3).map((p) => quotedName(p));
  const what = links
    ? `more than ${MAX_PROTECTED_LINKS} links at config names (${listed.join(", ")}, ...; the ${MAX_PROTECTED_LINKS + 1}st: ${quotedName(found.leftOut?.path ?? "")})`
    : `more than ${MAX_CONFIG_FOLDERS} folders (${listed.join(", ")}, ...; the ${MAX_CONFIG_FOLDERS + 1}st: ${quotedName(found.leftOut?.path ?? "")})`;
  return protectionRefusal(
    `${root} holds environment, hook, agent or editor configs in ${what}; sandbox-run reads what each names before a run, and reads no more`,
    "Lend a smaller tree (a package rather than the whole repository)",
  );
}

function quotedName(p: string): string {
  return /^[\w@%+=:,./-]+$/.test(p) ? p : JSON.stringify(p);
}

/** The config folders of a list of entries (copy mode's host tree). */
export function configFoldersOf(root: string, entries: Iterable<{ path: string; kind?: string }>): string[] {
  return configEntriesOf(root, entries).folders;
}

/** The config folders and the links at protected names of a list of entries (relative). */
export function configEntriesOf(
  root: string,
  entries: Iterable<{ path: string; kind?: string }>,
): { folders: string[]; links: string[] } {
  const found = new ConfigFolders();
  for (const entry of entries) {
    found.consider(entry.path, entry.kind);
    if (found.overflow) throw tooManyConfigFolders(root, found);
  }
  return { folders: found.folders, links: found.links };
}

/**
 * What the repositories' git config and the environment, hook, agent and editor configs at each
 * of `folders` name (git-config-paths.ts, path-sources.ts, named-scripts.ts), on one budget: past
 * it the run is refused (config-target-budget.ts); with the targets of the links already in its
 * command folders, the folders of the caller's PATH inside `lentTrees` (callerPathTargets), and
 * the host's command names those folders guard (read once, from its PATH, outside `lentTrees`).
 * Bind mode's watch and copy mode's check both ask.
 */
export function configuredTargets(
  repositories: readonly GitRepository[],
  folders: readonly string[],
  lentTrees: readonly string[],
  links: readonly string[] = [],
): { targets: ConfigTarget[]; hostCommands: ReadonlySet<string> } {
  const budget = new TargetBudget();
  const targets = [
    ...linkTargets(links, lentTrees, budget),
    ...configTargets(repositories, { budget }),
    ...pathSourceTargets(folders, budget).map((t) => onPathAtTop(t, lentTrees)),
    ...namedScriptTargets(folders, budget),
    ...callerPathTargets(process.env.PATH, lentTrees),
  ];
  if (!targets.some((t) => t.commands)) return { targets, hostCommands: new Set() };
  const hostCommands = hostCommandNames(process.env.PATH, lentTrees);
  return { targets: [...targets, ...commandLinkTargets(targets, hostCommands)], hostCommands };
}

/**
 * A folder an environment file puts on PATH that is a lent tree's own top, or the folder holding
 * that file (`PATH_add .`, `export PATH="$PWD:$PATH"`, mise's `{{config_root}}`, a package's
 * `PATH_add ../..`), cannot be protected whole: the tree itself (targetsInTree skips it) or a whole
 * package would be, so it guarded nothing, and the sandbox's `./git` ran in the host's shell
 * (review, session 26). It guards the host's command names there instead, as `layout node`'s
 * folder does; a `path:` tool version's folder is what mise and asdf put `bin/` of on PATH: that.
 */
function onPathAtTop(target: ConfigTarget, lentTrees: readonly string[]): ConfigTarget {
  if (target.commands) return target;
  const at = [path.normalize(target.path), resolvedPath(target.path)];
  const tops = new Set([...lentTrees, path.dirname(target.source)]);
  if (!at.some((p) => tops.has(p)) || !isDirectory(target.path)) return target;
  if (target.key.endsWith(" path:")) return { ...target, path: path.join(target.path, "bin") };
  return { ...target, key: `${target.key} (a host command's name)`, commands: {} };
}

/** Links and folder entries followed at most from the links at protected names (past it: refused). */
const MAX_LINK_VISITS = 10_000;

/**
 * What each link at a protected name (absolute) points at, as a whole target (also when dangling),
 * and on along the way: a chain of links (`conf/a -> b -> real`: each hop is the sandbox's to
 * re-point) and the links inside a folder one leads to (`.claude -> shared/claude` holding
 * `settings.json -> ../../conf/s.json`; review, session 26).
 */
function linkTargets(links: readonly string[], lentTrees: readonly string[], budget: TargetBudget): ConfigTarget[] {
  const out: ConfigTarget[] = [];
  const seen = new Set<string>();
  // A folder many links lead to (each package's `.vscode -> ../../.shared-vscode`) is walked once:
  // walked per link, 476 links to a 20-file folder passed the visits cap (review, session 27).
  const walkedFolders = new Set<string>();
  const targeted = new Set<string>();
  let visits = 0;
  const count = (source: string) => {
    if (++visits > MAX_LINK_VISITS)
      throw protectionRefusal(
        `the links at protected names in the tree of ${source} lead through more than ${MAX_LINK_VISITS} links and entries`,
        "Lend a tree with fewer links at config names",
      );
  };
  // Only what lies in a lent tree: elsewhere the sandbox changes nothing (a committed `.idea -> /` is not walked).
  const lent = (p: string) => lentTrees.some((t) => atOrBelow(p, t));
  const follow = (link: string, source: string): void => {
    if (seen.has(link)) return;
    seen.add(link);
    count(source);
    let target: string;
    try {
      target = path.resolve(path.dirname(link), fs.readlinkSync(link));
    } catch {
      return;
    }
    if (!targeted.has(target)) {
      targeted.add(target);
      budget.take(source);
      out.push({ path: target, key: "the target of a link at a protected name", source });
    }
    if (lent(target)) within(target, source);
  };
  // A link on: followed; a folder: its links, at any depth below it.
  const within = (at: string, source: string): void => {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(at);
    } catch {
      return;
    }
    if (stat.isSymbolicLink()) {
      follow(at, source);
      return;
    }
    if (!stat.isDirectory()) return;
    const folder = `${stat.dev}:${stat.ino}`;
    if (walkedFolders.has(folder)) return;
    walkedFolders.add(folder);
    // From its real path: a link inside resolves against the folder the kernel (and the tool) is
    // in, not the text of the path that reached it through a linked folder (review, session 27:
    // walked once through such a path, `../../conf/s.json` was judged elsewhere and left unguarded).
    let real: string;
    let entries: fs.Dirent[];
    try {
      real = fs.realpathSync(at);
      entries = fs.readdirSync(real, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      count(source);
      if (entry.isSymbolicLink()) follow(path.join(real, entry.name), source);
      else if (entry.isDirectory()) within(path.join(real, entry.name), source);
    }
  };
  for (const link of links) follow(link, link);
  return out;
}
