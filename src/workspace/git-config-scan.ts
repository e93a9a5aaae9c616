// What a repository's own configuration holds that matters to the run. Drivers: filter, diff and merge drivers run
// commands the repository chose whenever git touches a path whose attributes name them (a `git
// status`, `git diff` or `checkout` the model runs innocently). The run neutralises each one it finds
// inside the sandbox (run/git-safety-env.ts). Credentials: a token `actions/checkout` keeps as
// `http.<url>.extraheader`, or a URL with a password (a remote, a `url.<base>`), is a secret the
// sandbox could read; the run refuses to start (prepare-plan.ts). Reads only section headers, `diff.external`,
// `extraheader` and URLs, from the
// repository's config files inside the workspace (also behind a `.git` file's `gitdir:`), with a size
// cap; never runs git.
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
}

export interface GitDrivers {
  filters: string[];
  diffs: string[];
  merges: string[];
  /** `diff.external` is set. */
  externalDiff: boolean;
}

const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_FILES = 16;
const SECTION = /^\s*\[\s*(filter|diff|merge)\s+"((?:[^"\\\n]|\\.)*)"\s*\]/i;
const OLD_SECTION = /^\s*\[\s*(filter|diff|merge)\.([^\]\s]+)\s*\]/i;
const PLAIN_SECTION = /^\s*\[\s*([a-z0-9.-]+)\s*\]/i;
/** Any other section with a subsection, e.g. `[http "https://github.com/"]`, `[remote "origin"]`. */
const OTHER_SECTION = /^\s*\[\s*([a-z0-9-]+)\s+"((?:[^"\\\n]|\\.)*)"\s*\]/i;
/** A URL with a password in it: `https://user:token@host/`. */
const URL_WITH_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^/\s@:]*:[^/\s@]+@/i;
const KEY = /^\s*([a-z][a-z0-9-]*)\s*(=|$)\s*(.*)$/i;

export function scanGitDrivers(workspace: string): GitDrivers {
  return scanGitConfig(workspace).drivers;
}

export function scanGitConfig(workspace: string): GitConfigFacts {
  const credentials = new Set<string>();
  const found = {
    filters: new Set<string>(),
    diffs: new Set<string>(),
    merges: new Set<string>(),
    externalDiff: false,
  };
  const gitDir = gitDirOf(workspace);
  const queue = [path.join(gitDir, "config"), path.join(gitDir, "config.worktree")];
  const common = readInside(workspace, path.join(gitDir, "commondir"))?.trim();
  if (common) queue.push(path.join(path.resolve(gitDir, common), "config"));
  const seen = new Set<string>();
  while (queue.length > 0 && seen.size < MAX_FILES) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readInside(workspace, file);
    if (text === undefined) continue;
    let section = "";
    for (const line of text.split("\n")) {
      const quoted = SECTION.exec(line);
      const named = quoted ?? OLD_SECTION.exec(line);
      if (named) {
        const kind = named[1]!.toLowerCase();
        // git lower-cases the old form's subsection ([filter.Evil] is filter.evil), not a quoted one.
        const name = quoted ? named[2]!.replace(/\\(.)/g, "$1") : named[2]!.toLowerCase();
        (kind === "filter" ? found.filters : kind === "diff" ? found.diffs : found.merges).add(name);
        section = `${kind}.${name}`;
        continue;
      }
      const plain = PLAIN_SECTION.exec(line);
      if (plain) {
        section = plain[1]!.toLowerCase();
        continue;
      }
      const other = OTHER_SECTION.exec(line);
      if (other) {
        section = `${other[1]!.toLowerCase()}.${other[2]!.replace(/\\(.)/g, "$1")}`;
        // `[url "https://user:token@host/"]`: the token is in the section's name.
        if (URL_WITH_PASSWORD.test(other[2]!)) credentials.add(`${other[1]!.toLowerCase()}."<a URL with a password>"`);
        continue;
      }
      const key = KEY.exec(line);
      if (!key) continue;
      const name = key[1]!.toLowerCase();
      if ((section === "http" || section.startsWith("http.")) && name === "extraheader")
        credentials.add(`${section}.extraheader`);
      if (URL_WITH_PASSWORD.test(key[3]!)) credentials.add(`${section}.${name}`);
      if (section === "diff" && name === "external") found.externalDiff = true;
      // Included files may define drivers too; only those inside the workspace are read.
      if ((section === "include" || section.startsWith("includeif")) && name === "path") {
        queue.push(path.resolve(path.dirname(file), key[3]!.trim().replace(/^"|"$/g, "")));
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
  };
}

/**
 * The workspace's git directory: `.git`, or where a `.git` file's `gitdir:` line points (a linked
 * worktree, a submodule, `git init --separate-git-dir`), git follows it. A target outside the
 * workspace is not the sandbox's to read: its files are not read (readInside).
 */
function gitDirOf(workspace: string): string {
  const dotGit = path.join(workspace, ".git");
  const target = /^gitdir:\s*(.+)$/.exec(readInside(workspace, dotGit)?.trim() ?? "")?.[1];
  return target ? path.resolve(workspace, target.trim()) : dotGit;
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
