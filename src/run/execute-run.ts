// One planned call from start to result. Data flows one way: plan -> run folder, gateway (+ proxy)
// -> lease and watch of the writable trees -> container -> superviseRun (byte stream -> JSONL
// records -> events -> outcome) -> container gone -> workspace diff -> result. This file sets up and
// tears down; every path out removes what was created, in reverse order.
import type { Engine, EngineContainer } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import { startModelGateway } from "../gateway/model-gateway.js";
import { ConversationLedger } from "../gateway/conversation-ledger.js";
import { resolveRouteCredentials } from "../gateway/route-credentials.js";
import type { Usage } from "../pi/result-collector.js";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import { startRunEgress } from "../proxy/run-egress.js";
import type { TrafficSink } from "../record/run-record.js";
import type { ReplaySummary } from "../replay/replay-summary.js";
import { startReplayUpstream } from "./replay-upstream.js";
import { SANDBOX_UID } from "../sandbox-contract.js";
import { OwnershipLease } from "../workspace/ownership-lease.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { WorkspaceWatch } from "../workspace/workspace-watch.js";
import { DiskWatch } from "../workspace/disk-watch.js";
import { containerFailure } from "./container-failure.js";
import { limitHint } from "./failure-explanations.js";
import { containerSpecOf } from "./container-spec.js";
import { CopyModeWorkspace } from "./copy-mode.js";
import { workspaceRulesCheck } from "./returned-tree-rules.js";
import type { PlannedRun } from "./prepare-plan.js";
import { protectedPathsChanged } from "./protected-paths-error.js";
import { EventThrottle } from "./event-throttle.js";
import { OutputBudget } from "./output-budget.js";
import { createRunDir, removeRunDir, WORKSPACE_STATE_DIR } from "./run-dirs.js";
import type { RunTimeline } from "./run-events.js";
import { RunTrip, type Trip } from "./run-trip.js";
import { superviseRun } from "./supervise-run.js";

export interface RunDetails<T = unknown> {
  result: T;
  runId: string;
  model: string;
  piVersion: string;
  policy: string;
  image: string;
  containerId: string;
  /** 0 when Pi finished (the host then stops the container at once), else the container's exit code. */
  exitCode: number;
  durationMs: number;
  turns: number;
  toolCalls: number;
  usage: Usage;
  /** Files the run created, modified or deleted: workspace-relative, or absolute in extra writable roots. */
  changedFiles: ChangedFiles;
  /** For a replayed run: how it went against the recording. */
  replay?: ReplaySummary;
  /** With a run record: what could not be recorded (absent when everything was). */
  recordNotes?: string[];
}

export interface ExecuteContext {
  engine: Engine;
  piVersion: string;
  timeline: RunTimeline;
  signal?: AbortSignal;
  /** A run record's model-traffic sink: every exchange the gateway relayed, with its bytes. */
  traffic?: TrafficSink;
}

/** Teardown steps, run in reverse order of setup; a failing step does not stop the others. */
class Cleanups {
  readonly #steps: Array<() => Promise<void> | void> = [];
  add(step: () => Promise<void> | void): void {
    this.#steps.push(step);
  }
  async run(): Promise<void> {
    for (const step of this.#steps.reverse()) {
      await Promise.resolve()
        .then(step)
        .catch(() => {});
    }
  }
}

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

  try {
    // A missing CA bundle is a usage error: find out before anything is started.
    if (run.policy.trustHostCaBundle) hostCaBundleFile();
    // The one place models.json `!command` values run: when the run starts, never when it is planned.
    let routes = resolveRouteCredentials(run.routing, { env: run.hostEnv });
    // What the gateway adds must never reach a record, whatever an upstream echoes back.
    ctx.traffic?.forbid(routes.flatMap((route) => Object.values(route.headers)));
    const runDir = createRunDir(plan.runId);
    cleanups.add(() => void removeRunDir(runDir));

    // Replay: the route's upstream is a host-side server answering from the recording; nothing leaves the host.
    const replay = planned.replay
      ? await startReplayUpstream(planned.replay, routes, { piVersion: ctx.piVersion, timeline, trip, driven })
      : undefined;
    if (replay) {
      cleanups.add(() => replay.close());
      routes = replay.routes;
    }

    // The turn budget is also kept by the gateway, where code in the sandbox cannot get around it.
    const ledger = new ConversationLedger();
    const gateway = await startModelGateway({
      socketPath: `${runDir}/gateway.sock`,
      routes,
      onRequest: (record) => {
        const type = record.refused ? "gateway.refused" : "gateway.request";
        driven.offer(`${type} ${record.reason ?? record.status} ${record.method}`, { type, data: { ...record } });
      },
      // What the model said in Pi's conversation, as the gateway relayed it: the run's evidence.
      ...(ctx.traffic ? { recordExchanges: ctx.traffic.limits } : {}),
      onExchange: (exchange) => {
        ctx.traffic?.exchange(exchange);
        const verdict = ledger.add(exchange);
        const data = {
          seq: exchange.seq,
          status: exchange.status,
          relay: exchange.relay,
          toolCalls: exchange.reply?.toolCalls.length ?? 0,
          ...(exchange.reply?.piStopReason ? { stopReason: exchange.reply.piStopReason } : {}),
          ...(verdict.onChain
            ? { chain: verdict.as }
            : { chain: "off", reason: verdict.reason, detail: verdict.detail }),
        };
        // Pi's own exchanges are bounded by its turns; off-chain ones are the sandbox's doing.
        if (verdict.onChain) timeline.sandbox("gateway.exchange", data);
        else driven.offer(`gateway.exchange off ${verdict.reason}`, { type: "gateway.exchange", data });
      },
      maxGenerations: run.budgets.maxTurns,
      onBudgetExceeded: (attempted) =>
        trip.fire({
          code: "limit",
          limit: "turns",
          message: `The sandbox asked for model response ${attempted}, over the budget of ${run.budgets.maxTurns} turns.`,
        }),
    });
    cleanups.add(() => gateway.close());

    if (run.policy.network === "allowlist") {
      // The sandbox's only way to the internet: the proxy asks the policy's allow-list about every
      // connection and every decision lands in the run's events. With secrets, it also holds their
      // values and the run's CA (both only in this process's memory).
      const egress = await startRunEgress({
        runId: plan.runId,
        runDir,
        policy: run.policy,
        hostEnv: run.hostEnv,
        placeholders: planned.secretPlaceholders,
        hostCaBundle: run.policy.trustHostCaBundle ? hostCaBundleFile() : undefined,
        timeoutMs: run.timeoutMs,
        onDecision: ({ action, ...decision }) =>
          driven.offer(`egress.${action} ${decision.host}`, { type: `egress.${action}`, data: { ...decision } }),
      });
      cleanups.add(() => egress.proxy.close());
    }
    timeline.sandbox("run.planned", {
      model: plan.model,
      policy: plan.policyName,
      image: plan.image,
      runtime: plan.runtime,
    });

    let lease: OwnershipLease | undefined;
    if (plan.handBackTo) {
      const lent = await OwnershipLease.lend([run.cwd, ...run.writableRoots], { uid: SANDBOX_UID, gid: SANDBOX_UID });
      lease = lent;
      const handBackTo = plan.handBackTo;
      cleanups.add(async () => {
        if (await removeSandbox()) await lent.restore(handBackTo);
        else
          timeline.sandbox("workspace.still-lent", {
            reason: "the container could not be removed; `sandbox-run gc` hands the trees back once it is",
          });
      });
    }
    // After the lease (its chown moves ctimes), before anything can write. Copy mode walks the
    // trees it sends instead, and judges what comes back, by the same rules, before anything
    // reaches the host.
    const copy =
      plan.workspaceMode === "copy"
        ? await CopyModeWorkspace.prepare({
            plan,
            runDir,
            proxy: run.policy.network === "allowlist",
            diskMb: planned.copyDiskMb,
            check: workspaceRulesCheck({
              disabled: run.policy.disableBuiltinProtections,
              protectedPaths: run.policy.protectedPaths,
            }),
            timeline,
            signal,
            onFull: (what) => trip.fire(copyFullTrip(what, planned.copyDiskMb)),
          })
        : undefined;
    if (copy) cleanups.add(() => copy.dispose());
    const watch = copy
      ? undefined
      : await WorkspaceWatch.start({
          workspace: run.cwd,
          workspaceWritable: run.policy.workspace === "read-write",
          writableRoots: run.writableRoots,
          protectedPaths: run.policy.protectedPaths,
          disabledProtections: run.policy.disableBuiltinProtections,
          stateDir: `${runDir}/${WORKSPACE_STATE_DIR}`,
          ownerOf: lease ? (stat) => lease.originalOwner(stat) : undefined,
        });

    // The trees it may write live on the host's disks: their growth is watched while the run is live.
    const diskLimit = plan.limits.diskMb * 1024 * 1024;
    const writable = [...(run.policy.workspace === "read-write" ? [run.cwd] : []), ...run.writableRoots];
    // (Copy mode needs no watch: the trees live on tmpfs mounts the size of the limit.)
    const diskWatch =
      watch && writable.length > 0
        ? await DiskWatch.start({
            roots: writable,
            limitBytes: diskLimit,
            baselineBytes: watch.allocatedBytesBefore,
            onExceeded: ({ grownBytes }) => trip.fire(diskTrip(grownBytes, plan.limits.diskMb)),
          })
        : undefined;
    cleanups.add(() => diskWatch?.stop());

    signal?.throwIfAborted();
    container = await ctx.engine.createContainer(containerSpecOf(plan), signal).catch((error) => {
      throw containerFailure(error, plan);
    });
    const created = container;
    let removal: Promise<boolean> | undefined;
    removeSandbox = () =>
      (removal ??= created.remove().then(
        () => true,
        () => false,
      ));
    cleanups.add(async () => {
      await removeSandbox();
    });
    timeline.sandbox("container.created", { containerId: container.id });

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
      signal,
      startedAt: started,
      companion: copy?.companion(created),
    }).then(
      (details) => ({ details }),
      (error: unknown) => ({ error }),
    );
    // The container may have exited on its own, but a process it started may not have: remove it
    // (and wait for that) before reading what it wrote.
    if (!(await removeSandbox())) {
      throw new SandboxRunError(
        "docker-unavailable",
        `The engine could not remove the container ${created.id.slice(0, 12)}.`,
        {
          hint: "Its trees stay lent to the sandbox uid until it is gone: run `sandbox-run gc` (or `docker rm -f <id>`).",
          runId: plan.runId,
        },
      );
    }
    // Nothing of the sandbox runs any more: diff the trees it could write and put back whatever it
    // was not allowed to change (bind mode, workspace/workspace-watch.ts), or judge the returned
    // trees and apply them only when every check passed (copy mode).
    diskWatch?.stop();
    const workspace = copy ? copyModeReport(await copy.finish()) : await watch!.finish();
    const changed = workspace.changedFiles;
    timeline.sandbox("workspace.changed", {
      ...(changed.truncated ?? {
        created: changed.created.length,
        modified: changed.modified.length,
        deleted: changed.deleted.length,
      }),
      ...(changed.truncated ? { listed: "first 10,000 of each kind" } : {}),
      snapshotMs: workspace.snapshotMs,
    });
    // A protected path that changed fails the run whatever else happened; the result is withheld.
    if (workspace.violationCount > 0) {
      timeline.sandbox("policy.violation", {
        protectedPaths: workspace.violations.slice(0, 50).map(({ path, change, rule }) => ({ path, change, rule })),
        count: workspace.violationCount,
        restore: workspace.restore,
      });
      if (!signal?.aborted) {
        const exitCode = "details" in settled ? settled.details.exitCode : (settled.error as SandboxRunError)?.exitCode;
        throw protectedPathsChanged(workspace, { plan, containerId: created.id, exitCode, timeline, applied: !copy });
      }
    }
    if ("error" in settled) throw settled.error;
    // The exact answer, from the after-walk: a run that wrote past the limit fails even if the
    // watch did not catch it while it was live.
    const overDisk = workspace.allocatedBytes ? await diskWatch?.check(workspace.allocatedBytes.after) : undefined;
    if (overDisk) {
      const over = diskTrip(overDisk.grownBytes, plan.limits.diskMb);
      throw new SandboxRunError("limit", over.message, { limit: "disk", hint: limitHint("disk"), runId: plan.runId });
    }
    return {
      ...settled.details,
      runId: plan.runId,
      model: plan.model,
      piVersion: ctx.piVersion,
      policy: plan.policyName,
      image: plan.image,
      containerId: created.id,
      durationMs: Date.now() - started,
      changedFiles: workspace.changedFiles,
      ...(replay
        ? { replay: replay.summary({ result: settled.details.result, changedFiles: workspace.changedFiles }) }
        : {}),
    };
  } catch (error) {
    const e = error as SandboxRunError;
    timeline.sandbox("run.failed", {
      code: e?.code ?? "internal",
      message: e?.shortMessage ?? e?.message ?? String(error),
      limit: e?.limit,
    });
    throw error;
  } finally {
    await cleanups.run();
    driven.flush();
    if (container) timeline.sandbox("container.removed", { containerId: container.id });
  }
}

function diskTrip(grownBytes: number, diskMb: number): Trip {
  const grownMb = Math.round(grownBytes / 1024 / 1024);
  return {
    code: "limit",
    limit: "disk",
    message: `The sandbox added ${grownMb} MiB to the workspace and writable roots, over the ${diskMb} MiB disk limit.`,
  };
}

function copyFullTrip(what: string, diskMb: number): Trip {
  return {
    code: "limit",
    limit: "disk",
    message: `The sandbox filled its copy of ${what}: its writes went over the ${diskMb} MiB disk limit.`,
  };
}

/** Copy mode's outcome in the shape the rest of the run reads (bind mode's WorkspaceReport). */
function copyModeReport(finished: Awaited<ReturnType<CopyModeWorkspace["finish"]>>) {
  return {
    changedFiles: finished.changedFiles,
    violations: finished.violations,
    violationCount: finished.violations.length,
    restore: undefined,
    snapshotMs: finished.snapshotMs,
    allocatedBytes: undefined as { before: number; after: number } | undefined,
  };
}
