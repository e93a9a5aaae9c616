// Which host folder a workspace, writable directory or read-only mount names, and whether the
// sandbox may have it. The repository is hostile and ships symbolic links: with `packages/app ->
// /root`, `--cwd packages/app` (a batch task's cwd, the Action's working-directory) mounted /root,
// and a root caller's lease then lent all of it to the sandbox uid. So a link on the way may not
// lead out of the folder it sits in (`packages/app -> ./app-v2` is followed), and folders the host
// runs from or keeps its secrets in are never lent, whatever path named them.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { usageError } from "../../errors.js";
import { sandboxRunCacheDir } from "../../util/build-cache.js";
import { atOrBelow, atOrBelowOnDisk, treesOverlapOnDisk } from "../../util/path-inside.js";
import { resolvedPath } from "../../util/resolved-path.js";
import { runDirsParent } from "../run-dirs.js";

/** How a folder was named, for messages: "cwd", "writable directory", "read-only mount". */
export interface FolderRole {
  what: string;
  /** How the caller names a folder in this role, e.g. `--cwd /x`. */
  nameIt: (folder: string) => string;
}

/** Why a folder's path cannot be followed, in words: only ENOENT means it does not exist. */
function unreachableFolder(absolute: string, role: FolderRole, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException)?.code;
  // Node names paths as UTF-8 strings: a name that is not UTF-8 comes here with U+FFFD in it.
  if (absolute.includes("\uFFFD"))
    return usageError(
      `The ${role.what} ${absolute} has a name that is not UTF-8, which sandbox-run cannot name.`,
      "Rename the folder (or the one above it) to a UTF-8 name.",
    );
  if (code === "ENAMETOOLONG")
    return usageError(
      `The ${role.what} path is too long (${Buffer.byteLength(absolute)} bytes, or a name over 255).`,
      "Use a shorter path: a symlink to the folder, or move it higher up.",
    );
  if (code === "EACCES")
    return usageError(
      `The ${role.what} ${absolute} cannot be reached: a folder on its path is not searchable by you.`,
      "Run as a user who may enter every folder on the path, or pass another directory.",
    );
  if (code === "ELOOP")
    return usageError(`The ${role.what} ${absolute} goes round in symlinks.`, "Pass the folder's real path.");
  if (code === "ENOTDIR")
    return usageError(`A part of the ${role.what} ${absolute} is a file, not a folder.`, "Pass an existing directory.");
  if (code === "ENOENT")
    return usageError(
      `The ${role.what} ${absolute} does not exist.`,
      "Create it first, or pass an existing directory.",
    );
  return usageError(
    `The ${role.what} ${absolute} cannot be read: ${(error as Error)?.message ?? String(error)}.`,
    "Pass an existing directory you can read.",
  );
}

/**
 * The real path of `absolute`, following only links that stay inside the folder holding them;
 * a usage error naming the first link that leads out, or when the path does not exist.
 */
export function realFolder(absolute: string, role: FolderRole): string {
  let real = "/";
  let named = "";
  for (const name of absolute.split("/").filter((n) => n !== "")) {
    const next = path.join(real, name);
    named = `${named}/${name}`;
    let stat: fs.Stats;
    let target: string | undefined;
    try {
      stat = fs.lstatSync(next);
      if (stat.isSymbolicLink()) target = fs.realpathSync(next);
    } catch (error) {
      throw unreachableFolder(absolute, role, error);
    }
    if (target === undefined) {
      real = next;
      continue;
    }
    if (!atOrBelow(target, real)) {
      const meant = resolvedPath(absolute);
      throw usageError(
        `The ${role.what} ${absolute} goes through the symbolic link ${named}, which points to ${pointsTo(next, target)}, outside the folder ${real} it sits in: a link (a repository ships its own) may not choose which host folder the sandbox gets.`,
        `Name the real folder if that is what you mean: ${role.nameIt(meant)}.`,
      );
    }
    real = target;
  }
  return real;
}

/**
 * The home folders of the caller's account, whatever $HOME says (os.homedir() is $HOME): the
 * passwd entry's, the account that ran sudo's (SUDO_USER), and /root for root. With HOME pointing
 * elsewhere (`sudo -E`, a CI container job's HOME=/github/home, a script's HOME=$(mktemp -d)), the
 * real home was lent, and the sandbox wrote its .ssh (review, session 34).
 */
export function accountHomes(): string[] {
  const homes = new Set<string>();
  try {
    homes.add(os.userInfo().homedir);
  } catch {
    // No passwd entry for this uid (a container's arbitrary uid): $HOME alone.
  }
  if (process.getuid?.() === 0) homes.add("/root");
  const sudoUser = process.env.SUDO_USER;
  if (sudoUser) {
    try {
      const entry = fs
        .readFileSync("/etc/passwd", "utf8")
        .split("\n")
        .find((line) => line.startsWith(`${sudoUser}:`));
      const dir = entry?.split(":")[5];
      if (dir) homes.add(dir);
    } catch {
      // No /etc/passwd to read: the others stand.
    }
  }
  return [...homes].filter((h) => h.startsWith("/") && h !== "/");
}

/**
 * What `gc` judges a lent tree against: no account homes. They decided what may be lent (at the
 * lend); at the hand-back they would make it depend on who runs gc (`sudo` sets SUDO_USER), and a
 * tree lent from cron was kept from its owner when an admin ran `sudo sandbox-run gc` (review of
 * this session's change, fix34b).
 */
export const GC_ACCOUNT_HOMES: readonly string[] = [];

let processAccountHomes: string[] | undefined;

/** accountHomes() of this process, looked up once (getpwuid may ask a directory service). */
function homesOfThisProcess(): string[] {
  processAccountHomes ??= accountHomes();
  return processAccountHomes;
}

/** Whether `real` is or holds one of the account's home folders other than $HOME's. */
function accountHomeProblem(real: string, homeReal: string, accounts: readonly string[]): string | undefined {
  for (const account of accounts) {
    const accountReal = resolvedPath(account);
    if (accountReal === homeReal || !atOrBelow(accountReal, real)) continue;
    return `${real === accountReal ? "is" : "holds"} the home folder ${accountReal} of your account (HOME says ${homeReal})`;
  }
  return undefined;
}

const ENGINE_STATE = "the container engine's state: a sandbox could change every container's files";
/**
 * Folders never lent to the sandbox (a lent tree is chowned to its uid when the caller is root):
 * what the host runs and is configured by, host services' sockets, the container engine's state.
 */
const HOST_TREES: ReadonlyArray<[RegExp, string]> = [
  [/^\/(etc)(\/|$)/, "the host's configuration: a sandbox could change what the host runs and who may log in"],
  [/^\/(usr|bin|sbin|lib(?:32|64|x32)?|boot)(\/|$)/, "the host's programs: a sandbox could change what the host runs"],
  [/^\/(run|var\/run)(\/|$)/, "host services' sockets and state: a sandbox could talk to services only root may use"],
  [/^\/(var\/lib\/(?:docker|containerd|containers|rancher|kubelet)|var\/snap\/docker)(\/|$)/, ENGINE_STATE],
];
/** Parents of HOST_TREES: lending one lends the tree inside it. */
const HOLDS_HOST_TREE = new Set(["/var", "/var/lib", "/var/snap"]);

/**
 * Why `real` (a real path) may not be a tree the sandbox holds (the workspace, a writable
 * directory), or undefined. `home` and `tmpDir` are the caller's (tests pass their own).
 */
export function lentFolderProblem(
  real: string,
  home = os.homedir(),
  tmpDir = os.tmpdir(),
  accounts: readonly string[] = homesOfThisProcess(),
): string | undefined {
  const homeReal = resolvedPath(home);
  const holdsHome = atOrBelowOnDisk(homeReal, real);
  if (real === homeReal || (holdsHome && atOrBelowOnDisk(real, homeReal)))
    return "is your home folder: a sandbox could write your shell's start-up files, ssh keys and git config";
  if (holdsHome)
    return `holds your home folder ${homeReal}: a sandbox could write your shell's start-up files, ssh keys and git config`;
  const account = accountHomeProblem(real, homeReal, accounts);
  if (account) return `${account}: a sandbox could write its shell's start-up files, ssh keys and git config`;
  for (const runDirs of runDirsParentsOf(tmpDir))
    if (treesOverlapOnDisk(runDirs, real))
      return `is or holds sandbox-run's own run folders (${runDirs}): a sandbox could reach other runs' sockets and state`;
  const cache = resolvedPath(sandboxRunCacheDir(process.env, home));
  if (treesOverlapOnDisk(cache, real))
    return `is or holds sandbox-run's cache (${cache}): a sandbox could change what every later runner image is built from`;
  const dotFolder = homeDotFolderOf(real, homeReal);
  if (dotFolder)
    return `${real === dotFolder ? "is a folder" : `lies in ${dotFolder}, a folder`} of your home's tools (their configuration, caches and programs: ~/.config/git/config, ~/.cargo/bin, ~/.ssh): a sandbox could change what your own commands run`;
  // Source trees, not programs: /usr/src/app is a common project folder (a container's WORKDIR).
  if (/^\/usr\/(local\/)?src\/[^/]/.test(real)) return undefined;
  for (const [tree, what] of HOST_TREES) {
    const top = tree.exec(real)?.[1];
    if (top) return `lies in /${top}, ${what}`;
  }
  if (HOLDS_HOST_TREE.has(real)) return `holds ${ENGINE_STATE}`;
  return undefined;
}

/**
 * Why `real` may not be mounted read-only, or undefined. Reading is what a read-only mount gives,
 * and connecting: a unix socket in a read-only mount still accepts connections. So never the home
 * folder or one holding it (keys, tokens), sandbox-run's run folders (other runs' sockets), /root,
 * /etc (host keys), /run (services' sockets: the engine's, an ssh agent's) or the engine's state;
 * the host's programs (/usr, /lib, ...) may be read.
 */
export function readOnlyFolderProblem(
  real: string,
  home = os.homedir(),
  tmpDir = os.tmpdir(),
  accounts: readonly string[] = homesOfThisProcess(),
): string | undefined {
  const homeReal = resolvedPath(home);
  if (atOrBelowOnDisk(homeReal, real))
    return `${real === homeReal ? "is" : "holds"} your home folder: a sandbox could read your ssh keys, tokens and shell history`;
  const account = accountHomeProblem(real, homeReal, accounts);
  if (account) return `${account}: a sandbox could read its ssh keys, tokens and shell history`;
  for (const runDirs of runDirsParentsOf(tmpDir))
    if (treesOverlapOnDisk(runDirs, real))
      return `is or holds sandbox-run's own run folders (${runDirs}): a sandbox could reach other runs' sockets`;
  if (atOrBelow(real, "/root")) return "lies in /root, the root user's home: a sandbox could read its keys and tokens";
  if (/^\/etc(\/|$)/.test(real))
    return "lies in /etc, the host's configuration: a sandbox could read host keys and secrets";
  if (/^\/(run|var\/run)(\/|$)/.test(real))
    return "lies in /run, host services' sockets: a sandbox can connect to a socket through a read-only mount";
  const engine = HOST_TREES.find(([tree, what]) => what === ENGINE_STATE && tree.test(real));
  if (engine || HOLDS_HOST_TREE.has(real)) return `is or holds ${ENGINE_STATE.replace("change", "read")}`;
  return undefined;
}

/**
 * The dot-folder of the caller's home (`~/.config`, `~/.cargo`, `~/.ssh`) that `real` is or lies
 * in, or undefined. Tools read their configuration there and run programs from it by the user's
 * PATH (`~/.cargo/bin`, `~/.local/bin`), and the rules that judge a returned tree match names from
 * its top: `git/config` at the top of a lent `~/.config` is the user's global git configuration,
 * and a run wrote its `core.fsmonitor` unjudged (review, round 3, session 42).
 */
function homeDotFolderOf(real: string, homeReal: string): string | undefined {
  if (!atOrBelowOnDisk(real, homeReal) || real === homeReal) return undefined;
  const first = real.startsWith(`${homeReal}/`) ? real.slice(homeReal.length + 1).split("/")[0] : undefined;
  return first?.startsWith(".") ? path.join(homeReal, first) : undefined;
}

/**
 * A folder where another user may replace `real` (or a folder on the way) with a link between the
 * host's checks and the container's start, or undefined: one above it every user may write
 * without the sticky bit; and, for a caller other than root (whose bind-mode sandbox writes as the
 * caller), the tree itself or a folder above it owned by another user than root and the caller
 * (the owner may rename what is in it, sticky or not). The engine resolves a mount's source itself,
 * when it creates the container: such a user swapped `shared/ws` for a link to the caller's home,
 * and the sandbox wrote the caller's `.bashrc` (review, round 3, session 42). Left out
 * (docs/security.md, not promised): a group-writable folder (a user-private group's `umask 002`
 * folders, /var/mail, a team's shared folder), a root caller's tree in another user's folders (a CI
 * container job's workspace belongs to the runner's uid), and file systems whose modes are made up
 * (WSL's /mnt/c shows 777 everywhere, and chmod does nothing there).
 */
export function othersMayReplace(
  real: string,
  uid = process.geteuid?.() ?? 0,
): { dir: string; why: string; owner?: true } | undefined {
  for (let dir = real; ; dir = path.dirname(dir)) {
    const stat = fs.statSync(dir);
    if (uid !== 0 && stat.uid !== 0 && stat.uid !== uid) return { dir, why: `belongs to uid ${stat.uid}`, owner: true };
    const sticky = (stat.mode & 0o1000) !== 0;
    if (dir !== real && !sticky && (stat.mode & 0o002) !== 0 && modesKept(dir))
      return { dir, why: `may be written by every user (mode ${(stat.mode & 0o7777).toString(8)})` };
    if (dir === "/") return undefined;
  }
}

/** statfs types whose modes are made up, not kept (FAT, exFAT, NTFS, FUSE, SMB, 9p as WSL's drvfs). */
const MADE_UP_MODES = new Set([
  0x4d44, 0x2011bab0, 0x5346544e, 0x7366746e, 0x65735546, 0xff534d42, 0xfe534d42, 0x01021997,
]);

function modesKept(dir: string): boolean {
  try {
    return !MADE_UP_MODES.has(fs.statfsSync(dir).type);
  } catch {
    return true;
  }
}

/**
 * This user's run folders under the temp folder a run uses now and under the usual ones, whatever
 * TMPDIR says: a tree that holds another temp folder's run folders (a run with TMPDIR elsewhere
 * lent /tmp) would let its sandbox make one there, with a lease or a watch's state, that a later
 * reaper with that TMPDIR takes for its own (review, session 23).
 */
function runDirsParentsOf(tmpDir: string): string[] {
  return [...new Set([tmpDir, "/tmp", "/var/tmp", "/dev/shm"].map((dir) => resolvedPath(runDirsParent(dir))))];
}

/** A link's text, and where it leads when that reads differently. */
function pointsTo(link: string, target: string): string {
  const text = fs.readlinkSync(link);
  return text === target ? target : `${text} (${target})`;
}
