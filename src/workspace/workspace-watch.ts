// One run's view of the host trees it may write. Before the container starts: a snapshot of
// the workspace and each extra writable root (streamed to the run's private folder), the paths
// the repositories' git config makes executable or configuration (git-config-paths.ts), and a
// kept copy of what a violation could poison (protected-copy.ts). After it stopped: a merge of each
// tree with its snapshot gives the changed files and, through the pure rules
// (workspace-rules.ts), the violations; violations are undone (restore-tree.ts) and the tree is
// checked again. Workspace paths are reported relative to the workspace; paths in extra
// writable roots are absolute. A read-only workspace is not walked: the mount already
// guarantees it cannot change.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { SandboxRunError } from "../errors.js";
import { hostGitInstalled } from "../util/host-git.js";
import { realPathOr } from "../util/resolved-path.js";
import { ConfigFolders, configuredTargets, tooManyConfigFolders } from "./config-folders.js";
import { openRoot, type WalkEntry } from "./fd-walk.js";
import { bindGitAccess } from "./git-access-bind.js";
import { type GitCheckResult, GitChecks } from "./git-checks.js";
import {
  type CommandFolder,
  commandFoldersInTree,
  guardsCommand,
  isBorrowedStoreDetail,
  repositoriesOf,
  targetsInTree,
} from "./git-config-paths.js";
import { ObjectChecker, PackTimeBudget } from "./git-object-check.js";
import { OBJECT_RULE, REF_RULE } from "./git-rule-names.js";
import { withOwnerWrite } from "./owner-write.js";
import { type KeptHash, type Owner, ProtectedCopy } from "./protected-copy.js";
import { openDirBelow, removeAt } from "./remove-tree.js";
import { applyRestore, type RestoreReport } from "./restore-tree.js";
import { restoreRootAccess } from "./root-access.js";
import {
  plantedSpecial,
  removeSpecialEntries,
  SPECIAL_LEFT_RULE,
  type SpecialEntry,
  walkedFolder,
} from "./special-entries.js";
import { trimFolder } from "./trim-folder.js";
import { type SavedWatch, writeWatchState } from "./watch-state.js";
import { UNCHECKED_PACKS_DIR, WATCH_FOUND_FILE, WATCH_STATE_FAILED, WATCH_STATE_FILE } from "./watch-state-file.js";
import {
  changeOf,
  type EntryFacts,
  type EntryPair,
  type HostRunChange,
  RestorePlan,
  RuleEvaluator,
  type Violation,
} from "./workspace-rules.js";
import {
  ChangeCollector,
  type ChangedFiles,
  diffAgainstSnapshot,
  keptHashWanted,
  readFileAt,
  recordedChildren,
  recordedRootMode,
  takeSnapshot,
} from "./workspace-snapshot.js";

export interface WorkspaceWatchInput {
  workspace: string;
  workspaceWritable: boolean;
  writableRoots: readonly string[];
  /** The caller's globs (workspace only). */
  protectedPaths: readonly string[];
  /** Built-in protections the policy turns off, by name. */
  disabledProtections?: readonly string[];
  /** A folder to create (0700) in the run's private folder: snapshots and the kept copy go there; removed with the run folder. */
  stateDir: string;
  /** An entry's owner before the run, when the ownership lease lent it to the sandbox uid. */
  ownerOf?: (stat: fs.Stats) => Owner;
  /**
   * Entries the trees may gain (limits.maxEntries; default DEFAULT_MAX_ENTRIES). With the most
   * names the walk before the run held at once, it bounds the names the walk after it holds: a
   * folder past that is `overfull`, and what the run added there is removed.
   */
  maxEntries?: number;
  /**
   * The run's stop (the caller's signal): past it the judgement verifies no more packs and refuses
   * the rest unchecked (git-object-check.ts), so a stopped run is judged and restored in moments.
   */
  signal?: AbortSignal;
}

export { UNCHECKED_PACKS_DIR };

/** Where a watch with this state folder sets aside the packs this host could not check. */
export function uncheckedPacksDir(stateDir: string): string {
  return path.join(path.dirname(stateDir), UNCHECKED_PACKS_DIR);
}

/** The policies' default limits.maxEntries. */
const DEFAULT_MAX_ENTRIES = 200_000;
/** Names the after-walk may hold beyond the walk before the run and the entry limit. */
const HELD_SLACK = 1_000;
/**
 * Never more than this (about 560 MB of the longest names) because of a large limits.maxEntries:
 * past it a folder is overfull whatever the limit (the caller's own tree is always walkable).
 */
const MAX_AFTER_WALK_HELD = 2_000_000;

/** A folder that held more names than the after-walk may hold: what the run added there was removed. */
interface OverfullFolder {
  /** As reported (relative to the workspace; absolute in extra roots; "." for the workspace itself). */
  path: string;
  /** Names read before the walk stopped: the folder held at least this many. */
  entries: number;
  /** Entries removed from it (a directory with all below it counts once). */
  removed: number;
  /** Why it could not be put back within bounds (its entries were not walked). */
  failed?: string;
}

export interface WorkspaceReport {
  changedFiles: ChangedFiles;
  /** Violations found (at most MAX_LISTED_VIOLATIONS): non-empty fails the run. */
  violations: Violation[];
  violationCount: number;
  /** What was done about the violations; absent when there were none. */
  restore?: RestoreReport & {
    /** True when a final walk found no violation left. */
    clean: boolean;
    /** Violations the final walk still found (at most MAX_LISTED_VIOLATIONS). */
    remaining: Violation[];
  };
  /** Files the run created or changed whose setuid/setgid bits were cleared (at most 100). */
  clearedSetuid: string[];
  /** Files whose group/world-write bits the run added, cleared (at most 100). */
  clearedWriteBits: string[];
  /**
   * FIFOs, sockets and devices the run left (created, or made of another entry), removed: a host
   * tool that opens a file by name (a prompt reading `.nvmrc`, an editor, `npm`) blocks forever on
   * a FIFO. Copy mode leaves them out of the apply the same way. At most 100 listed; `count` all.
   */
  specialRemoved: { files: Array<{ path: string; kind: string }>; count: number };
  /** Changes to files host tools read when a person runs them (not violations; at most 100 listed). */
  hostRunFiles: HostRunChange[];
  hostRunCount: number;
  /** Paths the repositories' git config names, protected for the run (at most 100 listed). */
  configPaths: Array<{ path: string; why: string }>;
  /** Allocated bytes (st_blocks * 512) of the watched trees before and after the run. */
  allocatedBytes: { before: number; after: number };
  /** Entries (files, folders, links, ...) of the watched trees before and after the run (after: at least, with overfull folders). */
  entries: { before: number; after: number };
  /**
   * Folders that held more names than the after-walk may hold (the run added more than
   * limits.maxEntries entries along one path, hard links included): what the run added there was
   * removed, and the trees were walked again. Non-empty fails the run with limit "entries".
   */
  overfull: OverfullFolder[];
  /** Time the walks took, for the event log. */
  snapshotMs: number;
  /**
   * Caches derived from git objects that the run wrote (commit-graph, multi-pack-index, *.rev,
   * *.bitmap), removed: git trusts them without checking and rebuilds them (at most 100 listed).
   */
  gitCachesRemoved: string[];
  /** What checking the run's git objects and refs cost (absent when there was nothing to check). */
  gitChecks?: GitCheckResult["stats"];
}

const MAX_LISTED_VIOLATIONS = 200;
const MAX_LISTED_OVERFULL = 100;
/** Rounds of trimming overfull folders and walking again (a kept folder inside one may be full too). */
const TRIM_ROUNDS = 4;
const RESTORE_ROUNDS = 3;

interface Watched {
  root: string;
  /** The root's dev:ino when the watch began: the tree the sandbox held, whatever is at the path later. */
  rootIdentity: string;
  /** Prefix for reported paths: "" for the workspace, the root + "/" for extra roots. */
  prefix: string;
  snapshot: string;
  copy: ProtectedCopy;
  protectedPaths: readonly string[];
  allocatedBytes: number;
  entries: number;
  /** The most names the walk before the run held at once. */
  peakHeldNames: number;
  /** Paths the repositories' git config names (relative), with why. */
  configPaths: Map<string, string>;
  /** Folders (relative) where the host's command names are guarded, and those names (one set for all trees). */
  commandFolders: Map<string, CommandFolder>;
  hostCommands: ReadonlySet<string>;
  /** Folders below the top holding an environment, hook, agent or editor config (relative; config-folders.ts). */
  configFolders: readonly string[];
  /** Links at protected names (relative; config-folders.ts): what they point at is protected too. */
  protectedLinks?: readonly string[];
  /** Git directories only a pointer names (relative). */
  gitDirs: string[];
  /** Object stores by "dev:ino" -> their path before the run. */
  objectStores: Map<string, string>;
  /** Checks of the run's git objects (remembers results across the walks of one run). */
  objectChecker: ObjectChecker;
  /** A private folder for the git checks' scratch files. */
  scratch: string;
  /**
   * Kept files the snapshot may not have hashed (a host command's name in node_modules/.bin, what a
   * config names under node_modules), with their kept copy's hash: read from the kept copy's index
   * at the first judgement, for every walk of it (keptHashOf).
   */
  keptHashes?: Map<string, KeptHash>;
}

export class WorkspaceWatch {
  private constructor(
    private readonly input: WorkspaceWatchInput,
    private readonly watched: Watched[],
    private readonly firstPassMs: number,
  ) {}

  static async start(input: WorkspaceWatchInput): Promise<WorkspaceWatch> {
    const started = performance.now();
    fs.mkdirSync(input.stateDir, { mode: 0o700 });
    const targets = [
      ...(input.workspaceWritable ? [{ root: input.workspace, prefix: "", protectedPaths: input.protectedPaths }] : []),
      ...input.writableRoots.map((root) => ({ root, prefix: `${root}/`, protectedPaths: [] as string[] })),
    ];
    const watched: Watched[] = [];
    const open: ProtectedCopy[] = [];
    // One budget for verifying packs, whichever of the run's trees they are in.
    const packTime = new PackTimeBudget();
    try {
      for (const [i, target] of targets.entries()) {
        const copy = new ProtectedCopy({
          dir: path.join(input.stateDir, `kept-${i}`),
          disabled: input.disabledProtections,
          protectedPaths: target.protectedPaths,
          ownerOf: input.ownerOf,
        });
        open.push(copy);
        const snapshot = path.join(input.stateDir, `snapshot-${i}.bin`);
        const rootIdentity = identityOf(target.root);
        let summary: Awaited<ReturnType<typeof takeSnapshot>>;
        const configFolders = new ConfigFolders();
        // Nothing reads the configs with git-config-paths off: their number refuses nothing then.
        const readsConfigs = !input.disabledProtections?.includes("git-config-paths");
        try {
          summary = await takeSnapshot(target.root, snapshot, {
            onEntry: (entry) => {
              if (readsConfigs) {
                configFolders.consider(entry.path, entry.kind);
                // Refused at once, not after the whole walk (review, session 27: 8 s to say it).
                if (configFolders.overflow) throw tooManyConfigFolders(target.root, configFolders);
              }
              return copy.consider(entry);
            },
          });
        } catch (error) {
          if (configFolders.overflow) throw tooManyConfigFolders(target.root, configFolders);
          throw cannotPrepare(target.root, "take the snapshot", error);
        }
        if (summary.problemCount > 0) throw uncheckableTree(target.root, summary.problems, summary.problemCount);
        watched.push({
          ...target,
          rootIdentity,
          snapshot,
          copy,
          allocatedBytes: summary.allocatedBytes,
          entries: summary.entries,
          peakHeldNames: summary.peakHeldNames,
          configPaths: new Map(),
          commandFolders: new Map(),
          hostCommands: new Set(),
          configFolders: configFolders.folders,
          protectedLinks: configFolders.links,
          gitDirs: [],
          objectStores: new Map(copy.objectStores.map((o) => [`${o.dev}:${o.ino}`, o.path])),
          objectChecker: new ObjectChecker(packTime, input.signal),
          scratch: path.join(input.stateDir, `git-${i}`),
        });
      }
      // Only now are all git directories known: what their config names is kept in a second pass.
      // A read-only workspace is not watched, but its configs may name what the watched trees hold.
      protectConfigPaths(watched, input.disabledProtections, input.workspaceWritable ? [] : [input.workspace]);
      // The run's packs and refs are judged by the host's git: without one, an honest `git gc` could
      // only be set aside for the user to put back (review, session 34). Refused before anything runs.
      const judgedByGit = [OBJECT_RULE, REF_RULE].some((rule) => !input.disabledProtections?.includes(rule));
      const repositories = watched.filter((w) => w.copy.gitDirs.length > 0 || w.gitDirs.length > 0);
      if (judgedByGit && repositories.length > 0 && !hostGitInstalled()) throw noHostGit(repositories[0]!.root);
    } finally {
      for (const copy of open) copy.close();
    }
    return new WorkspaceWatch(input, watched, performance.now() - started);
  }

  /**
   * Saves what finish() needs beside the snapshots and the kept copy (watch-state.ts), with the
   * caller's `about`: until forget(), a controller that dies leaves the run to be judged by a reaper.
   */
  save(about: Record<string, string>): void {
    const { input } = this;
    writeWatchState(input.stateDir, {
      version: 1,
      workspace: input.workspace,
      workspaceWritable: input.workspaceWritable,
      writableRoots: [...input.writableRoots],
      protectedPaths: [...input.protectedPaths],
      disabledProtections: [...(input.disabledProtections ?? [])],
      ...(input.maxEntries !== undefined ? { maxEntries: input.maxEntries } : {}),
      firstPassMs: this.firstPassMs,
      trees: this.watched.map((w) => ({
        root: w.root,
        rootIdentity: w.rootIdentity,
        prefix: w.prefix,
        protectedPaths: [...w.protectedPaths],
        allocatedBytes: w.allocatedBytes,
        entries: w.entries,
        peakHeldNames: w.peakHeldNames,
        configPaths: [...w.configPaths],
        commandFolders: [...w.commandFolders].map(([p, f]) => [p, f.why, f.except ?? ""] as [string, string, string]),
        hostCommands: w.commandFolders.size > 0 ? [...w.hostCommands] : [],
        gitDirs: [...w.gitDirs],
        keptGitDirs: [...w.copy.gitDirs],
        objectStores: [...w.objectStores],
      })),
      about,
    });
  }

  /** The run is judged (or its judgement failed and was reported): nothing is left for a reaper. */
  forget(): void {
    fs.rmSync(path.join(this.input.stateDir, WATCH_STATE_FILE), { force: true });
  }

  /**
   * The watch a controller that died left in `stateDir`, from its saved state: finish() judges the
   * trees as that controller would have (the owners the kept copy recorded are the ones it restores).
   * A tree gone since, or removed and made again at its path (a new checkout), is left out (`gone`):
   * judged against the old tree's snapshot, its own state would be "put back" to the old tree's.
   */
  static resume(stateDir: string, saved: SavedWatch): { watch: WorkspaceWatch; gone: string[] } {
    const gone: string[] = [];
    const watched: Watched[] = [];
    const packTime = new PackTimeBudget();
    for (const [i, tree] of saved.trees.entries()) {
      let now: string | undefined;
      try {
        now = identityOf(tree.root);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
      if (now !== tree.rootIdentity) {
        gone.push(now === undefined ? `${tree.root} is gone` : `${tree.root} was removed and made again since`);
        continue;
      }
      watched.push({
        root: tree.root,
        rootIdentity: tree.rootIdentity,
        prefix: tree.prefix,
        // The state folder's own files, by the names start() gave them (never paths read from the file).
        snapshot: path.join(stateDir, `snapshot-${i}.bin`),
        copy: ProtectedCopy.reopen(path.join(stateDir, `kept-${i}`), tree.keptGitDirs),
        protectedPaths: tree.protectedPaths,
        allocatedBytes: tree.allocatedBytes,
        entries: tree.entries,
        peakHeldNames: tree.peakHeldNames,
        configPaths: new Map(tree.configPaths),
        commandFolders: new Map(
          (tree.commandFolders ?? []).map(([p, why, except]) => [p, except ? { why, except } : { why }]),
        ),
        hostCommands: new Set(tree.hostCommands ?? []),
        // Only start() reads them; the saved configPaths hold what they named.
        configFolders: [],
        gitDirs: tree.gitDirs,
        objectStores: new Map(tree.objectStores),
        objectChecker: new ObjectChecker(packTime),
        scratch: path.join(stateDir, `git-${i}`),
      });
    }
    const input: WorkspaceWatchInput = {
      workspace: saved.workspace,
      workspaceWritable: saved.workspaceWritable,
      writableRoots: saved.writableRoots,
      protectedPaths: saved.protectedPaths,
      disabledProtections: saved.disabledProtections,
      stateDir,
      ...(saved.maxEntries !== undefined ? { maxEntries: saved.maxEntries } : {}),
    };
    return { watch: new WorkspaceWatch(input, watched, saved.firstPassMs), gone };
  }

  /** Paths the repositories' git config names, protected for this run (reported paths; at most 100). */
  get configPaths(): Array<{ path: string; why: string }> {
    const out: Array<{ path: string; why: string }> = [];
    for (const w of this.watched) {
      for (const [p, why] of w.configPaths) if (out.length < 100) out.push({ path: w.prefix + p, why });
      for (const [p, { why }] of w.commandFolders)
        if (out.length < 100) out.push({ path: `${w.prefix}${p}/<a host command's name>`, why });
    }
    return out;
  }

  /** Allocated bytes of the watched trees before the run (a baseline for the disk limit). */
  get allocatedBytesBefore(): number {
    return this.watched.reduce((sum, w) => sum + w.allocatedBytes, 0);
  }

  /** Entries of the watched trees before the run (a baseline for the entry limit). */
  get entriesBefore(): number {
    return this.watched.reduce((sum, w) => sum + w.entries, 0);
  }

  /**
   * Call once the container has stopped: diff, judge, undo violations, check again. If the trees
   * cannot be checked, that fails the run too (a SandboxRunError "policy-violation").
   */
  async finish(): Promise<WorkspaceReport> {
    // A tree moved away, or removed and another made at its path (a fresh clone), while the run went
    // on is not the tree the sandbox held: judged against the old snapshot, the new folder's own
    // state would be "put back" to the old tree's (its .git and CI files written over), and a moved
    // tree is not at the path to judge (review, session 29). Such trees are left out; the rest are
    // judged, and the run fails saying which, and where nothing was checked.
    const away = this.watched.filter((w) => currentIdentity(w.root) !== w.rootIdentity);
    for (const w of away) this.watched.splice(this.watched.indexOf(w), 1);
    if (away.length === 0) return this.judge();
    const judged = this.watched.length > 0 ? await this.judge() : undefined;
    this.judged = true;
    throw treesAway(away, judged);
  }

  private async judge(): Promise<WorkspaceReport> {
    try {
      const report = await this.check();
      this.judged = true;
      return report;
    } catch (error) {
      if (error instanceof SandboxRunError) throw error;
      // Every tree removed while the run went on (a service cleaning up a cancelled task's checkout):
      // there is nothing to judge, put back or hand back, and nothing for `gc` either. The sandbox
      // cannot do this (each tree is a mount point there, or not in the sandbox at all). Before, the
      // state stayed marked, and every later run over the path was refused until `gc` (review,
      // session 28).
      const gone = this.watched.filter((w) => !fs.existsSync(w.root)).map((w) => w.root);
      if (gone.length > 0 && gone.length === this.watched.length) {
        this.judged = true;
        throw new SandboxRunError(
          "usage",
          `The workspace was removed while the run was in progress (${gone.join(", ")} is gone): there is nothing to check or hand back. The result was withheld.`,
          {
            hint: "Remove a workspace only once its run has ended; abort the run first (its signal) to stop it early.",
          },
        );
      }
      // Nothing was judged: everything the kept copy holds goes back as it was before the run (the
      // git directories, the protected scopes), and the saved state stays for `gc`, marked.
      const putBack = this.putBackKeptScopes();
      this.markFailed();
      const outside =
        "Until you have looked at the workspace from outside (a file manager, or ls with full paths), do not run git, direnv or an editor in it";
      // Its saved state removed from under it (a TMPDIR cleaner): nothing can judge it again, gc neither.
      if (!fs.existsSync(this.input.stateDir))
        throw new SandboxRunError(
          "policy-violation",
          `The workspace could not be checked after the run: the run's saved state in ${this.input.stateDir} was removed while the run went on (${errorText(error)}). The result was withheld.${putBack}`,
          {
            hint: `${outside}. Nothing can check it again (\`sandbox-run gc\` neither): keep TMPDIR's sandbox-run folder while runs go on.`,
            cause: error,
          },
        );
      throw new SandboxRunError(
        "policy-violation",
        `The workspace could not be checked after the run: ${errorText(error)}. The result was withheld.${putBack}`,
        {
          hint: `${outside}; \`sandbox-run gc\` judges it again.`,
          cause: error,
        },
      );
    }
  }

  /**
   * Before a restore: what was found so far, for a judgement that has to start again after this
   * controller died mid-restore (judge-dead-run.ts). Only while a state is saved (a run's own
   * watch); written whole under a new name, then renamed, in the state folder only we write.
   */
  private writeFound(report: WorkspaceReport): void {
    if (!fs.existsSync(path.join(this.input.stateDir, WATCH_STATE_FILE))) return;
    const file = path.join(this.input.stateDir, WATCH_FOUND_FILE);
    const next = `${file}.${process.pid}.next`;
    try {
      fs.rmSync(next, { force: true });
      fs.writeFileSync(
        next,
        JSON.stringify({
          violations: report.violations.map((v) => `${v.path}: ${v.change} (${v.rule})`),
          violationCount: report.violationCount,
          hostRunFiles: report.hostRunFiles.map((h) => `${h.path}: ${h.change} (${h.why})`),
        }),
        { flag: "wx", mode: 0o600 },
      );
      fs.renameSync(next, file);
    } catch {
      // Best effort: what it says is for gc's report; the judgement itself does not depend on it.
      fs.rmSync(next, { force: true });
    }
  }

  /** Whether finish() judged the trees (a judgement that threw leaves the saved state for `gc`). */
  judged = false;

  /** Marks the saved state as one whose judgement threw (a state that was never saved is left alone). */
  private markFailed(): void {
    if (!fs.existsSync(path.join(this.input.stateDir, WATCH_STATE_FILE))) return;
    try {
      fs.writeFileSync(path.join(this.input.stateDir, WATCH_STATE_FAILED), "", { flag: "wx", mode: 0o600 });
    } catch {
      // Already marked, or the folder is gone: nothing more to say.
    }
  }

  /**
   * Everything the kept copy holds put back as a whole, tree by tree (every git directory, every
   * built-in protected scope, the caller's protected files), with no judgement behind it: what a
   * run created where nothing was kept (a new .envrc) is not known here. What was and was not, as
   * a sentence.
   */
  private putBackKeptScopes(): string {
    const reverted: string[] = [];
    const failed: string[] = [];
    for (const w of this.watched) {
      let steps: Array<{ action: "revert"; path: string }>;
      try {
        steps = w.copy.keptScopes().map((scope) => ({ action: "revert" as const, path: scope }));
      } catch (error) {
        failed.push(`${w.prefix || "."} (its kept copy: ${errorText(error)})`);
        continue;
      }
      if (steps.length === 0) continue;
      try {
        const applied = applyRestore(w.root, steps, w.copy);
        for (const p of applied.reverted) reverted.push(w.prefix + (p || "."));
        for (const n of applied.notRestored) failed.push(`${w.prefix}${n.path} (${n.why})`);
      } catch (error) {
        failed.push(`${w.prefix || "."} (${errorText(error)})`);
      }
    }
    return [
      reverted.length > 0 ? ` Put back as before the run: ${listed(reverted)}.` : "",
      failed.length > 0 ? ` NOT put back: ${listed(failed)}.` : "",
    ].join("");
  }

  private async check(): Promise<WorkspaceReport> {
    const started = performance.now();
    const changes = new ChangeCollector();
    const report: WorkspaceReport = {
      changedFiles: { created: [], modified: [], deleted: [] },
      violations: [],
      violationCount: 0,
      clearedSetuid: [],
      clearedWriteBits: [],
      specialRemoved: { files: [], count: 0 },
      hostRunFiles: [],
      hostRunCount: 0,
      configPaths: this.configPaths,
      allocatedBytes: { before: this.allocatedBytesBefore, after: 0 },
      entries: { before: this.entriesBefore, after: 0 },
      overfull: [],
      snapshotMs: 0,
      gitCachesRemoved: [],
    };
    const seen = new Set<string>();
    const note = (v: Violation, prefix: string) => {
      // By the path as reported: an extra root's bin/git is not the workspace's (it was once left unlisted).
      const key = `${v.rule}\0${prefix}${v.path}`;
      if (seen.has(key)) return;
      seen.add(key);
      report.violationCount++;
      pushCapped(report.violations, prefixed(v, prefix));
    };
    const maxEntries = this.input.maxEntries ?? DEFAULT_MAX_ENTRIES;
    for (const w of this.watched) {
      const disabled = this.input.disabledProtections;
      const maxHeldNames = Math.min(
        w.peakHeldNames + maxEntries + HELD_SLACK,
        Math.max(MAX_AFTER_WALK_HELD, w.peakHeldNames + HELD_SLACK),
      );
      // Bits the first walk cleared are not there for a second walk to see: one list for both.
      const cleared = { setuid: [] as string[], writeBits: [] as string[] };
      const firstWalk = () => judge(w, { disabled, maxHeldNames, changes: new ChangeCollector(), cleared });
      // A root the run made unreadable: set back first, or nothing below it could be judged.
      const recordedMode = recordedRootMode(w.snapshot);
      const rootLeft = restoreRootAccess(w.root, w.rootIdentity, recordedMode);
      if (rootLeft !== undefined) {
        note(
          {
            path: "",
            change: "unreadable",
            rule: "walk",
            detail: `the run left it mode ${octal(rootLeft)}, which the host cannot list or search; set back to ${octal(recordedMode)}`,
            restore: { action: "mode", path: "", mode: recordedMode },
          },
          w.prefix,
        );
        (report.restore ??= emptyRestore()).modes.push(reportedFolder(w, ""));
      }
      let first = await firstWalk();
      // Folders too full to walk: what the run added there goes, then the tree is judged again from
      // the start (what they hold now, kept entries included, is judged like the rest). A kept
      // folder the run filled too is found by the next walk, a few levels deep.
      let entriesSeen = first.entries;
      for (let round = 0; first.overfull.length > 0 && round < TRIM_ROUNDS; round++) {
        for (const folder of first.overfull) {
          const keep = folder.existed ? recordedChildren(w.snapshot, folder.path) : undefined;
          const trimmed = await trimFolder(w.root, folder.path, keep);
          if (report.overfull.length < MAX_LISTED_OVERFULL)
            report.overfull.push({
              path: reportedFolder(w, folder.path),
              entries: folder.entries,
              removed: trimmed.removed,
              ...(trimmed.failed ? { failed: trimmed.failed } : {}),
            });
        }
        first = await firstWalk();
        entriesSeen = Math.max(entriesSeen, first.entries);
      }
      // The entries the run made, at least (the limit check fails the run on them).
      first.entries = entriesSeen;
      // A folder still too full: its entries are not judged.
      for (const folder of first.overfull)
        if (report.overfull.length < MAX_LISTED_OVERFULL)
          report.overfull.push({
            path: reportedFolder(w, folder.path),
            entries: folder.entries,
            removed: 0,
            failed: "still holds more entries than the walk can read",
          });
      changes.absorb(first.changes!);
      for (const p of cleared.setuid) if (report.clearedSetuid.length < 100) report.clearedSetuid.push(p);
      for (const p of cleared.writeBits) if (report.clearedWriteBits.length < 100) report.clearedWriteBits.push(p);
      // Before the restore: its walk judges the tree without them (a FIFO at a git name is also a violation).
      const specials = removeSpecialEntries(w.root, first.special);
      for (const removed of specials.removed) {
        changes.removed(w.prefix + removed.path);
        report.specialRemoved.count++;
        if (report.specialRemoved.files.length < 100)
          report.specialRemoved.files.push({ path: w.prefix + removed.path, kind: removed.kind });
      }
      // One the host could not remove fails the run, and is named as not restored (review, session
      // 38: a FIFO left in a folder made read-only was swallowed, and the run succeeded).
      for (const left of specials.left) {
        note(
          {
            path: left.path,
            change: left.change,
            rule: SPECIAL_LEFT_RULE,
            detail: `a ${left.kind} the host could not remove`,
            restore: { action: "remove", path: left.path },
          },
          w.prefix,
        );
        const restore = (report.restore ??= emptyRestore());
        restore.notRestored.push({ path: w.prefix + left.path, why: `${left.why}; the ${left.kind} is still there` });
        restore.clean = false;
      }
      report.allocatedBytes.after += first.allocatedBytes;
      for (const c of first.gitCachesRemoved)
        if (report.gitCachesRemoved.length < 100) report.gitCachesRemoved.push(w.prefix + c);
      if (first.gitStats) report.gitChecks = sumStats(report.gitChecks, first.gitStats);
      report.entries.after += first.entries;
      // Each tree lists up to MAX_LISTED_HOST_RUN of each of its three kinds (HostRunList): all are
      // kept, so a full list of the workspace's hides no writable directory's link. After a restore,
      // the last walk's list replaces this one (below).
      const hostRunAt = report.hostRunFiles.length;
      const setHostRun = (judged: Judged, replacing: number) => {
        report.hostRunCount += judged.hostRunCount;
        report.hostRunFiles.splice(
          hostRunAt,
          replacing,
          ...judged.hostRun.map((h) => ({ ...h, path: w.prefix + h.path })),
        );
      };
      setHostRun(first, 0);
      // Counted in full; the listed ones are deduplicated against later walks.
      report.violationCount += Math.max(0, first.count - first.violations.length);
      for (const v of first.violations) note(v, w.prefix);
      let steps = first.plan.ordered();
      let overflowed = first.plan.overflowed;
      let moved = first.movedStores;
      let latest = first;
      if (steps.length > 0) this.writeFound(report);
      // A restore can uncover more (a directory made unreadable hid what is in it): walk again,
      // until nothing is left, nothing new is found, or the rounds run out.
      for (let round = 0; steps.length > 0; round++) {
        const applied = applyRestore(w.root, steps, w.copy, moved, uncheckedPacksDir(this.input.stateDir));
        if (overflowed) applied.notRestored.push({ path: ".", why: "too many violations to restore them all" });
        mergeRestore((report.restore ??= emptyRestore()), applied, w.prefix);
        const again = await judge(w, { disabled, maxHeldNames });
        // What host tools meet is the tree as the restore left it: a committed link it put back can
        // send a new link out of the tree that read as inside before (fix review, round 3, session 40, N6).
        report.hostRunCount -= latest.hostRunCount;
        setHostRun(again, latest.hostRun.length);
        latest = again;
        const next = again.plan.ordered();
        const stuck = JSON.stringify(next) === JSON.stringify(steps);
        if (next.length > 0 && (stuck || round === RESTORE_ROUNDS - 1)) {
          for (const v of again.violations) pushCapped(report.restore!.remaining, prefixed(v, w.prefix));
          report.restore!.clean = false;
          break;
        }
        for (const v of again.violations) note(v, w.prefix);
        steps = next;
        overflowed = again.plan.overflowed;
        moved = again.movedStores;
      }
    }
    report.changedFiles = changes.result();
    report.snapshotMs = Math.round(this.firstPassMs + performance.now() - started);
    return report;
  }
}

interface Judged {
  violations: Violation[];
  count: number;
  plan: RestorePlan;
  allocatedBytes: number;
  /** Entries the walk saw. */
  entries: number;
  hostRun: HostRunChange[];
  hostRunCount: number;
  /** Object stores found elsewhere than before the run: kept path -> path now. */
  movedStores: Map<string, string>;
  /** Derived git caches the run wrote, removed. */
  gitCachesRemoved: string[];
  gitStats?: GitCheckResult["stats"];
  /** Folders too full to walk (relative), whether they existed before, and how many names were read. */
  overfull: Array<{ path: string; existed: boolean; entries: number }>;
  /** The collector judge() was given (first walk). */
  changes?: ChangeCollector;
  /** FIFOs, sockets and devices the run left (first walk): removed before the restore. */
  special: SpecialEntry[];
}

/** A folder as reports name it: relative in the workspace ("." for itself), absolute in extra roots. */
function reportedFolder(w: Watched, relative: string): string {
  if (!w.prefix) return relative || ".";
  return relative === "" ? w.root : w.prefix + relative;
}

/** One walk of a tree against its snapshot: rules, restore plan, and (first walk) changes and unsafe bits. */
async function judge(
  w: Watched,
  options: {
    disabled?: readonly string[];
    /** Names the walk may hold at once (a folder past it is overfull). */
    maxHeldNames: number;
    changes?: ChangeCollector;
    cleared?: { setuid: string[]; writeBits: string[] };
  },
): Promise<Judged> {
  const evaluator = new RuleEvaluator({
    disabled: options.disabled,
    protectedPaths: w.protectedPaths,
    gitDirs: w.gitDirs,
    configPaths: w.configPaths,
    commandFolders: w.commandFolders,
    hostCommands: w.hostCommands,
  });
  // A store a repository borrows objects from changed: no ref is checked by git (git-checks.ts).
  let borrowedStoreChanged = false;
  const out: Judged = {
    violations: [],
    count: 0,
    plan: new RestorePlan(),
    allocatedBytes: 0,
    entries: 0,
    hostRun: evaluator.hostRun,
    hostRunCount: 0,
    movedStores: new Map(),
    gitCachesRemoved: [],
    overfull: [],
    changes: options.changes,
    special: [],
  };
  out.allocatedBytes = await diffAgainstSnapshot(w.root, w.snapshot, {
    maxHeldNames: options.maxHeldNames,
    keptHash: (relative, before) => keptHashOf(w, relative, before),
    onPair: (pair, entry) => {
      if (entry) out.entries++;
      if (entry?.overfull !== undefined && entry.kind === "directory") {
        // Not a walk violation (nothing is hidden from the host on purpose): the entry limit's.
        // The directory itself is judged; what is in it is trimmed and judged on the next walk.
        out.overfull.push({ path: pair.path, existed: pair.before?.kind === "directory", entries: entry.overfull });
        out.entries += entry.overfull;
        if (pair.after) delete pair.after.problem;
      }
      const change = changeOf(pair);
      options.changes?.addPair(pair, change === "modified", w.prefix);
      if (options.cleared && change && entry) clearUnsafeFileBits(pair, entry, w.prefix, options.cleared);
      if (options.cleared && entry && plantedSpecial(pair))
        out.special.push({
          path: pair.path,
          kind: pair.after!.kind,
          change: pair.before ? "modified" : "created",
          folder: walkedFolder(entry),
        });
      if (entry?.kind === "directory" && w.objectStores.size > 0) {
        const was = w.objectStores.get(`${entry.stat!.dev}:${entry.stat!.ino}`);
        if (was !== undefined && was !== pair.path) out.movedStores.set(was, pair.path);
      }
      // Read only if a rule asks (git pointers), during this visit, through the walked fd path.
      if (entry?.kind === "file") pair.content = (maxBytes) => readFileAt(entry.at, entry.stat!, maxBytes);
      for (const v of evaluator.visit(pair)) {
        out.count++;
        pushCapped(out.violations, v);
        out.plan.add(v.restore);
        if (v.rule === "git-config-paths" && isBorrowedStoreDetail(v.detail)) borrowedStoreChanged = true;
      }
    },
  });
  // What only the whole tree shows: links that lead out (reported), links onto protected paths.
  for (const v of await evaluator.finish()) {
    out.count++;
    pushCapped(out.violations, v);
    out.plan.add(v.restore);
  }
  out.hostRunCount = evaluator.hostRunCount;
  const work = evaluator.gitWork;
  if (work.store.length > 0 || work.pointers.length > 0 || work.pointerOverflow.size > 0) {
    const checked = await checkGit(w, work, out.plan, options.disabled, borrowedStoreChanged);
    out.gitStats = checked.stats;
    for (const v of checked.violations) {
      out.count++;
      pushCapped(out.violations, v);
      out.plan.add(v.restore);
    }
    for (const step of checked.steps) out.plan.add(step);
    out.gitCachesRemoved = removeDerived(w.root, checked.derived);
  }
  return out;
}

/** The checks of the run's git objects and refs (git-checks.ts), through the tree's fds and the kept copy. */
async function checkGit(
  w: Watched,
  work: RuleEvaluator["gitWork"],
  plan: RestorePlan,
  disabled: readonly string[] | undefined,
  borrowedStoreChanged: boolean,
): Promise<GitCheckResult> {
  if (!fs.existsSync(w.scratch)) fs.mkdirSync(w.scratch, { mode: 0o700 });
  const access = bindGitAccess(w.root, w.copy, w.scratch);
  const checks = new GitChecks(
    {
      disabled,
      protectedPaths: w.protectedPaths,
      configPaths: w.configPaths,
      commandFolders: w.commandFolders,
      hostCommands: w.hostCommands,
      gitDirs: w.gitDirs,
    },
    w.objectChecker,
  );
  try {
    return await checks.run(work, access, (root) => plan.covers(root), borrowedStoreChanged);
  } catch (error) {
    // Checks that threw judged nothing: every git directory they were to judge goes back as a
    // whole and every object-store file the run created goes (an exception must not skip the restore).
    return gitChecksFailed(work, error);
  } finally {
    access.close();
  }
}

/** What git checks that threw stand for: their git directories refused, the object-store files the run created removed. */
export function gitChecksFailed(work: RuleEvaluator["gitWork"], error: unknown): GitCheckResult {
  const detail = `not checked: the git checks failed (${error instanceof Error ? error.message : String(error)})`;
  const roots = new Set([
    ...work.store.map((c) => c.gitRoot),
    ...work.pointers.map((c) => c.gitRoot),
    ...work.pointerOverflow,
  ]);
  return {
    violations: [...roots].map((root) => ({
      path: root,
      change: "modified" as const,
      rule: REF_RULE,
      detail,
      restore: { action: "revert" as const, path: root },
    })),
    steps: work.store
      .filter((c) => c.change === "created")
      .map((c) => ({ action: "remove" as const, path: c.path, objectStore: true })),
    derived: [],
    stats: { loose: 0, inflatedBytes: 0, packs: 0, packBytes: 0, ms: 0, refRoots: 0, refMs: 0 },
  };
}

/**
 * The kept copy's hash of a file the snapshot recorded without one, if the copy was read from that
 * same file (inode, size, times and mode as recorded): then it is judged by content, in the first
 * judgement and in the one after the restore alike. Before (review, session 31), a guarded file
 * in node_modules (`layout node`'s node_modules/.bin/which -> which/bin/which) was judged by inode
 * and ctime: `rm -rf node_modules && npm install` writing the same bytes failed the run, and the
 * restore, which writes a new inode, was reported as NOT restored.
 */
function keptHashOf(w: Watched, relative: string, before: EntryFacts): string | undefined {
  w.keptHashes ??= w.copy.contentHashes((row) => keptHashWanted(row.path, row.size));
  const kept = w.keptHashes.get(relative);
  if (
    !kept ||
    kept.ino !== before.ino ||
    kept.size !== before.size ||
    kept.mtimeMs !== before.mtimeMs ||
    kept.ctimeMs !== before.ctimeMs ||
    kept.mode !== before.mode
  )
    return undefined;
  return kept.hash;
}

/** Removes the derived caches (through directory fds); returns what was there. */
function removeDerived(root: string, paths: readonly string[]): string[] {
  const removed: string[] = [];
  if (paths.length === 0) return removed;
  const rootFd = openRoot(root);
  try {
    for (const p of paths) {
      const slash = p.lastIndexOf("/");
      const dirFd = openDirBelow(rootFd, slash < 0 ? "" : p.slice(0, slash));
      if (dirFd === undefined) continue;
      try {
        if (withOwnerWrite(dirFd, () => removeAt(dirFd, p.slice(slash + 1)))) removed.push(p);
      } finally {
        fs.closeSync(dirFd);
      }
    }
  } finally {
    fs.closeSync(rootFd);
  }
  return removed;
}

function sumStats(a: GitCheckResult["stats"] | undefined, b: GitCheckResult["stats"]): GitCheckResult["stats"] {
  if (!a) return { ...b };
  const out = { ...a };
  for (const key of Object.keys(b) as Array<keyof typeof b>) out[key] += b[key];
  return out;
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/**
 * A file the run created or changed loses its setuid/setgid bits and the group/world-write bits
 * the run added (other local users could rewrite it); its content stays.
 */
function clearUnsafeFileBits(
  pair: EntryPair,
  entry: WalkEntry,
  prefix: string,
  cleared: { setuid: string[]; writeBits: string[] },
): void {
  const after = pair.after;
  if (after?.kind !== "file") return;
  const setuid = after.mode & 0o6000;
  const writeBits = after.mode & 0o022 & ~(pair.before?.kind === "file" ? pair.before.mode : 0);
  if (!setuid && !writeBits) return;
  const mode = after.mode & 0o7777 & ~0o6000 & ~writeBits;
  try {
    const fd = fs.openSync(entry.at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    try {
      const stat = fs.fstatSync(fd);
      if (stat.ino === after.ino) fs.fchmodSync(fd, mode);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    fs.chmodSync(entry.at, mode); // unreadable to us: lstat just said it is a regular file, and nothing moves now
  }
  if (setuid && cleared.setuid.length < 100) cleared.setuid.push(prefix + pair.path);
  if (writeBits && cleared.writeBits.length < 100) cleared.writeBits.push(prefix + pair.path);
}

/**
 * What the repositories' git config names in each tree (git-config-paths.ts), and the git
 * directories only a pointer names: both join the rules, and the kept copy in a second pass.
 */
function protectConfigPaths(
  watched: Watched[],
  disabled: readonly string[] = [],
  unwatched: readonly string[] = [],
): void {
  const absolute = (w: Watched, rel: string) => (rel === "" ? w.root : `${w.root}/${rel}`);
  const repositories = repositoriesOf({
    roots: [...watched.map((w) => w.root), ...unwatched],
    gitDirs: watched.flatMap((w) => w.copy.gitDirs.map((rel) => absolute(w, rel))),
    pointerFiles: watched.flatMap((w) => w.copy.pointerFiles.map((rel) => absolute(w, rel))),
  });
  // With the folders the trees' .envrc and mise files put on PATH (the host's shell runs what is there).
  const envDirs = [
    ...watched.map((w) => w.root),
    ...unwatched,
    ...repositories.flatMap((r) => (r.worktree ? [r.worktree] : [])),
    ...watched.flatMap((w) => w.configFolders.map((rel) => absolute(w, rel))),
  ];
  const { targets, hostCommands } = disabled.includes("git-config-paths")
    ? { targets: [], hostCommands: new Set<string>() }
    : configuredTargets(
        repositories,
        envDirs,
        [...watched.map((w) => w.root), ...unwatched],
        watched.flatMap((w) => (w.protectedLinks ?? []).map((rel) => absolute(w, rel))),
      );
  for (const w of watched) {
    w.configPaths = targetsInTree(w.root, targets);
    w.commandFolders = commandFoldersInTree(w.root, targets);
    w.hostCommands = hostCommands;
    const known = new Set(w.copy.gitDirs);
    for (const repo of repositories) {
      for (const dir of new Set([repo.gitDir, repo.commonDir])) {
        const real = realPathOr(dir);
        const rel = real === w.root ? "" : real.startsWith(`${w.root}/`) ? real.slice(w.root.length + 1) : undefined;
        if (rel !== undefined && !known.has(rel)) {
          known.add(rel);
          w.gitDirs.push(rel);
        }
      }
    }
    try {
      w.copy.keepPaths(w.root, [
        ...[...w.configPaths.keys()].map((p) => ({ path: p })),
        ...guardedCommandFiles(w).map((p) => ({ path: p })),
        ...w.gitDirs.map((p) => ({ path: p, gitDir: true })),
      ]);
    } catch (error) {
      throw cannotPrepare(w.root, "keep a copy of what its git configuration names", error);
    }
  }
}

/** The files already in a tree's command folders under a guarded name: kept, so a change to one is put back. */
function guardedCommandFiles(w: Watched): string[] {
  const out: string[] = [];
  for (const [folder, guard] of w.commandFolders) {
    let names: string[];
    try {
      names = fs.readdirSync(folder === "" ? w.root : `${w.root}/${folder}`);
    } catch {
      continue; // not there (yet), or not a folder: nothing to keep
    }
    for (const name of names)
      if (guardsCommand(guard, name, w.hostCommands)) out.push(folder === "" ? name : `${folder}/${name}`);
  }
  return out;
}

/** A directory's device and inode, read without following a link. */
/** The dev:ino at `dir` now, undefined where nothing (or no folder) is there. */
function currentIdentity(dir: string): string | undefined {
  try {
    const stat = fs.lstatSync(dir);
    return stat.isDirectory() ? `${stat.dev}:${stat.ino}` : undefined;
  } catch {
    return undefined;
  }
}

function treesAway(away: readonly Watched[], others: WorkspaceReport | undefined): SandboxRunError {
  const what = away.map(
    (w) => `${w.root} ${currentIdentity(w.root) === undefined ? "is gone" : "is another folder now"}`,
  );
  const rest =
    others === undefined
      ? ""
      : others.violationCount > 0
        ? ` The run's other trees broke the policy too (${others.violationCount} change(s), put back as the run's events say).`
        : " The run's other trees were checked.";
  return new SandboxRunError(
    "usage",
    `The workspace was moved, removed or replaced while the run was in progress (${listed(what)}): nothing was checked, put back or handed back there, and nothing was written into a folder now at its path. The result was withheld.${rest}`,
    {
      hint: "Leave a workspace in place until its run has ended (abort the run first to stop it early). If you moved it, what the run left in it was not checked: look at it from outside (a file manager, or ls with full paths) before you run git, direnv or an editor there.",
    },
  );
}

function identityOf(dir: string): string {
  const stat = fs.lstatSync(dir);
  return `${stat.dev}:${stat.ino}`;
}

function pushCapped<T>(list: T[], item: T): void {
  if (list.length < MAX_LISTED_VIOLATIONS) list.push(item);
}

function prefixed(v: Violation, prefix: string): Violation {
  return prefix ? { ...v, path: prefix + v.path, restore: { ...v.restore, path: prefix + v.restore.path } } : v;
}

function octal(mode: number): string {
  return mode.toString(8).padStart(4, "0");
}

function emptyRestore(): NonNullable<WorkspaceReport["restore"]> {
  return {
    reverted: [],
    removed: [],
    objects: [],
    setAside: [],
    modes: [],
    notRestored: [],
    clean: true,
    remaining: [],
  };
}

function mergeRestore(into: NonNullable<WorkspaceReport["restore"]>, from: RestoreReport, prefix: string): void {
  const p = (s: string) => (prefix ? (s === "." ? prefix.slice(0, -1) : prefix + s) : s);
  for (const s of from.reverted) if (!into.reverted.includes(p(s))) into.reverted.push(p(s));
  for (const s of from.removed) into.removed.push(p(s));
  for (const s of from.objects) into.objects.push(p(s));
  for (const a of from.setAside) into.setAside.push({ ...a, path: p(a.path) });
  for (const s of from.modes) if (!into.modes.includes(p(s))) into.modes.push(p(s));
  for (const n of from.notRestored) into.notRestored.push({ path: p(n.path), why: n.why });
  if (from.notRestored.length > 0) into.clean = false;
}

function noHostGit(root: string): SandboxRunError {
  return new SandboxRunError(
    "usage",
    `${root} holds a git repository, and this host has no git on PATH to check the objects and refs a run writes there. Nothing was started.`,
    {
      hint: "Install git on the host (e.g. `apt-get install git`, `dnf install git`, `apk add git`) or put it on PATH, then run again; or run with --workspace copy.",
    },
  );
}

function cannotPrepare(root: string, what: string, error: unknown): SandboxRunError {
  return new SandboxRunError(
    "usage",
    `sandbox-run cannot ${what} of ${root} it needs to check the run afterwards: ${errorText(error)}. Nothing was started.`,
    {
      hint: "Check that the folder exists and is readable, and that the temp folder has free space.",
      cause: error,
    },
  );
}

function uncheckableTree(root: string, problems: Array<{ path: string; problem: string }>, count: number) {
  const shown = problems.slice(0, 5).map((p) => `${p.path} (${p.problem})`);
  const more = count > shown.length ? ` and ${count - shown.length} more` : "";
  return new SandboxRunError(
    "usage",
    `sandbox-run cannot check ${count} entr${count === 1 ? "y" : "ies"} of ${root} before the run: ${shown.join(", ")}${more}. Changes there could not be told apart after the run, so nothing was started.`,
    {
      // Another user's folder (a database volume docker compose left) is not this user's to chmod:
      // copy mode leaves it out instead (review, session 29).
      hint: "Make these entries readable and searchable by the user running sandbox-run, rename entries whose names are not UTF-8, or move a folder of millions of entries out of the tree, then run again; or run with --workspace copy, which leaves what it cannot read out of the sandbox and says so.",
    },
  );
}

function errorText(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error);
}

/** The first ten, and how many more. */
function listed(items: readonly string[]): string {
  const more = items.length > 10 ? ` and ${items.length - 10} more` : "";
  return `${items.slice(0, 10).join(", ")}${more}`;
}
