// The trees a run may write, from before its container exists until after it is gone.
// Bind mode: lend them to the sandbox uid (as root), snapshot them, and watch their growth while
// the run is live; afterwards diff them and put back whatever the sandbox was not allowed to change.
// Copy mode: copy them into the sandbox, and judge what comes back by the same rules before
// anything of it reaches the host.
import path from "node:path";
import type { EngineContainer } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import type { HandBackReport } from "../hand-back/hand-back-report.js";
import { SANDBOX_UID } from "../sandbox-contract.js";
import { type BlindTrip, type DiskTrip, DiskWatch } from "../workspace/disk-watch.js";
import { NOT_CHECKED_HERE } from "../workspace/git-object-check.js";
import { OwnershipLease } from "../workspace/ownership-lease.js";
import { violationMessage } from "../workspace/violation-message.js";
import type { HostRunChange } from "../workspace/workspace-rules.js";
import { uncheckedPacksDir, type WorkspaceReport, WorkspaceWatch } from "../workspace/workspace-watch.js";
import type { Cleanups } from "./cleanups.js";
import { type CopyModeOutcome, CopyModeWorkspace } from "./copy-mode/copy-mode-workspace.js";
import { limitHint } from "./failure-explanations.js";
import { uncheckedPacksError } from "./host-trouble.js";
import { giveBackLease } from "./lease-give-back.js";
import { removeLeaseRecord, writeLeaseRecord } from "./lease-record.js";
import type { PlannedRun } from "./plan/prepare-plan.js";
import { protectedPathsChanged } from "./protected-paths-error.js";
import { workspaceRulesCheck } from "./returned-tree-rules.js";
import { GIT_CHECKS_DIR, WORKSPACE_STATE_DIR } from "./run-dirs.js";
import type { RunTimeline } from "./run-events.js";
import type { RunTrip, Trip } from "./run-trip.js";
import type { RunCompanion } from "./supervise-run.js";
import type { ClaimedSandbox } from "./warm-claim.js";

interface RunWorkspaceInput {
  planned: PlannedRun;
  runDir: string;
  timeline: RunTimeline;
  trip: RunTrip;
  cleanups: Cleanups;
  /**
   * Removes the container (once) and says whether that worked: a lent tree is handed back only
   * once nothing of the sandbox can still write to it.
   */
  removeSandbox: () => Promise<boolean>;
  /** The engine the container runs on (lease-record.ts engineIdentity), for the lease record. */
  engine: string;
  signal?: AbortSignal;
}

/** What the run did to the trees, the same shape in both modes. */
export interface WorkspaceOutcome {
  changedFiles: WorkspaceReport["changedFiles"];
  /** Violations found (at most MAX_LISTED_VIOLATIONS): non-empty fails the run. */
  violations: ReadonlyArray<{ path: string; change: string; rule?: string; detail?: string }>;
  violationCount: number;
  /**
   * Changed files that host tools read when a person runs them (.npmrc, .gitattributes, ...):
   * not violations, reported so a caller can refuse the run's output (at most 100 listed).
   */
  hostRunFiles: HostRunChange[];
  hostRunCount: number;
  /** Copy mode: the run ended before its writable trees came back, so nothing of them was kept. */
  discarded?: boolean;
  /** Bind mode: what was put back. */
  restore?: WorkspaceReport["restore"];
  /** Bind mode: the trees' allocated bytes before and after (for the exact disk check). */
  allocatedBytes?: WorkspaceReport["allocatedBytes"];
  /** Bind mode: the trees' entries before and after (for the exact entry check). */
  entries?: WorkspaceReport["entries"];
  /** Bind mode: folders too full to walk (the run added more than limits.maxEntries there); what it added was removed. */
  overfull?: WorkspaceReport["overfull"];
  snapshotMs: number;
  /** false in copy mode: what came back was judged before anything reached the host. */
  applied: boolean;
}

export class RunWorkspace {
  private constructor(
    private readonly input: RunWorkspaceInput,
    private readonly copy: CopyModeWorkspace | undefined,
    private readonly watch: WorkspaceWatch | undefined,
    private readonly diskWatch: DiskWatch | undefined,
  ) {}

  static async prepare(input: RunWorkspaceInput): Promise<RunWorkspace> {
    const { planned, runDir, timeline, trip, cleanups, removeSandbox, signal } = input;
    const { run, plan } = planned;
    const { diskMb, maxEntries } = plan.limits;

    let lease: OwnershipLease | undefined;
    if (plan.handBackTo) {
      const roots = [run.cwd, ...run.writableRoots];
      const handBackTo = plan.handBackTo;
      // Before anything is lent: a reaper hands back what this record says, never what labels say.
      writeLeaseRecord(runDir, { roots, handBackTo, engine: input.engine });
      // A read-only workspace is lent only where the sandbox could not read it otherwise.
      const readOnly = plan.mounts.some((m) => m.kind === "workspace" && m.readOnly) ? [run.cwd] : [];
      const sandboxUser = { uid: SANDBOX_UID, gid: SANDBOX_UID };
      const lent = await OwnershipLease.lend(roots, sandboxUser, { readOnly }).catch((error: unknown) => {
        removeLeaseRecord(runDir);
        throw error;
      });
      lease = lent;
      cleanups.add(() => giveBackLease({ lease: lent, handBackTo, runDir, timeline, removeSandbox }));
    }

    if (plan.workspaceMode === "copy") {
      // The trees it sends are walked now; what comes back is judged by the same rules.
      const copy = await CopyModeWorkspace.prepare({
        plan,
        runDir,
        proxy: run.policy.network === "allowlist",
        diskMb,
        check: workspaceRulesCheck({
          disabled: run.policy.disableBuiltinProtections,
          protectedPaths: run.policy.protectedPaths,
          lentRoots: [run.cwd, ...run.writableRoots],
          scratch: path.join(runDir, GIT_CHECKS_DIR),
          handsBackGitFolders: plan.handBack === "apply",
          ...(signal ? { signal } : {}),
        }),
        timeline,
        signal,
        // No disk watch: each tree is a tmpfs the size of the limit, and the relay says when one fills.
        onFull: (what) => trip.fire(copyFullTrip(what, diskMb)),
        prompt: run.prompt,
      });
      cleanups.add(() => copy.dispose());
      return new RunWorkspace(input, copy, undefined, undefined);
    }

    // After the lease (its chown moves ctimes), before anything can write.
    const watch = await WorkspaceWatch.start({
      workspace: run.cwd,
      workspaceWritable: run.policy.workspace === "read-write",
      writableRoots: run.writableRoots,
      protectedPaths: run.policy.protectedPaths,
      disabledProtections: run.policy.disableBuiltinProtections,
      stateDir: `${runDir}/${WORKSPACE_STATE_DIR}`,
      ownerOf: lease ? (stat) => lease.originalOwner(stat) : undefined,
      maxEntries,
      ...(signal ? { signal } : {}),
    });
    // The trees it may write live on the host's disks: their growth is watched while the run is live.
    const writable = [...(run.policy.workspace === "read-write" ? [run.cwd] : []), ...run.writableRoots];
    // From now until the run is judged, a controller that dies leaves the run to `sandbox-run gc`
    // (judge-dead-run.ts), which judges it from this state on the engine the run was on.
    if (writable.length > 0) {
      try {
        watch.save({ engine: input.engine });
      } catch (error) {
        throw new SandboxRunError(
          "usage",
          `The run's folder ${runDir} could not be written: ${(error as Error).message}.`,
          {
            hint: "Check the free space of the temp folder (TMPDIR), then run again.",
          },
        );
      }
    }
    const diskWatch =
      writable.length > 0
        ? await DiskWatch.start({
            roots: writable,
            limitBytes: diskMb * 1024 * 1024,
            limitEntries: maxEntries,
            baselineBytes: watch.allocatedBytesBefore,
            baselineEntries: watch.entriesBefore,
            onExceeded: (over) => trip.fire(diskTrip(over)),
          })
        : undefined;
    if (diskWatch) cleanups.add(() => diskWatch.stop());
    return new RunWorkspace(input, undefined, watch, diskWatch);
  }

  /** The work done beside the run while its container runs (copy mode's copy-in, or a warm sandbox's claim, and copy-out). */
  /** Copy mode: MiB of the trees copied in, which the container's memory limit makes room for; else 0. */
  get copiedMb(): number {
    return this.copy?.copiedMb ?? 0;
  }

  companion(container: EngineContainer, warm?: ClaimedSandbox): RunCompanion | undefined {
    // Bind mode: the disk watch also asks the container's processes for files they hold with no name.
    const hostPids = container.hostPids?.bind(container);
    if (hostPids) this.diskWatch?.watchHolders(hostPids);
    return this.copy?.companion(container, warm);
  }

  /**
   * Called once nothing of the sandbox runs any more: diff the trees and put back what the
   * sandbox was not allowed to change (bind mode), or judge the returned trees and apply them only
   * when every check passed (copy mode).
   */
  async finish(): Promise<WorkspaceOutcome> {
    this.diskWatch?.stop();
    const outcome: WorkspaceOutcome = this.copy
      ? copyModeOutcome(await this.copy.finish())
      : bindModeOutcome(await this.judgeBindMode(this.watch!), this.input.timeline);
    const changed = outcome.changedFiles;
    this.input.timeline.sandbox("workspace.changed", {
      ...(changed.truncated ?? {
        created: changed.created.length,
        modified: changed.modified.length,
        deleted: changed.deleted.length,
      }),
      ...(changed.truncated ? { listed: "first 10,000 of each kind" } : {}),
      snapshotMs: outcome.snapshotMs,
    });
    if (outcome.hostRunCount > 0) {
      this.input.timeline.sandbox("workspace.host-run-files", {
        reason: "host-run file changed: a tool run on the host reads it (not refused; see hostRunFiles)",
        count: outcome.hostRunCount,
        files: outcome.hostRunFiles.slice(0, 50),
      });
    }
    return outcome;
  }

  /**
   * The watch's judgement; once judged the run is no longer left to a reaper. A judgement that threw
   * judged nothing (its git directories were put back): its saved state stays for `gc`, and runs
   * over its trees are refused until then.
   */
  private async judgeBindMode(watch: WorkspaceWatch): Promise<WorkspaceReport> {
    try {
      return await watch.finish();
    } finally {
      if (watch.judged) watch.forget();
    }
  }

  /**
   * Once the run succeeded: hand-back "branch" commits the judged workspace onto a new branch (with
   * the host's own git), "patch" makes it a patch; undefined in apply mode (finish() applied it).
   */
  async handBack(): Promise<HandBackReport | undefined> {
    return this.copy?.handBack();
  }

  /**
   * A protected path that changed fails the run whatever else happened (unless it was aborted: then
   * the abort is the answer); the result is withheld.
   */
  refuseViolations(
    outcome: WorkspaceOutcome,
    context: { containerId: string; exitCode?: number | null; runFailed: boolean },
  ): void {
    if (outcome.violationCount === 0) return;
    const { timeline, signal, planned } = this.input;
    timeline.sandbox("policy.violation", {
      protectedPaths: outcome.violations
        .slice(0, 50)
        .map(({ path, change, rule, detail }) => ({ path, change, rule, ...(detail ? { detail } : {}) })),
      count: outcome.violationCount,
      restore: outcome.restore,
    });
    // Packs this host could not check were set aside: said even after an abort, since what the
    // user must put back by hand is in no other message.
    const unchecked = uncheckedPacks(outcome, this.input.runDir, planned.run.cwd, planned.plan.policyName);
    if (unchecked) throw unchecked;
    // An abort that stopped the run is what the caller hears (its error follows); one that came
    // after the run had its result must not let that result through past the violation.
    if (signal?.aborted && context.runFailed) return;
    const { runFailed: _, ...facts } = context;
    throw protectedPathsChanged(outcome, { plan: planned.plan, ...facts, timeline, applied: outcome.applied });
  }

  /**
   * The exact answer, from the after-walk: a run that wrote past the limit fails even if the watch
   * did not catch it while it was live.
   */
  async checkDisk(outcome: WorkspaceOutcome): Promise<void> {
    if (outcome.overfull && outcome.overfull.length > 0) {
      const { plan } = this.input.planned;
      throw new SandboxRunError("limit", overfullMessage(outcome.overfull, plan.limits.maxEntries), {
        limit: "entries",
        hint: limitHint("entries"),
        runId: plan.runId,
      });
    }
    const after =
      outcome.allocatedBytes && outcome.entries
        ? { bytes: outcome.allocatedBytes.after, entries: outcome.entries.after }
        : undefined;
    const over = after ? await this.diskWatch?.check(after) : undefined;
    if (!over) return;
    const { plan } = this.input.planned;
    const trip = diskTrip(over);
    throw new SandboxRunError("limit", trip.message, {
      limit: trip.limit,
      hint: limitHint(trip.limit),
      runId: plan.runId,
    });
  }
}

/**
 * The host-trouble error for packs set aside unchecked (host-trouble.ts uncheckedPacksError), with
 * the words of the run's other violations, if any; undefined when none was set aside.
 */
export function uncheckedPacks(
  outcome: WorkspaceOutcome,
  runDir: string,
  workspace: string,
  policyName: string,
): SandboxRunError | undefined {
  const setAside = outcome.restore?.setAside ?? [];
  if (setAside.length === 0) return undefined;
  const here = outcome.violations.filter((v) => v.detail?.startsWith(NOT_CHECKED_HERE));
  const reasons = [...new Set(here.map((v) => v.detail!.slice(NOT_CHECKED_HERE.length)))];
  const setAsidePaths = new Set(setAside.map((a) => a.path));
  const others = outcome.violations.filter((v) => !here.includes(v) && !setAsidePaths.has(v.path));
  const othersCount = outcome.violationCount - here.length;
  return uncheckedPacksError({
    workspace,
    setAside,
    reasons: reasons.length > 0 ? reasons : ["its git could not be run"],
    folder: uncheckedPacksDir(path.join(runDir, WORKSPACE_STATE_DIR)),
    ...(others.length > 0 && othersCount > 0
      ? {
          others: violationMessage(
            { violationCount: othersCount, violations: others, restore: outcome.restore },
            policyName,
            { applied: outcome.applied },
          ),
        }
      : {}),
  });
}

function overfullMessage(folders: NonNullable<WorkspaceOutcome["overfull"]>, maxEntries: number): string {
  const first = folders[0]!;
  const others = folders.length > 1 ? ` (and ${folders.length - 1} more folder${folders.length > 2 ? "s" : ""})` : "";
  const failed = folders.filter((f) => f.failed);
  const done =
    failed.length === 0
      ? "what it added there was removed"
      : `what it added could NOT all be removed: ${failed.map((f) => `${f.path} (${f.failed})`).join(", ")}`;
  return `The sandbox filled ${first.path}${others} with at least ${first.entries} entries (hard links count: each name is an entry), over the limit of ${maxEntries} new files and folders (limits.maxEntries); ${done}.`;
}

function bindModeOutcome(report: WorkspaceReport, timeline: RunTimeline): WorkspaceOutcome {
  if (report.overfull.length > 0) {
    timeline.sandbox("workspace.overfull", {
      reason: "folders held more entries than the walk after the run reads; what the run added there was removed",
      folders: report.overfull.slice(0, 20),
    });
  }
  if (report.clearedSetuid.length > 0 || report.clearedWriteBits.length > 0) {
    timeline.sandbox("workspace.modes-cleared", {
      setuid: report.clearedSetuid.slice(0, 20),
      writeBits: report.clearedWriteBits.slice(0, 20),
    });
  }
  if (report.specialRemoved.count > 0) {
    timeline.sandbox("workspace.special-removed", {
      reason: "FIFOs, sockets and devices the run left were removed: a host tool opening one by name blocks on a FIFO",
      count: report.specialRemoved.count,
      files: report.specialRemoved.files.slice(0, 20),
    });
  }
  if (report.gitChecks) {
    const { ms, refMs, ...counts } = report.gitChecks;
    timeline.sandbox("workspace.git-checked", {
      ...counts,
      ms: ms + refMs,
      cachesRemoved: report.gitCachesRemoved.slice(0, 20),
    });
  }
  return { ...report, applied: true };
}

function copyModeOutcome(finished: CopyModeOutcome): WorkspaceOutcome {
  const { changedFiles, violations, snapshotMs, hostRun, hostRunCount, discarded } = finished;
  return {
    ...(discarded ? { discarded } : {}),
    changedFiles,
    violations,
    violationCount: violations.length,
    hostRunFiles: hostRun,
    hostRunCount,
    snapshotMs,
    applied: false,
  };
}

/** How a disk watch's verdict stops the run (exported for its wording's test). */
export function diskTrip(over: DiskTrip | BlindTrip): Trip {
  if ("unseen" in over) return blindDiskTrip(over);
  if (over.limit === "entries") {
    return {
      code: "limit",
      limit: "entries",
      message: `The sandbox added ${over.atLeast ? `more than ${over.limitEntries}` : over.grownEntries} files and folders (hard links count: each name is an entry) to the workspace and writable roots, over the limit of ${over.limitEntries} (limits.maxEntries).`,
    };
  }
  const grownMb = Math.round(over.grownBytes / 1024 / 1024);
  const diskMb = Math.round(over.limitBytes / 1024 / 1024);
  const held = over.held
    ? ` (${Math.round(over.held.bytes / 1024 / 1024)} MiB of it in ${over.held.files} files its processes removed but still hold open or mapped)`
    : "";
  return {
    code: "limit",
    limit: "disk",
    message: `The sandbox added ${grownMb} MiB to the workspace and writable roots${held}, over the ${diskMb} MiB disk limit.`,
  };
}

/** A trip the filesystem's growth decided: the host could not look into part of the trees. */
function blindDiskTrip(over: BlindTrip): Trip {
  const grown =
    over.limit === "disk"
      ? `${Math.round(over.grownBytes / 1024 / 1024)} MiB, over the ${Math.round(over.limitBytes / 1024 / 1024)} MiB disk limit`
      : `${over.grownEntries} files and folders, over the limit of ${over.limitEntries} (limits.maxEntries)`;
  return {
    code: "limit",
    limit: over.limit,
    message: `The host could not look into ${over.unseen} while the run was live, so the growth of the filesystem holding the workspace and writable roots was counted instead: ${grown}. Writes of other programs to that filesystem count too while ${over.blindTo === "held files" ? "the host cannot read what they hold" : "such a folder is there"}.`,
  };
}

function copyFullTrip(what: string, diskMb: number): Trip {
  return {
    code: "limit",
    limit: "disk",
    message: `The sandbox filled its copy of ${what}: its writes went over the ${diskMb} MiB disk limit.`,
  };
}
