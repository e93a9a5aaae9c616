// One call from resolved options to a result. Data flows one way:
// resolved options -> plan -> gateway + container -> byte stream -> JSONL records -> events
// -> outcome -> host-validated result. Every path out removes what was created.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { DockerClient } from "../docker/docker-engine.js";
import { containerCreateOptions } from "../docker/container-options.js";
import { SandboxContainer } from "../docker/sandbox-container.js";
import { SandboxRunError } from "../errors.js";
import { startModelGateway, type ModelGateway } from "../gateway/model-gateway.js";
import { planProviderRouting } from "../gateway/provider-routes.js";
import { JsonlReader } from "../pi/jsonl-reader.js";
import { parsePiRecord } from "../pi/pi-events.js";
import { ResultCollector, type Usage } from "../pi/result-collector.js";
import { OwnershipLease } from "./ownership.js";
import type { ResolvedRun } from "./resolve-options.js";
import { buildRunPlan, GATEWAY_PORT, type RunPlan } from "./run-plan.js";
import { RunTimeline, type RunEventListener } from "./run-events.js";

export interface RunDetails<T = unknown> {
  result: T;
  runId: string;
  model: string;
  piVersion: string;
  policy: string;
  image: string;
  containerId: string;
  exitCode: number;
  durationMs: number;
  turns: number;
  toolCalls: number;
  usage: Usage;
}

export interface ExecuteContext {
  docker: DockerClient;
  image: string;
  piVersion: string;
  listeners: RunEventListener[];
  signal?: AbortSignal;
  /** Called with the plan before anything is started (for --dry-run style inspection and records). */
  onPlan?(plan: RunPlan): void;
}

const STDERR_TAIL_BYTES = 16 * 1024;
/** How long to wait for the attach stream to drain after the container exited. */
const DRAIN_GRACE_MS = 2_000;

type Trip = { code: "timeout" | "aborted" | "limit"; limit?: string; message: string };

export async function executeRun(run: ResolvedRun, ctx: ExecuteContext): Promise<RunDetails> {
  ctx.signal?.throwIfAborted();
  const runId = crypto.randomBytes(6).toString("hex");
  const timeline = new RunTimeline(runId, ctx.listeners);
  const started = Date.now();
  const cleanups: Array<() => Promise<void> | void> = [];
  let container: SandboxContainer | undefined;

  try {
    const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-"));
    cleanups.push(() => fs.rmSync(runDir, { recursive: true, force: true }));

    const routing = planProviderRouting({
      model: run.model,
      modelsJson: run.modelsJson,
      env: run.hostEnv,
      gatewayBaseUrl: `http://127.0.0.1:${GATEWAY_PORT}`,
    });
    const sandboxEnv = { ...run.sandboxEnv };
    for (const name of routing.credentialEnvNames) delete sandboxEnv[name];

    const gateway: ModelGateway = await startModelGateway({
      socketPath: path.join(runDir, "gateway.sock"),
      routes: routing.routes,
      onRequest: (record) => timeline.sandbox(record.refused ? "gateway.refused" : "gateway.request", { ...record }),
    });
    cleanups.push(() => gateway.close());

    const caller = { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 };
    const plan = buildRunPlan({
      runId,
      image: ctx.image,
      policy: run.policy,
      model: run.model,
      schema: run.schema,
      cwd: run.cwd,
      writableRoots: run.writableRoots,
      readOnlyMounts: run.readOnlyMounts,
      runDir,
      caller,
      sandboxEnv,
      containerModelsJson: routing.containerModelsJson,
      extraArgs: run.extraArgs,
      timeoutMs: run.timeoutMs,
      owner: { pid: process.pid, host: os.hostname() },
      now: new Date(started),
    });
    ctx.onPlan?.(plan);
    timeline.sandbox("run.planned", { model: plan.model, policy: plan.policyName, image: plan.image, runtime: plan.runtime });

    if (plan.handBackTo) {
      const sandboxOwner = { uid: Number(plan.user.split(":")[0]), gid: Number(plan.user.split(":")[1]) };
      const lease = await OwnershipLease.lend([run.cwd, ...run.writableRoots], sandboxOwner);
      const handBackTo = plan.handBackTo;
      cleanups.push(() => lease.restore(handBackTo));
    }

    ctx.signal?.throwIfAborted();
    container = await SandboxContainer.create(ctx.docker, containerCreateOptions(plan), ctx.signal).catch((error) => {
      throw createFailed(error, plan);
    });
    const created = container;
    cleanups.push(() => created.remove());
    timeline.sandbox("container.created", { containerId: container.id });

    return await supervise(run, plan, container, timeline, ctx, started);
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

async function supervise(
  run: ResolvedRun,
  plan: RunPlan,
  container: SandboxContainer,
  timeline: RunTimeline,
  ctx: ExecuteContext,
  started: number,
): Promise<RunDetails> {
  const signal = ctx.signal;
  const collector = new ResultCollector({ finalToolName: plan.finalToolName });
  const limits = plan.limits;
  const maxOutput = limits.maxOutputMb * 1024 * 1024;
  let trip: Trip | undefined;
  let outputBytes = 0;
  let stderrTail = "";
  let badRecords = 0;

  const tripOnce = (t: Trip) => {
    if (trip) return;
    trip = t;
    timeline.sandbox("limit.tripped", { ...t });
    void container.kill().catch(() => {});
  };

  // Budgets are enforced on the host from Pi's own figures: a turn starts, or a message's
  // usage (with cost) arrives, and the run is stopped as soon as one is exceeded.
  const { maxTurns, maxCostUsd } = run.budgets;
  const checkBudgets = (type: string) => {
    if (maxTurns !== undefined && type === "turn_start" && collector.turns > maxTurns) {
      tripOnce({ code: "limit", limit: "turns", message: `The agent started turn ${collector.turns}, over the budget of ${maxTurns} turns.` });
    }
    if (maxCostUsd !== undefined && type === "message_end" && collector.usage.cost > maxCostUsd) {
      tripOnce({ code: "limit", limit: "cost", message: `The run cost $${collector.usage.cost.toFixed(4)}, over the budget of $${maxCostUsd}.` });
    }
  };

  const reader = new JsonlReader({
    maxLineBytes: limits.maxLineMb * 1024 * 1024,
    onLine: (line) => {
      const parsed = parsePiRecord(line);
      if (!parsed.ok) {
        badRecords++;
        timeline.sandbox("pi.invalid-record", { error: parsed.error, preview: line.slice(0, 200) });
        return;
      }
      collector.observe(parsed.event);
      timeline.pi(parsed.event);
      checkBudgets(parsed.event.type);
    },
    onOversizeLine: (bytes) =>
      tripOnce({ code: "limit", limit: "line", message: `Pi wrote an event line of ${bytes} bytes, over the ${limits.maxLineMb} MiB line limit.` }),
  });

  const streams = await container.attach();
  const stdoutDone = new Promise<void>((resolve) => {
    streams.stdout.on("data", (chunk: Buffer) => {
      outputBytes += chunk.length;
      if (outputBytes > maxOutput) {
        tripOnce({ code: "limit", limit: "output", message: `Pi's output passed the ${limits.maxOutputMb} MiB output limit.` });
        return;
      }
      if (!trip) reader.push(chunk);
    });
    streams.stdout.on("end", () => {
      reader.end();
      resolve();
    });
  });
  const stderrDone = new Promise<void>((resolve) => {
    streams.stderr.on("data", (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
    });
    streams.stderr.on("end", resolve);
  });

  const onAbort = () => tripOnce({ code: "aborted", message: "The run was aborted." });
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(
    () => tripOnce({ code: "timeout", message: `The run did not finish within ${Math.round(run.timeoutMs / 100) / 10} s.` }),
    run.timeoutMs,
  );

  try {
    await container.start();
    timeline.sandbox("container.started", { containerId: container.id });
    streams.stdin.end(run.prompt);
    if (signal?.aborted) onAbort();

    const exit = await container.wait();
    await Promise.race([Promise.all([stdoutDone, stderrDone]), delay(DRAIN_GRACE_MS)]);
    timeline.sandbox("container.exited", { exitCode: exit.exitCode, oomKilled: exit.oomKilled });

    const evidence = {
      exitCode: exit.exitCode,
      stderrTail: stderrTail.trim(),
      containerId: container.id,
      lastEvents: timeline.lastEvents(),
      durationMs: Date.now() - started,
      runId: plan.runId,
      usage: collector.usage,
    };
    if (trip?.code === "aborted") throw signal?.reason ?? new SandboxRunError("aborted", trip.message, evidence);
    if (trip?.code === "timeout") {
      throw new SandboxRunError("timeout", trip.message, { ...evidence, hint: "Raise the timeout (--timeout / timeoutMs) or give the agent a smaller task." });
    }
    if (trip) throw new SandboxRunError("limit", trip.message, { ...evidence, limit: trip.limit, hint: limitHint(trip.limit) });
    const limitFromExit = limitOf(exit, stderrTail);
    if (limitFromExit) {
      throw new SandboxRunError("limit", limitFromExit.message, { ...evidence, limit: limitFromExit.limit, hint: limitHint(limitFromExit.limit) });
    }

    const outcome = collector.outcome();
    if (exit.exitCode !== 0 && outcome.kind !== "structured" && outcome.kind !== "text") {
      throw new SandboxRunError("agent-crashed", `Pi exited with code ${exit.exitCode}${crashReason(exit.exitCode)}.`, {
        ...evidence,
        hint: "See the stderr tail on this error (or --events) for what Pi reported.",
      });
    }
    const details = {
      runId: plan.runId,
      model: plan.model,
      piVersion: ctx.piVersion,
      policy: plan.policyName,
      image: plan.image,
      containerId: container.id,
      exitCode: exit.exitCode,
      turns: collector.turns,
      toolCalls: collector.toolCalls,
      usage: collector.usage,
    };
    switch (outcome.kind) {
      case "text":
        timeline.sandbox("run.result", { kind: "text" });
        return { ...details, result: outcome.text, durationMs: Date.now() - started };
      case "structured": {
        const checked = run.validator!.safeParse(outcome.value);
        if (!checked.success) {
          const issues = checked.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
          throw new SandboxRunError("validation", `The final result failed host-side schema validation: ${issues}.`, {
            ...evidence,
            hint: "Pi accepted arguments the schema does not allow (Pi coerces some values); tighten the prompt or the schema.",
          });
        }
        timeline.sandbox("run.result", { kind: "structured" });
        return { ...details, result: checked.data, durationMs: Date.now() - started };
      }
      case "model-error":
        throw new SandboxRunError("model-error", `The model provider failed: ${outcome.message}`, {
          ...evidence,
          hint: "Check the model name, the provider's key on the host, and that the provider is reachable from the host (`sandbox-run doctor`).",
        });
      case "no-result":
        throw new SandboxRunError("no-result", `The agent finished without a result: ${outcome.reason}${badRecords ? ` (${badRecords} unreadable records)` : ""}.`, {
          ...evidence,
          hint: plan.finalToolName ? "Ask for the result explicitly in the prompt, or use a stronger model." : "Check the events (--events) to see where the agent stopped.",
        });
    }
    throw new Error(`unhandled outcome ${(outcome as { kind: string }).kind}`);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function limitOf(exit: { exitCode: number; oomKilled: boolean }, stderr: string): { limit: string; message: string } | undefined {
  if (exit.oomKilled) return { limit: "memory", message: "The sandbox ran out of memory and was killed (memory limit)." };
  if (/ENOSPC|no space left on device/i.test(stderr)) {
    return { limit: "tmpfs", message: "The sandbox's temporary space (/tmp or home tmpfs) is full (tmpfs size limit)." };
  }
  if (/EAGAIN.*(spawn|fork)|fork: retry|Resource temporarily unavailable/i.test(stderr) && exit.exitCode !== 0) {
    return { limit: "pids", message: "The sandbox could not start more processes (pids limit)." };
  }
  return undefined;
}

function limitHint(limit?: string): string {
  switch (limit) {
    case "memory": return "Raise limits.memoryMb in a policy file, or make the task use less memory.";
    case "tmpfs": return "Raise limits.tmpMb / limits.homeMb in a policy file, or keep tool output smaller.";
    case "pids": return "Raise limits.pids in a policy file if the task really needs more processes.";
    case "output": return "Raise limits.maxOutputMb in a policy file, or keep tool output smaller.";
    case "turns": return "Raise the turn budget (--max-turns / maxTurns), or give the agent a smaller task.";
    case "cost": return "Raise the cost budget (--max-cost / maxCostUsd), or use a cheaper model.";
    case "line": return "Raise limits.maxLineMb in a policy file; a single event this large usually means runaway tool output.";
    default: return "See the policy's limits (`sandbox-run policy show`).";
  }
}

function crashReason(code: number): string {
  if (code === 90) return " (the launcher could not prepare the sandbox)";
  if (code === 91) return " (the sandbox lost its connection to the host controller)";
  if (code === 137) return " (killed)";
  return "";
}

function createFailed(error: unknown, plan: RunPlan): SandboxRunError {
  const message = (error as Error)?.message ?? String(error);
  if (/unknown or invalid runtime|runtime.*not found/i.test(message)) {
    return new SandboxRunError("docker-unavailable", `The container runtime "${plan.runtime}" is not registered with Docker.`, {
      hint: "Register it in /etc/docker/daemon.json (see `sandbox-run doctor`), or use --runtime runc.",
      cause: error,
    });
  }
  if (/No such image/i.test(message)) {
    return new SandboxRunError("image-missing", `The runner image ${plan.image} is missing.`, {
      hint: "Build it with `sandbox-run image build`.",
      cause: error,
    });
  }
  return new SandboxRunError("docker-unavailable", `Docker could not create the container: ${message}`, { cause: error });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
