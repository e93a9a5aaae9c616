// Each run's host folder (the gateway's and the proxy's unix sockets, small scratch files) lives in
// one parent folder per user: `<tmpdir>/sandbox-run-<uid>`, created 0700 and checked with lstat
// (a real directory, owned by us, no access for anyone else) before every use. Other local users can
// therefore neither plant a run folder nor swap anything inside one, and the reaper, which may run as
// root, only ever looks inside that parent, removes only the names a run creates (never through a
// symlink) and leaves anything else where it is. The parent itself stays, empty, between runs (like
// a user's runtime folder): removing it could race a concurrent run making its folder there.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { SANDBOX_TRUST_FILE } from "../proxy/sandbox-trust-file.js";
import { ownPidNamespace } from "../util/own-pid-namespace.js";
import { UNCHECKED_PACKS_DIR, WATCH_STATE_CLAIM_PREFIX, WATCH_STATE_FILE } from "../workspace/watch-state-file.js";
import { STAGING_RECORD } from "../workspace-transfer/staging-record.js";

/** Marker file in each run folder: owner pid and host name. */
export const RUN_DIR_MARKER = ".sandbox-run-owner";
/**
 * A root run's lease record (run/lease-record.ts): what it lent and to whom it goes back. Never
 * removed with the folder: a folder holding one is kept until its trees are handed back.
 */
export const LEASE_RECORD = "lease.json";
/**
 * The only names a run folder holds; removal takes these and nothing else. Files: the owner marker,
 * the gateway's and the proxy's sockets, the CA bundle a run with secrets hands the sandbox, copy
 * mode's list of staging folders (removed first, by the reaper, from that list). One
 * folder: the workspace watch's state (snapshots, kept copies of protected files), which is ours
 * throughout, inside a parent only we can write, so it is removed as a whole. Not among them:
 * the folder of git packs the host could not check (UNCHECKED_PACKS_DIR), kept (and the run folder
 * with it) until the user has put them back; `gc` lists it (keptPackFolders).
 */
const RUN_FILES = new Set([RUN_DIR_MARKER, "gateway.sock", "proxy.sock", SANDBOX_TRUST_FILE, STAGING_RECORD]);
/** A run's published trees (run/tree-hold-files.ts), `hold-<runId>` in the parent; reaped with their process. */
export const HOLD_FILE_PREFIX = "hold-";
/** The folder in a run folder where the workspace watch keeps its state. */
export const WORKSPACE_STATE_DIR = "workspace";
/**
 * A run record's staging folders (run/open-run-record.ts): the record as it is written, and the copy of
 * the workspace its patch is made from. They live in a run folder of their own,
 * `run-<runId>-record`, since a record outlives the run's folder (it is moved into place after the
 * run); a dead controller's are reaped like any run folder.
 */
export const RECORD_STAGING_DIR = "record";
export const RECORD_SCRATCH_DIR = "baseline";
/** The hand-back's private files (copy-mode/hand-back-run.ts: a git index, a patch's two sides). */
export const HAND_BACK_DIR = "hand-back";
/** Copy mode's scratch for the git checks of the returned trees (private repositories, new packs' links). */
export const GIT_CHECKS_DIR = "git-checks";
const RUN_STATE_DIRS = new Set([
  WORKSPACE_STATE_DIR,
  RECORD_STAGING_DIR,
  RECORD_SCRATCH_DIR,
  HAND_BACK_DIR,
  // Not named here before session 28: every copy-mode run that checked a git directory left its
  // run folder behind (review, session 28).
  GIT_CHECKS_DIR,
]);

export function runDirsParent(tmpDir = os.tmpdir()): string {
  return path.join(tmpDir, `sandbox-run-${process.geteuid?.() ?? process.getuid?.() ?? 0}`);
}

/** Creates (or checks) the private parent and returns it; a usage error when it is not private. */
export function privateRunDirsParent(tmpDir = os.tmpdir()): string {
  const parent = runDirsParent(tmpDir);
  try {
    fs.mkdirSync(parent, { mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Not made: TMPDIR is missing, read-only or full (not another user's doing, as a folder that is there but not private may be).
    if (code !== "EEXIST")
      throw new SandboxRunError(
        "usage",
        `The folder for run sockets ${parent} cannot be made: ${(error as Error).message}.`,
        {
          hint: `TMPDIR (${tmpDir}) must be an existing folder you can write, with room: point TMPDIR at one, then run again.`,
        },
      );
  }
  const problem = privacyProblem(parent);
  if (problem) throw runDirError(parent, problem);
  return parent;
}

/** Where run `runId`'s folder goes (it is made by createRunDir). */
export function runDirPath(runId: string, tmpDir = os.tmpdir()): string {
  return path.join(runDirsParent(tmpDir), `run-${runId}`);
}

/** Makes run `runId`'s folder inside the private parent, with its owner marker. */
export function createRunDir(runId: string, tmpDir = os.tmpdir()): string {
  const dir = path.join(privateRunDirsParent(tmpDir), `run-${runId}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  try {
    fs.writeFileSync(path.join(dir, RUN_DIR_MARKER), `${process.pid}\n${os.hostname()}\n${ownPidNamespace() ?? ""}\n`, {
      mode: 0o600,
    });
  } catch (error) {
    // A full disk leaves the marker empty, and gc keeps a folder whose owner it cannot read.
    fs.rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return dir;
}

/**
 * Removes a run folder's known files, then the folder; anything unexpected stays (and keeps the folder).
 * `keepUnjudged`: a sandbox ran, so a watch's state still there (its trees were never judged) stays
 * for `gc`, with the marker.
 */
export function removeRunDir(dir: string, options: { keepUnjudged?: boolean } = {}): boolean {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return false;
  }
  const unjudged = options.keepUnjudged === true && holdsUnjudgedState(dir);
  // Trees still lent, or never judged: the marker stays with the record, so a reaper can tell when its owner is gone.
  const leased = names.includes(LEASE_RECORD) || unjudged;
  for (const name of names) {
    const file = path.join(dir, name);
    const stat = lstatOrUndefined(file);
    if (!stat || (leased && name === RUN_DIR_MARKER) || (unjudged && name === WORKSPACE_STATE_DIR)) continue;
    // unlink never follows a symlink; rm of a real directory does not follow the links inside it.
    if (RUN_FILES.has(name) && !stat.isDirectory()) fs.rmSync(file, { force: true });
    else if (RUN_STATE_DIRS.has(name) && stat.isDirectory()) fs.rmSync(file, { recursive: true, force: true });
  }
  try {
    fs.rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

/** Who made a run folder or a hold file: its pid means a process only on its host and in its PID namespace. */
export interface RunOwner {
  pid: number;
  host: string;
  /** The owner's PID namespace ("pid:[...]"); absent in files written before it was recorded. */
  pidns?: string;
}

/**
 * Whether a run's owner is known to be gone: on this host, in this PID namespace (or one not
 * recorded), and its pid alive no more. Two controllers in containers with the same host name and a
 * shared TMPDIR each took the other's live run for dead, and removed its folder and hold (review,
 * session 34: a controller in a container): another namespace's owner is never taken for gone.
 */
export function ownerGone(owner: RunOwner): boolean {
  return ownerHere(owner) && !processAlive(owner.pid);
}

/** Whether the owner's pid means a process here: this host, and this PID namespace (or one not recorded). */
export function ownerHere(owner: RunOwner): boolean {
  if (owner.host !== os.hostname()) return false;
  const here = ownPidNamespace();
  return !(owner.pidns && here && owner.pidns !== here);
}

/** A run's folder of git packs this host could not check, which waits for its user. */
export interface KeptPackFolder {
  dir: string;
  /** The plain files in it (a pack and its .idx are two). */
  files: number;
  bytes: number;
}

/**
 * The folders of unchecked packs that ended runs left (their owner is gone, or its marker went
 * with the run's end): nothing removes them, so `gc` names them, with what they hold. Only plain
 * files are counted, through lstat: the folder is the host's own, but it says nothing it did not see.
 */
export function keptPackFolders(tmpDir = os.tmpdir()): KeptPackFolder[] {
  if (!runDirsParentPrivate(tmpDir)) return [];
  const parent = runDirsParent(tmpDir);
  const kept: KeptPackFolder[] = [];
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith("run-")) continue;
    const runDir = path.join(parent, name);
    const dir = path.join(runDir, UNCHECKED_PACKS_DIR);
    if (!lstatOrUndefined(runDir)?.isDirectory() || !lstatOrUndefined(dir)?.isDirectory()) continue;
    const owner = readRunDirOwner(runDir);
    if (owner && !ownerGone(owner)) continue;
    let files = 0;
    let bytes = 0;
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      names = [];
    }
    for (const file of names) {
      const stat = lstatOrUndefined(path.join(dir, file));
      if (!stat?.isFile()) continue;
      files++;
      bytes += stat.size;
    }
    kept.push({ dir, files, bytes });
  }
  return kept;
}

/** Whether a run folder still holds a watch's state (run/judge-dead-run.ts), or a reaper's claim of it. */
export function holdsUnjudgedState(dir: string): boolean {
  try {
    return fs
      .readdirSync(path.join(dir, WORKSPACE_STATE_DIR))
      .some((name) => name === WATCH_STATE_FILE || name.startsWith(WATCH_STATE_CLAIM_PREFIX));
  } catch {
    return false;
  }
}

export function processAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether the parent exists and passes the same checks as at creation (only then is it looked into). */
export function runDirsParentPrivate(tmpDir = os.tmpdir()): boolean {
  const parent = runDirsParent(tmpDir);
  return lstatOrUndefined(parent) !== undefined && privacyProblem(parent) === undefined;
}

function privacyProblem(dir: string): string | undefined {
  const stat = lstatOrUndefined(dir);
  const uid = process.geteuid?.() ?? process.getuid?.();
  if (!stat) return "it does not exist";
  if (stat.isSymbolicLink()) return "it is a symbolic link";
  if (!stat.isDirectory()) return "it is not a directory";
  if (uid !== undefined && stat.uid !== uid) return `it is owned by uid ${stat.uid}, not by this user (uid ${uid})`;
  if ((stat.mode & 0o077) !== 0) return `its mode is ${(stat.mode & 0o777).toString(8)}, not 700`;
  return undefined;
}

/**
 * A run folder's owner, from its marker (undefined when the folder or the marker is not a plain one,
 * or is gone by the time it is read: another run's folder is removed when that run ends, while a
 * run starting beside it scans every folder; CI, session 33: the scan threw ENOENT and failed the run).
 */
export function readRunDirOwner(dir: string): RunOwner | undefined {
  if (!lstatOrUndefined(dir)?.isDirectory()) return undefined;
  const marker = path.join(dir, RUN_DIR_MARKER);
  if (!lstatOrUndefined(marker)?.isFile()) return undefined;
  let text: string;
  try {
    text = fs.readFileSync(marker, "utf8");
  } catch {
    return undefined;
  }
  const [pid, host, pidns] = text.split("\n");
  return { pid: Number(pid), host: host ?? "", ...(pidns ? { pidns } : {}) };
}

export function readHoldOwner(file: string): RunOwner | undefined {
  try {
    const stat = fs.lstatSync(file);
    if (!stat.isFile() || stat.size > 1024 * 1024) return undefined;
    const { pid, host, pidns } = JSON.parse(fs.readFileSync(file, "utf8")) as {
      pid?: unknown;
      host?: unknown;
      pidns?: unknown;
    };
    return Number.isInteger(pid) && typeof host === "string"
      ? { pid: pid as number, host, ...(typeof pidns === "string" ? { pidns } : {}) }
      : undefined;
  } catch {
    return undefined;
  }
}

export function lstatOrUndefined(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch {
    return undefined;
  }
}

function runDirError(parent: string, problem: string): SandboxRunError {
  return new SandboxRunError("usage", `The folder for run sockets ${parent} cannot be used: ${problem}.`, {
    hint: "Another user may have created it to interfere with sandbox-run: remove it, or point TMPDIR at a folder only you can write.",
  });
}
