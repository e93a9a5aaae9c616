// What a repository's own configuration holds that matters to the run. Drivers: filter, diff and
// merge drivers run commands the repository chose whenever git touches a path whose attributes name
// them (a `git status`, `git diff` or `checkout` the model runs innocently); the run neutralises
// each one it finds inside the sandbox (run/git-safety-env.ts). Credentials: a token
// `actions/checkout` keeps as `http.<url>.extraheader`, a URL with a password or a token as its
// user, a helper with a password in it, are secrets the sandbox could read; the run refuses to start
// (prepare-plan.ts). Reads section headers, keys and values from the repository's config files
// inside the workspace (also behind a `.git` file's `gitdir:`, includes, submodules'), with a size
// and a file cap; never runs git.
//
// Why by hand: this must find every driver git would find, in a file the sandbox may have written to
// confuse parsers. It reads leniently, line by line, and errs towards reporting (neutralising a
// driver git would not have used costs nothing). A config library (ini, parse-git-config) parses for
// values and skips or rejects what it does not understand, and every section it misses is a
// repository command the host's git would run.
import fs from "node:fs";
import path from "node:path";

/** What scanGitConfig finds. */
export interface GitConfigFacts {
  drivers: GitDrivers;
  /** Config keys (never their values) that hold a credential, e.g. `http.https://github.com/.extraheader`. */
  credentials: string[];
  /** Config files left unread past MAX_FILES (the run refuses to start: what they define is unknown). */
  unread: number;
}

export interface GitDrivers {
  filters: string[];
  diffs: string[];
  merges: string[];
  /** `diff.external` is set. */
  externalDiff: boolean;
}

const MAX_CONFIG_BYTES = 1024 * 1024;
/**
 * Config files read at most (config, config.worktree, the common dir's, includes, submodules'): as
 * many as git-config-paths.ts reads. At 64, Boost checked out with its 172 submodules was refused
 * (review of real repositories, session 26).
 */
export const MAX_FILES = 1024;
const SECTION = /^\s*\[\s*(filter|diff|merge)\s+"((?:[^"\\\n]|\\.)*)"\s*\]/i;
const OLD_SECTION = /^\s*\[\s*(filter|diff|merge)\.([^\]\s]+)\s*\]/i;
const PLAIN_SECTION = /^\s*\[\s*([a-z0-9.-]+)\s*\]/i;
/** Any other section with a subsection, e.g. `[http "https://github.com/"]`, `[remote "origin"]`. */
const OTHER_SECTION = /^\s*\[\s*([a-z0-9-]+)\s+"((?:[^"\\\n]|\\.)*)"\s*\]/i;
const KEY = /^\s*([a-z][a-z0-9-]*)\s*(=|$)\s*(.*)$/i;
/** A URL's user and password: `https://user:token@host/`. */
const URL_USERINFO = /[a-z][a-z0-9+.-]*:\/\/([^/\s@]*)@/gi;
/** A user name that is a token (GitHub's and GitLab's prefixes, CI token users, or long and random). */
const TOKEN_USER =
  /^(gh[pousr]_|github_pat_|glpat-|gldt-|x-access-token$|gitlab-ci-token$|oauth2$|x-token-auth$|[\w-]{32,}$)/i;

export function scanGitDrivers(workspace: string): GitDrivers {
  return scanGitConfig(workspace).drivers;
}

/** A value (or a section's name) that holds a credential: a URL with a password or a token as its user. */
function holdsSecretUrl(text: string): boolean {
  for (const [, userinfo] of text.matchAll(URL_USERINFO)) {
    const colon = userinfo!.indexOf(":");
    if (colon >= 0 && colon < userinfo!.length - 1) return true;
    if (TOKEN_USER.test(decodeURIComponentSafe(colon >= 0 ? userinfo!.slice(0, colon) : userinfo!))) return true;
  }
  return false;
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The file's logical lines: git joins a line ending in a backslash with the next. */
function logicalLines(text: string): string[] {
  const lines: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\r$/, "");
    // Counted by a loop: `/\\+$/` backtracks from every backslash of a long run not at the end.
    let trailing = 0;
    while (trailing < line.length && line[line.length - 1 - trailing] === "\\") trailing++;
    if (trailing % 2 === 1) pending += line.slice(0, -1);
    else {
      lines.push(pending + line);
      pending = "";
    }
  }
  if (pending) lines.push(pending);
  return lines;
}

function isFile(file: string): boolean {
  try {
    return fs.lstatSync(file).isFile();
  } catch {
    return false;
  }
}

/** Folders of `.git/modules` one scan reads at most. */
const MAX_MODULE_FOLDERS = 1_000;

function isRealDirectory(p: string): boolean {
  try {
    return fs.lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The config files of a repository's submodules (`<git dir>/modules/<name>/config`, nested ones too). */
function submoduleConfigs(workspace: string, gitDir: string, limit: number): { files: string[]; cut: boolean } {
  const found: string[] = [];
  // Folders read at most: a .git/modules of links back to itself, each followed, once made
  // fan-out^5 lstats (hours) at plan time (review, session 25). Links are not followed at all:
  // git makes these folders itself.
  let visits = MAX_MODULE_FOLDERS;
  let cut = false;
  const walk = (modules: string) => {
    // No depth limit (a submodule's name is its path: third_party/src/github.com/org/repo/sub is six
    // folders deep, and its config's extraheader went unread; review, session 25): the folder budget bounds it.
    if (found.length >= limit || visits-- <= 0) return;
    let names: string[];
    try {
      if (!fs.realpathSync(modules).startsWith(`${workspace}/`)) return;
      names = fs.readdirSync(modules);
    } catch {
      return;
    }
    if (names.length > limit) cut = true;
    for (const name of names.slice(0, limit)) {
      const dir = path.join(modules, name);
      if (!isRealDirectory(dir)) continue;
      if (isFile(path.join(dir, "config"))) {
        found.push(path.join(dir, "config"));
        walk(path.join(dir, "modules"));
      } else {
        // A submodule named a/b lives at modules/a/b.
        walk(dir);
      }
    }
  };
  walk(path.join(gitDir, "modules"));
  // Folders left unwalked count as unread config: the run refuses rather than miss what they hold.
  return { files: found.slice(0, limit), cut: cut || visits < 0 };
}

/**
 * `workspace` is the tree whose files may be read (every file read lies inside it); `gitDir` the
 * repository's git directory, by default the workspace's own (`.git`, or where its `gitdir:` points):
 * a repository nested in the workspace, or a bare one, is scanned with its own git directory.
 */
/** `<git dir>/worktrees/<name>/config.worktree` of each linked worktree (at most `limit`). */
function worktreeConfigs(gitDir: string, limit: number): { files: string[]; cut: boolean } {
  let names: string[];
  try {
    names = fs.readdirSync(path.join(gitDir, "worktrees"));
  } catch {
    return { files: [], cut: false };
  }
  return {
    files: names.slice(0, limit).map((name) => path.join(gitDir, "worktrees", name, "config.worktree")),
    cut: names.length > limit,
  };
}

export function scanGitConfig(workspace: string, gitDir: string = gitDirOf(workspace)): GitConfigFacts {
  const credentials = new Set<string>();
  const found = {
    filters: new Set<string>(),
    diffs: new Set<string>(),
    merges: new Set<string>(),
    externalDiff: false,
  };
  const queue = [path.join(gitDir, "config"), path.join(gitDir, "config.worktree")];
  const common = readInside(workspace, path.join(gitDir, "commondir"))?.trim();
  if (common) queue.push(path.join(path.resolve(gitDir, common), "config"));
  const submodules = submoduleConfigs(workspace, gitDir, MAX_FILES);
  queue.push(...submodules.files);
  // A linked worktree's own settings (extensions.worktreeConfig) live in the main repository's
  // worktrees/<name>/config.worktree, inside the tree even when the worktree is not (review, session 34).
  const worktrees = worktreeConfigs(gitDir, MAX_FILES);
  queue.push(...worktrees.files);
  const seen = new Set<string>();
  while (queue.length > 0 && seen.size < MAX_FILES) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readInside(workspace, file);
    if (text === undefined) continue;
    let section = "";
    for (const whole of logicalLines(text)) {
      let line = whole;
      const quoted = SECTION.exec(line);
      const named = quoted ?? OLD_SECTION.exec(line);
      const plain = named ? undefined : PLAIN_SECTION.exec(line);
      const other = named || plain ? undefined : OTHER_SECTION.exec(line);
      if (named) {
        const kind = named[1]!.toLowerCase();
        // git lower-cases the old form's subsection ([filter.Evil] is filter.evil), not a quoted one.
        const name = quoted ? named[2]!.replace(/\\(.)/g, "$1") : named[2]!.toLowerCase();
        (kind === "filter" ? found.filters : kind === "diff" ? found.diffs : found.merges).add(name);
        section = `${kind}.${name}`;
      } else if (plain) {
        section = plain[1]!.toLowerCase();
      } else if (other) {
        section = `${other[1]!.toLowerCase()}.${other[2]!.replace(/\\(.)/g, "$1")}`;
        // `[url "https://user:token@host/"]`: the token is in the section's name.
        if (holdsSecretUrl(other[2]!)) credentials.add(`${other[1]!.toLowerCase()}."<a URL with a credential>"`);
      }
      // A key may follow its section's header on the same line (`[diff] external = x`).
      const header = named ?? plain ?? other;
      if (header) line = line.slice(header[0].length);
      const key = KEY.exec(line);
      if (!key) continue;
      const name = key[1]!.toLowerCase();
      const value = key[3]!;
      if ((section === "http" || section.startsWith("http.")) && name === "extraheader")
        credentials.add(`${section}.extraheader`);
      else if ((section === "credential" || section.startsWith("credential.")) && /password\s*=/i.test(value))
        credentials.add(`${section}.${name}`);
      else if (holdsSecretUrl(value)) credentials.add(`${section}.${name}`);
      if (section === "diff" && name === "external") found.externalDiff = true;
      // Included files may define drivers too; only those inside the workspace are read.
      if ((section === "include" || section.startsWith("includeif")) && name === "path") {
        queue.push(path.resolve(path.dirname(file), value.trim().replace(/^"|"$/g, "")));
      }
    }
  }
  return {
    drivers: {
      filters: [...found.filters].sort(),
      diffs: [...found.diffs].sort(),
      merges: [...found.merges].sort(),
      externalDiff: found.externalDiff,
    },
    credentials: [...credentials].sort(),
    unread:
      queue.filter((file) => !seen.has(file) && readInside(workspace, file) !== undefined).length +
      (submodules.cut ? 1 : 0) +
      (worktrees.cut ? 1 : 0),
  };
}

/**
 * The workspace's git directory: `.git`, or where a `.git` file's `gitdir:` line points (a linked
 * worktree, a submodule, `git init --separate-git-dir`), git follows it. A target outside the
 * workspace is not the sandbox's to read: its files are not read (readInside).
 */
export function gitDirOf(workTree: string, within: string = workTree): string {
  const dotGit = path.join(workTree, ".git");
  const target = /^gitdir:\s*(.+)$/.exec(readInside(within, dotGit)?.trim() ?? "")?.[1];
  return target ? path.resolve(workTree, target.trim()) : dotGit;
}

/** A regular file's text, when its real path lies inside the workspace and it is small; else undefined. */
function readInside(workspace: string, file: string): string | undefined {
  try {
    const real = fs.realpathSync(file);
    if (!real.startsWith(`${workspace}/`)) return undefined;
    const stat = fs.statSync(real);
    if (!stat.isFile() || stat.size > MAX_CONFIG_BYTES) return undefined;
    return fs.readFileSync(real, "utf8");
  } catch {
    return undefined;
  }
}
