// Finds and removes what a dead controller left behind: its containers (on any engine, by label)
// and, for a root caller, the trees it lent to the sandbox uid (handed back to the caller, from the
// lease record in its run folder: never from labels), then its run folders. A container is an orphan when its owner process on this host no longer exists,
// or when it is past its deadline (plus grace) on any host; `gc --all` removes every container of ours.
// A warm sandbox (made before any call) is one too once it stopped by itself after its idle deadline:
// a live controller would have claimed it before, and never claims a stopped one.
import fs from "node:fs";
import os from "node:os";
import { EngineAnswerError } from "../engine/bounded-answers.js";
import type { Engine } from "../engine/engine.js";
import { RemovalError } from "../engine/forced-removal.js";
import { SandboxRunError } from "../errors.js";
import {
  LABEL_DEADLINE,
  LABEL_IDLE_DEADLINE,
  LABEL_LENT_ROOTS,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_OWNER_PIDNS,
  LABEL_RUN_ID,
  LABEL_WARM,
  SANDBOX_UID,
} from "../sandbox-contract.js";
import { pidnsField } from "../util/own-pid-namespace.js";
import { resolvedPath } from "../util/resolved-path.js";
import { decodeLentRoots, handBackOrphanedTree, leftBehind } from "../workspace/ownership-lease.js";
import {
  awaitsJudgement,
  awaitsJudgementOn,
  deadRunsAwaitingJudgement,
  type JudgedDeadRun,
  judgeDeadRun,
} from "./judge-dead-run.js";
import {
  deadRunLease,
  deadRunsWithLeases,
  engineIdentity,
  type LeaseRecord,
  removeLeaseRecord,
} from "./lease-record.js";
import { GC_ACCOUNT_HOMES, lentFolderProblem } from "./plan/host-folders.js";
import { ownerGone, processAlive, readRunDirOwner, runDirPath } from "./run-dirs.js";
import { holdForReaper } from "./tree-hold-files.js";

const DEADLINE_GRACE_MS = 60_000;

export interface ReapedContainer {
  id: string;
  runId?: string;
  reason: string;
  /** Lent trees that could not be handed back (path: why). */
  notHandedBack?: string[];
  /** A bind-mode run its controller died before judging: judged now (judge-dead-run.ts). */
  judged?: JudgedDeadRun;
  /** A dry run: this run's trees would be judged before they go back (it saved its judgement's state). */
  wouldJudge?: boolean;
  /** A dry run: the trees this host's record says would be handed back once the container is gone. */
  wouldHandBack?: string[];
  /** A dry run: its run folder, which goes once its trees are back. */
  runDir?: string;
}

/** Why a container with these labels is an orphan, or undefined while its controller may still need it. */
export function orphanReason(
  labels: Record<string, string>,
  context: { all?: boolean; host: string; pidns?: string; now: number; alive: (pid: number) => boolean },
  state?: string,
): string | undefined {
  if (context.all) return "gc --all";
  const warm = labels[LABEL_WARM] === "true" ? "warm sandbox: " : "";
  const pid = Number(labels[LABEL_OWNER_PID]);
  // A pid is judged only in the namespace it was taken in: another controller's, in a PID namespace
  // of its own on a host of the same name, is no process here (review: its live sandboxes were
  // removed). Containers labelled before the namespace was recorded are judged as before.
  const pidns = labels[LABEL_OWNER_PIDNS];
  const samePidns = pidns === undefined || pidns === context.pidns;
  if (labels[LABEL_OWNER_HOST] === context.host && samePidns && pid > 0 && !context.alive(pid))
    return `${warm}owner process ${pid} is gone`;
  const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
  if (Number.isFinite(deadline) && context.now > deadline + DEADLINE_GRACE_MS) return `${warm}past its deadline`;
  const idle = Date.parse(labels[LABEL_IDLE_DEADLINE] ?? "");
  if (
    warm &&
    state !== undefined &&
    state !== "running" &&
    Number.isFinite(idle) &&
    context.now > idle + DEADLINE_GRACE_MS
  )
    return `${warm}stopped at its idle deadline`;
  return undefined;
}

/** How soon an engine must answer a ping after one removal failed, for the reaping to go on. */
const PING_AFTER_FAILURE_MS = 10_000;

function stoppedAnswering(engine: Engine, id: string, why: string): EngineAnswerError {
  return new EngineAnswerError(
    "docker-unavailable",
    `Engine "${engine.name}" stopped removing orphaned containers at ${id.slice(0, 12)}: ${why}.`,
    { hint: "Check that the engine runs and answers (`docker version`), then run `sandbox-run gc` again." },
  );
}

export interface ReapOptions {
  /** Every container of ours, even of live controllers (`gc --all`). */
  all?: boolean;
  /** Where this host's run folders are (default: the temp dir, as the runs had it). */
  tmpDir?: string;
  /**
   * Judge the bind-mode runs whose controller died before judging them (`sandbox-run gc`). Without
   * it such a run's lent trees and folder are left for a reaper that does.
   */
  judge?: boolean;
  /** Say what would be removed, judged and handed back, and do none of it (`gc --dry-run`). */
  dryRun?: boolean;
}

/**
 * Whether an image declares LABEL_MANAGED itself (ours never do: the label comes with each create),
 * asked once per image. An image the engine no longer lists cannot be told: not taken for one.
 */
function imitatingImages(engine: Engine): (image: string) => Promise<boolean> {
  const known = new Map<string, Promise<boolean>>();
  return (image) => {
    let answer = known.get(image);
    if (!answer) {
      answer = engine
        .imageDetails(image)
        .then((details) => Boolean(details && Object.hasOwn(details.labels, LABEL_MANAGED)))
        .catch(() => false);
      known.set(image, answer);
    }
    return answer;
  };
}

export async function reapContainers(engine: Engine, options: ReapOptions = {}): Promise<ReapedContainer[]> {
  const containers = await engine.listContainers([`${LABEL_MANAGED}=true`]);
  const context = {
    all: options.all,
    host: os.hostname(),
    ...pidnsField(),
    now: Date.now(),
    alive: processAlive,
  };
  const reaped: ReapedContainer[] = [];
  const failed: string[] = [];
  let removalsTimedOut = 0;
  const imitating = imitatingImages(engine);
  for (const { id, labels, state, image } of containers) {
    const reason = orphanReason(labels, context, state);
    if (!reason) continue;
    // Our labels from its image, not from us: some other tool's container (a devcontainer made from
    // an image that imitates ours; sandbox-run refuses such images). Never removed.
    if (image && (await imitating(image))) continue;
    if (options.dryRun) {
      reaped.push({
        id,
        runId: labels[LABEL_RUN_ID],
        reason,
        ...wouldDoFor(engine, labels[LABEL_RUN_ID], options.tmpDir),
      });
      continue;
    }
    let removal: "removed" | "gone";
    try {
      removal = await engine.removeContainer(id);
    } catch (error) {
      // An engine that stopped answering would make each of the others wait out the deadline too:
      // after a failed removal it must still answer a ping at once, or the reaping of it ends here.
      // A removal that ran out of time once may be a slow death (below); twice, the engine is not
      // getting on with them, and each one more would wait as long.
      if (error instanceof EngineAnswerError) throw error;
      const timedOut = error instanceof RemovalError && error.timedOut;
      if (timedOut && ++removalsTimedOut >= 2) throw stoppedAnswering(engine, id, "two removals ran out of time");
      await engine.ping(AbortSignal.timeout(PING_AFTER_FAILURE_MS)).catch(() => {
        throw stoppedAnswering(engine, id, "it does not answer its ping since");
      });
      // One container the engine cannot kill yet (a fork bomb takes a while to die) must not stop
      // the others; it is reported below, and the next gc gets it. Its trees stay lent until then:
      // handing them back while its processes live would let them write as the caller.
      failed.push(`${id.slice(0, 12)}: ${(error as Error)?.message ?? String(error)}`);
      continue;
    }
    // Another reaper removed it between the listing and here (two gc at once): that reaper judges and
    // hands back its run; what is left of it, handBackGoneRuns finds from the run's records (review,
    // session 33: the second gc counted it again and said its tree had no lease recorded).
    if (removal === "gone") continue;
    const runId = labels[LABEL_RUN_ID] ?? "";
    // A bind-mode run its controller died before judging is judged now, before its trees go back;
    // a reaper that does not judge (a run's start-up) leaves both to `sandbox-run gc`.
    const judged =
      engine.sharesHostFilesystem && options.judge
        ? await judgeDeadRun(runId, engineIdentity(engine), options.tmpDir)
        : undefined;
    const notHandedBack =
      engine.sharesHostFilesystem && !awaitsJudgement(runId, options.tmpDir)
        ? await handBackRecorded(engine, labels, options.tmpDir)
        : [];
    reaped.push({
      id,
      runId: labels[LABEL_RUN_ID],
      reason,
      ...(notHandedBack.length ? { notHandedBack } : {}),
      ...(judged ? { judged } : {}),
    });
  }
  if (failed.length > 0) {
    throw new SandboxRunError(
      "docker-unavailable",
      `The engine could not remove ${failed.length} orphaned container(s): ${failed.join("; ")}`,
      {
        hint: "A container whose processes are still dying cannot be removed yet; run `sandbox-run gc` again in a minute (or `docker rm -f <id>`).",
      },
    );
  }
  return reaped;
}

/** What a gc would do for a removed container's run (a dry run): judge it, hand back its trees, remove its folder. */
function wouldDoFor(
  engine: Engine,
  runId: string | undefined,
  tmpDir?: string,
): Pick<ReapedContainer, "wouldJudge" | "wouldHandBack" | "runDir"> {
  if (!engine.sharesHostFilesystem || runId === undefined) return {};
  const here = engineIdentity(engine);
  const record = deadRunLease(runId, tmpDir);
  const runDir = runDirPath(runId, tmpDir);
  const owner = readRunDirOwner(runDir);
  return {
    ...(awaitsJudgementOn(runId, here, tmpDir) ? { wouldJudge: true } : {}),
    ...(record && record.engine === here && record.roots.length > 0 ? { wouldHandBack: record.roots } : {}),
    ...(owner && ownerGone(owner) ? { runDir } : {}),
  };
}

export interface HandedBackRun {
  runId: string;
  /** The trees handed back (none for a run that lent nothing). */
  roots: string[];
  /** Lent trees that could not be handed back (path: why). */
  notHandedBack?: string[];
  /** A bind-mode run its controller died before judging: judged now, before its trees were handed back. */
  judged?: JudgedDeadRun;
  /** A dry run: its trees would be judged first. */
  wouldJudge?: boolean;
}

/**
 * The trees of this host's dead runs whose container is gone from the engine they recorded (removed
 * by another reaper, by hand, or by the controller itself just before it died): handed back from
 * the run's lease record. Only that engine is asked: another one's "not here" says nothing.
 */
export async function handBackGoneRuns(engine: Engine, options: ReapOptions = {}): Promise<HandedBackRun[]> {
  if (!engine.sharesHostFilesystem) return [];
  const runIds = [...new Set([...deadRunsWithLeases(options.tmpDir), ...deadRunsAwaitingJudgement(options.tmpDir)])];
  if (runIds.length === 0) return [];
  const listed = new Set(
    (await engine.listContainers([`${LABEL_MANAGED}=true`])).map(({ labels }) => labels[LABEL_RUN_ID]),
  );
  const here = engineIdentity(engine);
  const handed: HandedBackRun[] = [];
  for (const runId of runIds) {
    if (listed.has(runId)) continue;
    if (options.dryRun) {
      const record = deadRunLease(runId, options.tmpDir);
      const wouldJudge = awaitsJudgementOn(runId, here, options.tmpDir);
      const lent = record !== undefined && record.engine === here;
      if (lent || wouldJudge)
        handed.push({ runId, roots: lent ? record.roots : [], ...(wouldJudge ? { wouldJudge } : {}) });
      continue;
    }
    // Judged first, while the trees are as the sandbox left them (judgeDeadRun asks only for runs on this engine).
    const judged = options.judge ? await judgeDeadRun(runId, here, options.tmpDir) : undefined;
    const record = deadRunLease(runId, options.tmpDir);
    const lent = record !== undefined && record.engine === here && !awaitsJudgement(runId, options.tmpDir);
    const notHandedBack = lent ? await handBackLease(runId, record, options.tmpDir) : [];
    if (!lent && !judged) continue;
    handed.push({
      runId,
      roots: lent ? record.roots : [],
      ...(notHandedBack.length ? { notHandedBack } : {}),
      ...(judged ? { judged } : {}),
    });
  }
  return handed;
}

/**
 * What a dead controller could not do itself for a root caller: hand every tree it lent to the
 * sandbox uid (workspace and writable roots, whatever the mode) back to the caller. Only what this
 * host recorded in the run's folder counts: the roots and the owner the labels name are the
 * engine's word, and one that disagrees is reported and left as it is.
 */
async function handBackRecorded(engine: Engine, labels: Record<string, string>, tmpDir?: string): Promise<string[]> {
  const runId = labels[LABEL_RUN_ID] ?? "";
  const record = deadRunLease(runId, tmpDir);
  const here = engineIdentity(engine);
  const recorded = record && record.engine === here ? record : undefined;
  const claimed = decodeLentRoots(labels[LABEL_LENT_ROOTS]);
  const unrecorded = claimed
    .filter((root) => !recorded?.roots.includes(root))
    .map((root) =>
      record && record.engine !== here && record.roots.includes(root)
        ? `${root}: this host recorded its lease for run ${runId} on the engine at ${record.engine}, not ${here} (run gc with that engine to hand it back)`
        : `${root}: this host recorded no lease of it for run ${runId || "?"} (only the container's labels name it)`,
    );
  if (!recorded) return unrecorded;
  return [...unrecorded, ...(await handBackLease(runId, recorded, tmpDir))];
}

async function handBackLease(runId: string, record: LeaseRecord, tmpDir?: string): Promise<string[]> {
  // Held as a run holds its trees, without waiting: a live run over them (one that started after
  // this run's controller died) has its own sandbox writing there, whose files this walk would take
  // from it (review, session 35: a new run's sandbox lost every file to root mid-run, and the run
  // still passed). Such a lease waits for the next reaper.
  const hold = holdForReaper(runId, record.roots, tmpDir);
  if (typeof hold === "string") return record.roots.map((root) => `${root}: ${hold}; run gc again once it ends`);
  try {
    return await handBackHeld(runId, record, tmpDir);
  } finally {
    hold.release();
  }
}

async function handBackHeld(runId: string, record: LeaseRecord, tmpDir?: string): Promise<string[]> {
  const failed: string[] = [];
  for (const root of record.roots) {
    // A tree deleted since (a temporary workspace) has nothing to hand back; a tree that cannot be
    // walked must not keep the reaper from the others.
    if (!fs.existsSync(root)) continue;
    // No run lends such a tree, whatever a record says (judge-dead-run.ts likewise).
    const problem = lentFolderProblem(resolvedPath(root), undefined, undefined, GC_ACCOUNT_HOMES);
    if (problem) {
      failed.push(`${root}: the record names a tree that ${problem}`);
      continue;
    }
    // What it could not reach or give back keeps the record too (review, session 38: ignored, the
    // record went and nothing could give those entries back).
    await handBackOrphanedTree(root, { uid: SANDBOX_UID, gid: SANDBOX_UID }, record.handBackTo).then(
      (report) => failed.push(...leftBehind(report)),
      (error: Error) => failed.push(`${root}: ${error.message}`),
    );
  }
  // Kept while a tree failed: the next gc tries again; then its run folder goes as any other.
  if (failed.length === 0) removeLeaseRecord(runDirPath(runId, tmpDir));
  return failed;
}
