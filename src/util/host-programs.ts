// The PATH the host's own programs are found on (git for the checks, the branch and the record's
// patch, diff, tar and umount for image builds, the opener of `show --open`, a models.json
// `!command`'s shell). They ran by name on the caller's PATH, and a caller's PATH often holds a
// folder of a tree the sandbox writes: direnv's `PATH_add bin`, `npm run`'s `node_modules/.bin`, a
// CI step's `$GITHUB_PATH`, a relative or empty entry (the working directory, usually the
// workspace). The sandbox's `bin/git` then ran as the caller (root), with the controller's
// environment readable under /proc, during the run's own checks, before anything was put back
// (review, session 26). So the search path keeps only absolute folders that lie, links resolved,
// in no tree a run of this process has lent (remembered for the process's life: what a sandbox left
// there stays there after its run). The same holds for every other variable that makes a program
// load code from a folder or file it names: the dynamic loader's (`LD_LIBRARY_PATH=$PWD/lib` from a
// dev shell loaded the sandbox's `lib/libonig.so.5` into a models.json `!jq` key helper as the
// caller; review, round 3, session 42), the shells' start-up files and the interpreters' module
// paths. Each keeps only absolute entries outside every lent tree, and goes when none is left.
import os from "node:os";
import path from "node:path";
import { passesThrough } from "./passes-through.js";
import { resolvedPath } from "./resolved-path.js";

/** Where a PATH holds nothing usable: the usual system folders. */
const FALLBACK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Real paths of every tree a run of this process has lent (process-wide: the trees are the host's). */
const lentTrees = new Set<string>();

/** Remembers trees a run lends to its sandbox (canonical paths), from before it holds them. */
export function rememberLentTrees(trees: readonly string[]): void {
  for (const tree of trees) lentTrees.add(resolvedPath(tree));
}

/**
 * The caller's PATH without relative or empty entries and without folders inside a lent tree (or
 * leading into one through a link); the system folders when nothing is left.
 */
export function hostSearchPath(callerPath: string | undefined = process.env.PATH): string {
  // Judged at every call, never cached: a link on the way may lead elsewhere since the last one.
  const kept = (callerPath ?? "")
    .split(path.delimiter)
    .filter((entry) => path.isAbsolute(entry) && !insideLentTree(entry));
  return kept.length > 0 ? [...new Set(kept)].join(path.delimiter) : FALLBACK_PATH;
}

/**
 * Variables naming folders or files a program loads code from, and how their entries are
 * separated: the dynamic loader's (glibc reads LD_PRELOAD split at blanks and colons; a bare library
 * name is searched in the system's folders and stays), bash's and sh's start-up file for scripts,
 * and the module paths of the interpreters a `!command` or a build step may start.
 */
const LOADED_FROM: ReadonlyMap<string, RegExp> = new Map([
  ["LD_LIBRARY_PATH", /[:;]/],
  ["LD_PRELOAD", /[\s:]+/],
  ["LD_AUDIT", /:/],
  ["GCONV_PATH", /:/],
  ["BASH_ENV", /(?!)/],
  ["ENV", /(?!)/],
  ["PYTHONPATH", /:/],
  ["PYTHONSTARTUP", /(?!)/],
  ["PERL5LIB", /:/],
  ["PERLLIB", /:/],
  ["RUBYLIB", /:/],
  ["NODE_PATH", /:/],
]);

/**
 * The caller's environment for a host program: PATH as hostSearchPath() gives it, each variable
 * of LOADED_FROM without relative entries or entries inside a lent tree (dropped when nothing is
 * left), RUBYOPT (options that load code, not paths) gone once any tree is lent, and every other
 * variable that names a path in a lent tree gone whole: no list of variables is complete
 * (PERL5OPT=-I…, PYTHONUSERBASE, OPENSSL_CONF naming a provider, NODE_OPTIONS=--require…,
 * JAVA_TOOL_OPTIONS, GIT_EXEC_PATH: fix review, round 3, session 42). A relative path in one is
 * read from the program's own folder (hostProgramCwd), never the workspace.
 */
export function hostProgramEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env, PATH: hostSearchPath(env.PATH) };
  if (lentTrees.size > 0) delete out.RUBYOPT;
  for (const [name, separator] of LOADED_FROM) {
    const value = out[name];
    if (value === undefined) continue;
    const kept = value
      .split(separator)
      .filter(
        (entry) => entry !== "" && (bareLibrary(name, entry) || (path.isAbsolute(entry) && !insideLentTree(entry))),
      );
    if (kept.length > 0) out[name] = kept.join(name === "LD_PRELOAD" ? " " : path.delimiter);
    else delete out[name];
  }
  if (lentTrees.size > 0)
    for (const [name, value] of Object.entries(out))
      if (name !== "PATH" && !LOADED_FROM.has(name) && value !== undefined && namesLentPath(value)) delete out[name];
  return out;
}

/**
 * Whether a variable's value names a path in a lent tree: any absolute path in it (`-I/ws/lib`,
 * `--require=/ws/x`), read both cut at blanks and with them (a path with blanks: `/My Projects/app`),
 * and the same once percent-decoded (`file:///My%20Projects/…`: second fix review, round 3, session
 * 42). passesThrough looks each up by its own ancestors, so the cost does not grow with the number
 * of trees a long-lived process has lent.
 */
function namesLentPath(value: string): boolean {
  let decoded = value;
  try {
    decoded = decodeURIComponent(value);
  } catch {
    // not percent-encoded text: judged as it is
  }
  for (const text of new Set([value, decoded])) {
    for (const [candidate] of text.matchAll(/\/[^\s:;,'"=]*/g)) if (insideLentTree(candidate)) return true;
    for (const [candidate] of text.matchAll(/\/[^\n:;,'"=]*/g)) if (insideLentTree(candidate)) return true;
  }
  return false;
}

/**
 * Where a host program that needs no folder of its own runs (a models.json `!command`): the
 * caller's home, or `/` where the home lies in a lent tree. Never the working directory, usually
 * the workspace: `python3 -c 'import keyring…'` imports a `keyring.py` there first, node resolves
 * `node_modules` from there, and a relative program is a file the sandbox may change.
 */
export function hostProgramCwd(home: string = os.homedir()): string {
  return home && path.isAbsolute(home) && !insideLentTree(home) ? home : "/";
}

/** A library LD_PRELOAD names without a slash: the loader looks for it in the system's folders only. */
function bareLibrary(name: string, entry: string): boolean {
  return name === "LD_PRELOAD" && !entry.includes("/");
}

function insideLentTree(entry: string): boolean {
  // Folder by folder: a link in a lent tree that leads out today (`.venv -> /opt/venv`) is the
  // sandbox's to point elsewhere before the next call (review, session 26).
  return passesThrough(entry, lentTrees);
}
