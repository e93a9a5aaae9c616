// One call from resolved options to a result. Data flows one way:
// resolved options -> plan -> gateway + container -> (superviseRun: byte stream -> JSONL
// records -> events -> outcome -> host-validated result) -> workspace diff. This file sets up
// and tears down; every path out removes what was created.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { DockerClient } from "../docker/docker-engine.js";
import { containerCreateOptions } from "../docker/container-options.js";
import { RUN_DIR_MARKER } from "../docker/reaper.js";
import { SandboxContainer } from "../docker/sandbox-container.js";
import { SandboxRunError } from "../errors.js";
import { startModelGateway, type ModelGateway } from "../gateway/model-gateway.js";
import type { Usage } from "../pi/result-collector.js";
import { containerFailure } from "./container-failure.js";
import type { ResolvedRun } from "./resolve-options.js";
import { planRun } from "./plan-run.js";
import type { RunPlan } from "./run-plan.js";
import { RunTimeline, type RunEventListener } from "./run-events.js";
import { superviseRun } from "./supervise-run.js";
import { createDomainFilter } from "../proxy/domain-filter.js";
import { startEgressProxy } from "../proxy/egress-proxy.js";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import { OwnershipLease } from "../workspace/ownership-lease.js";
import { violationMessage } from "../workspace/violation-message.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { WorkspaceWatch, type WorkspaceReport } from "../workspace/workspace-watch.js";

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
  docker: DockerClient;
  image: string;
  piVersion: string;
  listeners: RunEventListener[];
  /** The run's timeline when the caller already started it (e.g. to report an image build). */
  timeline?: RunTimeline;
  signal?: AbortSignal;
  /** Called with the plan before anything is started (for --dry-run style inspection and records). */
  onPlan?(plan: RunPlan): void;
}

export function newRunId(): string {
  return crypto.randomBytes(6).toString("hex");
}

export async function executeRun(run: ResolvedRun, ctx: ExecuteContext): Promise<RunDetails> {
  ctx.signal?.throwIfAborted();
  const timeline = ctx.timeline ?? new RunTimeline(newRunId(), ctx.listeners);
  const runId = timeline.runId;
  const started = Date.now();
  const cleanups: Array<() => Promise<void> | void> = [];
  let container: SandboxContainer | undefined;

  try {
    // A missing CA bundle is a usage error: find out before anything is started.
    if (run.policy.trustHostCaBundle) hostCaBundleFile();
    const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-"));
    cleanups.push(() => fs.rmSync(runDir, { recursive: true, force: true }));
    // Lets a later reaper remove this folder if this process dies without cleaning up.
    fs.writeFileSync(path.join(runDir, RUN_DIR_MARKER), `${process.pid}\n${os.hostname()}\n`);

    const routing = run.routing;
    // The turn budget is also kept by the gateway, where code in the sandbox cannot get around
    // it; supervise() decides what a refusal does to the run.
    const budgetTrip: { onExceeded?: (attempted: number) => void } = {};
    const gateway: ModelGateway = await startModelGateway({
      socketPath: path.join(runDir, "gateway.sock"),
      routes: routing.routes,
      onRequest: (record) => timeline.sandbox(record.refused ? "gateway.refused" : "gateway.request", { ...record }),
      maxGenerations: run.budgets.maxTurns,
      onBudgetExceeded: (attempted) => budgetTrip.onExceeded?.(attempted),
    });
    cleanups.push(() => gateway.close());

    if (run.policy.network === "allowlist") {
      // The sandbox's only way to the internet: the proxy asks the policy's allow-list about
      // every connection and every decision lands in the run's events.
      const proxy = await startEgressProxy({
        socketPath: path.join(runDir, "proxy.sock"),
        filter: createDomainFilter(run.policy.allowedDomains),
        onDecision: ({ action, ...decision }) => timeline.sandbox(`egress.${action}`, { ...decision }),
      });
      cleanups.push(() => proxy.close());
    }

    const { plan } = planRun(run, { runId, image: ctx.image, runDir, now: new Date(started) });
    ctx.onPlan?.(plan);
    timeline.sandbox("run.planned", {
      model: plan.model,
      policy: plan.policyName,
      image: plan.image,
      runtime: plan.runtime,
    });

    let lease: OwnershipLease | undefined;
    if (plan.handBackTo) {
      const sandboxOwner = { uid: Number(plan.user.split(":")[0]), gid: Number(plan.user.split(":")[1]) };
      lease = await OwnershipLease.lend([run.cwd, ...run.writableRoots], sandboxOwner);
      const handBackTo = plan.handBackTo;
      const lent = lease;
      cleanups.push(() => lent.restore(handBackTo).then(() => {}));
    }

    // After the ownership lease (its chown moves ctimes), before anything can write.
    const watch = await WorkspaceWatch.start({
      workspace: run.cwd,
      workspaceWritable: run.policy.workspace === "read-write",
      writableRoots: run.writableRoots,
      protectedPaths: run.policy.protectedPaths,
      disabledProtections: run.policy.disableBuiltinProtections,
      stateDir: path.join(runDir, "workspace"),
      ownerOf: lease ? (stat) => lease.originalOwner(stat) : undefined,
    });

    ctx.signal?.throwIfAborted();
    container = await SandboxContainer.create(ctx.docker, containerCreateOptions(plan), ctx.signal).catch((error) => {
      throw containerFailure(error, plan);
    });
    const created = container;
    cleanups.push(() => created.remove());
    timeline.sandbox("container.created", { containerId: container.id });

    const settled = await superviseRun(run, plan, container, timeline, ctx, started, budgetTrip).then(
      (details) => ({ details }),
      (error: unknown) => ({ error }),
    );
    // The container has stopped either way: diff the trees it could write. A protected path
    // that changed fails the run whatever else happened; the result is withheld.
    const workspace = await watch.finish();
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
    if (workspace.violationCount > 0) {
      timeline.sandbox("policy.violation", {
        protectedPaths: workspace.violations.slice(0, 50).map(({ path, change, rule }) => ({ path, change, rule })),
        count: workspace.violationCount,
        restore: workspace.restore,
      });
      if (!ctx.signal?.aborted) throw protectedPathsChanged(workspace, plan, container.id, timeline, settled);
    }
    if ("error" in settled) throw settled.error;
    return { ...settled.details, changedFiles: workspace.changedFiles };
  } catch (error) {
    const e = error as SandboxRunError;
    timeline.sandbox("run.failed", {
      code: e?.code ?? "internal",
      message: e?.shortMessage ?? e?.message ?? String(error),
      limit: e?.limit,
    });
    throw error;
  } finally {
    // Remove in reverse order of creation; a failing step must not stop the others.
    for (const cleanup of cleanups.reverse()) {
      await Promise.resolve()
        .then(cleanup)
        .catch(() => {});
    }
    if (container) timeline.sandbox("container.removed", { containerId: container.id });
  }
}

function protectedPathsChanged(
  workspace: WorkspaceReport,
  plan: RunPlan,
  containerId: string,
  timeline: RunTimeline,
  settled: { details: Omit<RunDetails, "changedFiles"> } | { error: unknown },
): SandboxRunError {
  const { message, hint } = violationMessage(workspace, plan.policyName);
  const exitCode = "details" in settled ? settled.details.exitCode : (settled.error as SandboxRunError)?.exitCode;
  return new SandboxRunError("policy-violation", message, {
    hint,
    exitCode,
    containerId,
    runId: plan.runId,
    lastEvents: timeline.lastEvents(),
  });
}
