// One planned call from start to result. Data flows one way: plan -> run folder, gateway (+ proxy)
// -> lease and watch of the writable trees -> container -> superviseRun (byte stream -> JSONL
// records -> events -> outcome) -> container gone -> workspace diff -> result. This file sets up and
// tears down; every path out removes what was created, in reverse order.
import type { Engine, EngineContainer } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import { startModelGateway } from "../gateway/model-gateway.js";
import type { Usage } from "../pi/result-collector.js";
import { createDomainFilter } from "../proxy/domain-filter.js";
import { startEgressProxy } from "../proxy/egress-proxy.js";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import { SANDBOX_UID } from "../sandbox-contract.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { WorkspaceWatch } from "../workspace/workspace-watch.js";
import { containerFailure } from "./container-failure.js";
import { containerSpecOf } from "./container-spec.js";
import { CopyModeWorkspace } from "./copy-mode.js";
import { OwnershipLease } from "./ownership.js";
import type { PlannedRun } from "./prepare-plan.js";
import { protectedPathsChanged } from "./protected-paths-error.js";
import { createRunDir, removeRunDir } from "./run-dirs.js";
import type { RunTimeline } from "./run-events.js";
import { RunTrip } from "./run-trip.js";
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
}

export interface ExecuteContext {
  engine: Engine;
  piVersion: string;
  timeline: RunTimeline;
  signal?: AbortSignal;
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
  let container: EngineContainer | undefined;
  // Removes the container (once) and says whether that worked: until it has, something of the
  // sandbox may still run, so nothing is handed back and no tree is read as final.
  let removeSandbox: () => Promise<boolean> = async () => true;

  try {
    // A missing CA bundle is a usage error: find out before anything is started.
    if (run.policy.trustHostCaBundle) hostCaBundleFile();
    const runDir = createRunDir(plan.runId);
    cleanups.add(() => void removeRunDir(runDir));

    // The turn budget is also kept by the gateway, where code in the sandbox cannot get around it.
    const gateway = await startModelGateway({
      socketPath: `${runDir}/gateway.sock`,
      routes: run.routing.routes,
      onRequest: (record) => timeline.sandbox(record.refused ? "gateway.refused" : "gateway.request", { ...record }),
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
      // connection and every decision lands in the run's events.
      const proxy = await startEgressProxy({
        socketPath: `${runDir}/proxy.sock`,
        filter: createDomainFilter(run.policy.allowedDomains),
        onDecision: ({ action, ...decision }) => timeline.sandbox(`egress.${action}`, { ...decision }),
      });
      cleanups.add(() => proxy.close());
    }
    timeline.sandbox("run.planned", {
      model: plan.model,
      policy: plan.policyName,
      image: plan.image,
      runtime: plan.runtime,
    });

    if (plan.handBackTo) {
      const lease = await OwnershipLease.lend([run.cwd, ...run.writableRoots], { uid: SANDBOX_UID, gid: SANDBOX_UID });
      const handBackTo = plan.handBackTo;
      cleanups.add(async () => {
        if (await removeSandbox()) await lease.restore(handBackTo);
        else
          timeline.sandbox("workspace.still-lent", {
            reason: "the container could not be removed; `sandbox-run gc` hands the trees back once it is",
          });
      });
    }
    // After the lease (its chown moves ctimes), before anything can write. Copy mode walks the
    // trees it sends instead, and judges what comes back before anything reaches the host.
    const copy =
      plan.workspaceMode === "copy"
        ? await CopyModeWorkspace.prepare({
            plan,
            runDir,
            proxy: run.policy.network === "allowlist",
            diskMb: planned.copyDiskMb,
            protectedPaths: run.policy.protectedPaths,
            timeline,
            signal,
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
        });

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
    const workspace = copy ? await copy.finish() : await watch!.finish();
    timeline.sandbox("workspace.changed", {
      created: workspace.changedFiles.created.length,
      modified: workspace.changedFiles.modified.length,
      deleted: workspace.changedFiles.deleted.length,
      snapshotMs: workspace.snapshotMs,
    });
    // A protected path that changed fails the run whatever else happened; the result is withheld.
    if (workspace.violations.length > 0) {
      timeline.sandbox("policy.violation", { protectedPaths: workspace.violations.slice(0, 50) });
      if (!signal?.aborted) {
        const exitCode = "details" in settled ? settled.details.exitCode : (settled.error as SandboxRunError)?.exitCode;
        throw protectedPathsChanged(workspace.violations, {
          plan,
          containerId: created.id,
          exitCode,
          timeline,
          applied: !copy,
        });
      }
    }
    if ("error" in settled) throw settled.error;
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
    if (container) timeline.sandbox("container.removed", { containerId: container.id });
  }
}
