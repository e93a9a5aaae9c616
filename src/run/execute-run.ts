// One planned call from start to result. Data flows one way: plan -> run folder, host services
// (run-services.ts: gateway, replay upstream, egress proxy) -> the writable trees (run-workspace.ts:
// lease and watch, or copy mode) -> container -> superviseRun (byte stream -> JSONL records ->
// events -> outcome) -> container gone -> workspace outcome -> result. This file sets up and tears
// down; every path out removes what was created, in reverse order.
import type { Engine, EngineContainer } from "../engine/engine.js";
import { abortedError, SandboxRunError } from "../errors.js";
import { ConversationLedger } from "../gateway/conversation-ledger.js";
import { resolveRouteCredentials } from "../gateway/route-credentials.js";
import type { HandBackReport } from "../hand-back/hand-back-report.js";
import { FINAL_TOOL_REMINDER } from "../pi/pi-args.js";
import type { Usage } from "../pi/result-collector.js";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import type { TrafficSink } from "../record/run-recorder.js";
import type { ReplaySummary } from "../replay/replay-summary.js";
import type { RunPlan } from "../sandbox-contract.js";
import type { HostRunChange } from "../workspace/workspace-rules.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { Cleanups } from "./cleanups.js";
import { containerFailure } from "./container-failure.js";
import { EventThrottle } from "./event-throttle.js";
import { failedRunError, type RanRun, withRunFacts } from "./failed-run-facts.js";
import { hostTroubleError } from "./host-trouble.js";
import { engineIdentity } from "./lease-record.js";
import { OutputBudget } from "./output-budget.js";
import { containerSpecOf } from "./plan/container-spec.js";
import type { PlannedRun } from "./plan/prepare-plan.js";
import { createRunDir, removeRunDir } from "./run-dirs.js";
import type { EgressOverrides } from "./run-egress.js";
import type { RunTimeline } from "./run-events.js";
import { startRunServices } from "./run-services.js";
import { RunTrip } from "./run-trip.js";
import { RunWorkspace } from "./run-workspace.js";
import { superviseRun } from "./supervise-run.js";
import type { ClaimedSandbox } from "./warm-claim.js";

export interface RunDetails<T = unknown> {
  result: T;
  runId: string;
  model: string;
  piVersion: string;
  policy: string;
  image: string;
  /** The platform the sandbox ran on ("linux/arm64"). */
  platform?: string;
  containerId: string;
  /** 0 when Pi finished (the host then stops the container at once), else the container's exit code. */
  exitCode: number;
  durationMs: number;
  turns: number;
  toolCalls: number;
  usage: Usage;
  /** Files the run created, modified or deleted: workspace-relative, or absolute in extra writable roots. */
  changedFiles: ChangedFiles;
  /**
   * Hand-back "branch" or "patch" (a writable workspace): the branch the host committed the changes
   * to (or why there is none), or the patch. Absent in apply mode.
   */
  handBack?: HandBackReport;
  /**
   * Present when the run changed files a host tool reads when a person runs it (`.npmrc`,
   * `.yarnrc.yml`, `.gitattributes`, ...; docs/security.md): "host-run file changed". Not a
   * violation; a caller that hands the tree to such tools unreviewed can refuse the run here.
   */
  hostRunFiles?: HostRunChange[];
  /**
   * How many host-run changes there were in all, with hostRunFiles: the list holds at most 100 of
   * the files and 100 of the links and names a tree left, so a larger count says the list was cut.
   */
  hostRunCount?: number;
  /** For a replayed run: how it went against the recording. */
  replay?: ReplaySummary;
  /** With a run record: what could not be recorded (absent when everything was). */
  recordNotes?: string[];
  /** A warm sandbox (made before the call) served it; false for a container made for the call. */
  warm: boolean;
}

export interface ExecuteContext {
  engine: Engine;
  piVersion: string;
  timeline: RunTimeline;
  signal?: AbortSignal;
  /** A run record's model-traffic sink: every exchange the gateway relayed, with its bytes. */
  traffic?: TrafficSink;
  /** A warm sandbox the pool gave this run (claimed: no other run ever gets it); else a container is made. */
  warm?: ClaimedSandbox;
  /** Tests only (run/run-egress.ts). */
  egressOverrides?: EgressOverrides;
  /** The checked image's id (ensure-runner-image.ts): the container is made from it, not from the plan's tag. */
  imageId?: string;
}

// Longer than most on purpose: one straight sequence of setup steps, each registering its teardown
// in `cleanups`, so the order teardown depends on can be read top to bottom in one place.
export async function executeRun(planned: PlannedRun, ctx: ExecuteContext): Promise<RunDetails> {
  const { run, plan } = planned;
  const { timeline, signal } = ctx;
  signal?.throwIfAborted();
  const started = Date.now();
  const cleanups = new Cleanups();
  const trip = new RunTrip();
  const budget = new OutputBudget(plan.limits.maxOutputMb, trip);
  // What the sandbox makes the host report (refusals, egress decisions) is throttled and paid for.
  const driven = new EventThrottle((event) => {
    const data = { ...event.data };
    if (budget.spend(Buffer.byteLength(JSON.stringify(data)) + event.type.length)) timeline.sandbox(event.type, data);
  });
  let container: EngineContainer | undefined;
  // Removes the container (once) and says whether that worked: until it has, something of the
  // sandbox may still run, so nothing is handed back and no tree is read as final.
  let removeSandbox: () => Promise<boolean> = async () => true;
  // The engine's reason when it could not, for the error that says so.
  let removalFailure: unknown;
  const warm = ctx.warm;
  // Claimed, it is this run's alone: removed on every path out, whatever happens before it is used.
  if (warm) cleanups.add(async () => void (await warm.destroy()));

  try {
    // A missing CA bundle is a usage error: find out before anything is started.
    if (run.policy.trustHostCaBundle) hostCaBundleFile();
    // The one place models.json `!command` values run: when the run starts, never when it is planned.
    const routes = resolveRouteCredentials(run.routing, { env: run.hostEnv });
    // What the gateway adds, and the policy's secrets, must never leave the run (events, errors,
    // the record), whatever an upstream echoes back.
    const forbid = (values: readonly string[]) => {
      timeline.forbid(values);
      ctx.traffic?.forbid(values);
    };
    forbid(routes.flatMap((route) => Object.values(route.headers)));
    const runDir = createRunDir(plan.runId);
    // A sandbox that ran but was never judged (its container could not be removed): the watch's
    // state stays with the folder for `gc`, which judges the trees once the container is gone. One
    // made but never started wrote nothing: its state goes too (review, session 30: an abort in that
    // window left the workspace "never judged", and later runs on it were refused).
    let mayHaveRun = false;
    cleanups.add(() => void removeRunDir(runDir, { keepUnjudged: mayHaveRun }));

    // A schema run's final-tool extension may remind a model that answered in plain text (pi-args.ts).
    const ledger = new ConversationLedger(plan.finalToolName ? { reminder: FINAL_TOOL_REMINDER } : {});
    const { replay, modelWait } = await startRunServices({
      planned,
      routes,
      runDir,
      piVersion: ctx.piVersion,
      timeline,
      trip,
      driven,
      ledger,
      traffic: ctx.traffic,
      forbid,
      cleanups,
      ...(ctx.egressOverrides ? { egressOverrides: ctx.egressOverrides } : {}),
    });
    timeline.sandbox("run.planned", {
      model: plan.model,
      policy: plan.policyName,
      image: plan.image,
      runtime: plan.runtime,
      ...(plan.platform ? { platform: plan.platform } : {}),
    });
    for (const warning of planned.run.untrustedConfig) timeline.sandbox("config.untrusted", { warning });
    if (planned.copyModeReason) timeline.sandbox("workspace.copy-mode", { reason: planned.copyModeReason });
    const workspace = await RunWorkspace.prepare({
      planned,
      runDir,
      timeline,
      trip,
      cleanups,
      removeSandbox: () => removeSandbox(),
      engine: engineIdentity(ctx.engine),
      signal,
    });

    signal?.throwIfAborted();
    if (warm) {
      container = warm.container;
      removeSandbox = () =>
        warm.destroy().then((removed) => {
          removalFailure ??= warm.removalFailure;
          return removed;
        });
      timeline.sandbox("warm.claimed", { containerId: container.id, warmId: warm.warmId, ...warm.facts });
      // Its labels were set before the call (they cannot change); its name can: the run's, as a cold
      // run's container has (`docker ps --filter name=<run id>`). Not waited for.
      void container.rename?.(containerSpecOf(plan).name ?? `sandbox-run-${plan.runId}`).catch(() => {});
      // Started before the call; from here on it is this run's, as a cold run's is from its start.
      mayHaveRun = true;
      timeline.sandbox("container.started", { containerId: container.id, warm: true });
    } else {
      // Not cancelled by the signal: the engine makes the container whether or not the client still
      // waits for its id, and without the id nothing would remove it (review, session 28). An abort
      // meanwhile is seen right below, once its removal is registered.
      const spec = {
        ...containerSpecOf(plan, new Date(), { copiedMb: workspace.copiedMb }),
        ...(ctx.imageId ? { image: ctx.imageId } : {}),
      };
      container = await ctx.engine.createContainer(spec).catch((error) => {
        throw containerFailure(error, plan);
      });
      const made = container;
      let removal: Promise<boolean> | undefined;
      removeSandbox = () =>
        (removal ??= made.remove().then(
          () => true,
          (error: unknown) => {
            removalFailure = error;
            return false;
          },
        ));
      timeline.sandbox("container.created", { containerId: container.id });
    }
    const created = container;
    cleanups.add(async () => {
      await removeSandbox();
    });
    signal?.throwIfAborted();

    // superviseRun starts it.
    mayHaveRun = true;
    const settled = await superviseRun({
      plan,
      prompt: run.prompt,
      timeoutMs: run.timeoutMs,
      budgets: run.budgets,
      validator: run.validator,
      container,
      timeline,
      trip,
      budget,
      evidence: ledger,
      modelWait,
      signal,
      startedAt: started,
      companion: workspace.companion(created, warm),
      ...(warm ? { attached: warm.streams } : {}),
    }).then(
      (details) => ({ details }),
      (error: unknown) => ({ error }),
    );
    // The container may have exited on its own, but a process it started may not have: remove it
    // (and wait for that) before reading what it wrote.
    if (!(await removeSandbox())) throw notRemoved(created.id, plan, removalFailure);
    const exitCode = "details" in settled ? settled.details.exitCode : (settled.error as SandboxRunError)?.exitCode;
    // Every failure from here on is of a run that ran: it says which run and what ran it.
    const ran: RanRun = { plan, containerId: created.id, exitCode, piVersion: ctx.piVersion };
    // Nothing of the sandbox runs any more: what it did to the trees can be read as final.
    const outcome = await workspace.finish().catch((error: unknown) => {
      throw withRunFacts(hostTroubleError(error) ?? error, ran);
    });
    // A protected path that changed fails the run whatever else happened; the result is withheld.
    const failedWith = (error: unknown) => failedRunError(error, ran, outcome);
    try {
      workspace.refuseViolations(outcome, { containerId: created.id, exitCode, runFailed: "error" in settled });
    } catch (error) {
      throw failedWith(error);
    }
    if ("error" in settled) throw failedWith(settled.error);
    await workspace.checkDisk(outcome);
    // Only a run that succeeded hands its work back as a branch or a patch.
    const handBack = await workspace.handBack().catch((error: unknown) => {
      throw withRunFacts(hostTroubleError(error) ?? error, ran);
    });
    return {
      ...settled.details,
      // Scrubbed before it was validated (supervise-run.ts); whatever changed since, a second line.
      result: timeline.scrub(settled.details.result),
      runId: plan.runId,
      model: plan.model,
      piVersion: ctx.piVersion,
      policy: plan.policyName,
      image: plan.image,
      ...(plan.platform ? { platform: plan.platform } : {}),
      containerId: created.id,
      durationMs: Date.now() - started,
      // File names are the sandbox's to choose: scrubbed like the result (review, session 27).
      changedFiles: timeline.scrub(outcome.changedFiles),
      ...(handBack ? { handBack } : {}),
      ...(outcome.hostRunCount > 0
        ? { hostRunFiles: timeline.scrub(outcome.hostRunFiles), hostRunCount: outcome.hostRunCount }
        : {}),
      warm: Boolean(warm),
      ...(replay
        ? { replay: replay.summary({ result: settled.details.result, changedFiles: outcome.changedFiles }) }
        : {}),
    };
  } catch (caught) {
    // An abort that came out as an engine's or another error (a request the signal cut off) is the
    // caller's abort, in the event and the record as in the error the call throws (review, session
    // 28: they said docker-unavailable or internal).
    const error =
      signal?.aborted && (!(caught instanceof SandboxRunError) || caught.code === "docker-unavailable")
        ? abortedError(signal.reason, { runId: plan.runId })
        : (hostTroubleError(caught) ?? caught);
    if (error instanceof SandboxRunError) error.runId ??= plan.runId;
    // The sandbox existed: the caller's abort after this point does not make it "nothing was started".
    if (error instanceof SandboxRunError && container) error.containerId ??= container.id;
    // The one way out for a run's failure: it leaves without a credential in it.
    timeline.scrubError(error);
    const e = error as SandboxRunError;
    if (e instanceof SandboxRunError) e.warm ??= Boolean(warm);
    timeline.sandbox("run.failed", {
      code: e?.code ?? "internal",
      message: e?.shortMessage ?? e?.message ?? String(error),
      limit: e?.limit,
    });
    throw error;
  } finally {
    await cleanups.run();
    driven.flush();
    // Only once it is gone (review, session 32: said of a container the engine could not remove).
    if (container && (await removeSandbox())) timeline.sandbox("container.removed", { containerId: container.id });
  }
}

function notRemoved(containerId: string, plan: RunPlan, failure: unknown): SandboxRunError {
  const reason = (failure as Error | undefined)?.message;
  // Copy mode lends it no host tree: there is nothing to judge or hand back, only a container to remove.
  const hint =
    plan.workspaceMode === "copy"
      ? "Its processes may still run; no host tree was lent to it (copy mode). `sandbox-run gc` removes it once the engine can."
      : "Its trees stay as the sandbox left them, unjudged (and lent to the sandbox uid) until it is gone: run `sandbox-run gc`, which removes it and then judges them.";
  return new SandboxRunError(
    "docker-unavailable",
    `The engine could not remove the container ${containerId.slice(0, 12)}${reason ? `: ${reason}` : ""}.`,
    { hint, runId: plan.runId, cause: failure },
  );
}
