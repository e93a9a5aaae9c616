// The host's own git, for the branch hand-back and the workspace's git checks (a leaf, so both may
// use it): run with nothing of anyone's configuration that executes. No system or global config
// (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, HOME and XDG_CONFIG_HOME a private empty
// folder), and on the command line, which outranks the repository's own config: no hooks
// (update-ref runs `reference-transaction`), no fsmonitor, no signing program, no transport (a
// partial clone's lazy fetch would run the remote's commands), no automatic gc. The environment is
// built from nothing, so no GIT_* variable of the caller's redirects the repository or adds config.
// Callers use plumbing only (hash-object --no-filters, read-tree/update-index on a private index,
// write-tree, commit-tree, update-ref; the workspace's git checks: index-pack --verify outside any
// repository, cat-file and diff-tree in a private one): never `add`, `commit` or `checkout`, which
// run filters and hooks. Found on hostSearchPath(): never in a tree a sandbox writes.
import fs from "node:fs";
import path from "node:path";
import { type CappedProcessResult, runCappedProcess } from "./capped-process.js";
import { hostSearchPath } from "./host-programs.js";

const SAFE_CONFIG = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.splitIndex=false",
  "core.attributesFile=/dev/null",
  "core.quotePath=false",
  "commit.gpgSign=false",
  "gpg.program=false",
  "protocol.allow=never",
  "gc.auto=0",
  "maintenance.auto=false",
];

/** Output beyond this fails the command (a listing of a huge repository is far below it). */
const MAX_OUTPUT_BYTES = 512 * 1024 * 1024;
const TIMEOUT_MS = 10 * 60 * 1000;

export interface HostGitOptions {
  /** The working directory: a private folder, or the working tree where git must find it. */
  cwd: string;
  /** A private empty folder: HOME and XDG_CONFIG_HOME, so no user config is found. */
  home: string;
  /** GIT_DIR; without it git finds the repository from `cwd`. */
  gitDir?: string;
  /** GIT_WORK_TREE. */
  workTree?: string;
  /** GIT_INDEX_FILE: a private index, so the repository's own stays untouched. */
  indexFile?: string;
  /** More variables (the commit's identity and dates). */
  env?: Record<string, string>;
  input?: string | Buffer;
  /** More `-c` entries, after the safe ones (e.g. `core.commitGraph=false`). */
  config?: readonly string[];
  /** Open fds the child gets as fd 3, 4, ... (files reached through directory fds, named /dev/fd/N). */
  fds?: readonly number[];
  /** Default 10 minutes; the command is killed past it. */
  timeoutMs?: number;
  /** Default 512 MiB; the command is killed past it (and the call rejects). */
  maxOutputBytes?: number;
  /** The command is killed once it aborts (and the call rejects). */
  signal?: AbortSignal;
}

type HostGitResult = CappedProcessResult;

/** Runs `git <args>` as described above; never throws for a non-zero exit (the caller judges it). */
export function hostGit(args: readonly string[], options: HostGitOptions): Promise<HostGitResult> {
  const env: Record<string, string> = {
    PATH: hostSearchPath(),
    HOME: options.home,
    XDG_CONFIG_HOME: options.home,
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_TERMINAL_PROMPT: "0",
    GIT_OPTIONAL_LOCKS: "0",
    GIT_NO_REPLACE_OBJECTS: "1",
    GIT_NO_LAZY_FETCH: "1",
    ...(options.gitDir ? { GIT_DIR: options.gitDir } : {}),
    ...(options.workTree ? { GIT_WORK_TREE: options.workTree } : {}),
    ...(options.indexFile ? { GIT_INDEX_FILE: options.indexFile } : {}),
    ...options.env,
  };
  const argv = [...[...SAFE_CONFIG, ...(options.config ?? [])].flatMap((entry) => ["-c", entry]), ...args];
  return runCappedProcess(
    "git",
    argv,
    {
      cwd: options.cwd,
      env,
      input: options.input,
      fds: options.fds,
      timeoutMs: options.timeoutMs ?? TIMEOUT_MS,
      maxOutputBytes: options.maxOutputBytes ?? MAX_OUTPUT_BYTES,
      ...(options.signal ? { signal: options.signal } : {}),
    },
    `git ${args[0]}`,
  );
}

/** Whether an executable `git` is on hostSearchPath() (what hostGit would run). */
export function hostGitInstalled(): boolean {
  return hostSearchPath()
    .split(path.delimiter)
    .some((dir) => {
      const file = path.join(dir, "git");
      try {
        fs.accessSync(file, fs.constants.X_OK);
        return fs.statSync(file).isFile();
      } catch {
        return false;
      }
    });
}

/** The command's stdout as text; a non-zero exit throws with git's own message. */
export async function hostGitText(args: readonly string[], options: HostGitOptions): Promise<string> {
  const result = await hostGit(args, options);
  if (result.status !== 0) throw new HostGitError(args, result);
  return result.stdout.toString("utf8");
}

export class HostGitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly result: HostGitResult,
  ) {
    super(`git ${args[0]} failed (exit ${result.status}): ${lastLine(result.stderr)}`);
  }
}

function lastLine(text: string): string {
  const lines = text.trim().split("\n");
  return (lines[lines.length - 1] ?? "").slice(0, 500) || "no message";
}
