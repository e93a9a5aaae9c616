// The live part of a run: attach to the container, start it, read Pi's JSONL as it arrives,
// enforce the limits and budgets on the way (stopping the container when one trips), then turn
// what arrived and how the container ended into a result or an error.
import type { SandboxContainer } from "../docker/sandbox-container.js";
import { SandboxRunError } from "../errors.js";
import { JsonlReader } from "../pi/jsonl-reader.js";
import { parsePiRecord } from "../pi/pi-events.js";
import { ResultCollector } from "../pi/result-collector.js";
import { containerFailure } from "./container-failure.js";
import type { ExecuteContext, RunDetails } from "./execute-run.js";
import type { ResolvedRun } from "./resolve-options.js";
import type { RunTimeline } from "./run-events.js";
import type { RunPlan } from "./run-plan.js";

const STDERR_TAIL_BYTES = 16 * 1024;
/** How long to wait for the attach stream to drain after the container exited. */
const DRAIN_GRACE_MS = 2_000;
/**
 * Pi writes nothing but JSON records; more unreadable lines than this means code in the sandbox
 * is writing into Pi's stdout. Stopping there also bounds the controller's heap: every failed
 * JSON.parse of a long line leaves garbage V8 is slow to collect.
 */
const MAX_BAD_RECORDS = 20;

type Trip = { code: "timeout" | "aborted" | "limit"; limit?: string; message: string };

export async function superviseRun(
  run: ResolvedRun,
  plan: RunPlan,
  container: SandboxContainer,
  timeline: RunTimeline,
  ctx: ExecuteContext,
  started: number,
  budgetTrip: { onExceeded?: (attempted: number) => void },
): Promise<Omit<RunDetails, "changedFiles">> {
  const signal = ctx.signal;
  const collector = new ResultCollector({ finalToolName: plan.finalToolName });
  const limits = plan.limits;
  const maxOutput = limits.maxOutputMb * 1024 * 1024;
  let trip: Trip | undefined;
  let outputBytes = 0;
  let stderrTail = "";
  let badRecords = 0;
  let piSettled = false;

  const tripOnce = (t: Trip) => {
    if (trip) return;
    trip = t;
    timeline.sandbox("limit.tripped", { ...t });
    void container.kill().catch(() => {});
  };

  // Budgets are enforced on the host from Pi's own figures: a turn starts, or a message's
  // usage (with cost) arrives, and the run is stopped as soon as one is exceeded. The gateway
  // also counts model responses, so calls that bypass Pi stop at the turn budget too.
  const { maxTurns, maxCostUsd } = run.budgets;
  budgetTrip.onExceeded = (attempted) =>
    tripOnce({
      code: "limit",
      limit: "turns",
      message: `The sandbox asked for model response ${attempted}, over the budget of ${maxTurns} turns.`,
    });
  const checkBudgets = (type: string) => {
    if (maxTurns !== undefined && type === "turn_start" && collector.turns > maxTurns) {
      tripOnce({
        code: "limit",
        limit: "turns",
        message: `The agent started turn ${collector.turns}, over the budget of ${maxTurns} turns.`,
      });
    }
    if (maxCostUsd !== undefined && type === "message_end" && collector.usage.cost > maxCostUsd) {
      tripOnce({
        code: "limit",
        limit: "cost",
        message: `The run cost $${collector.usage.cost.toFixed(4)}, over the budget of $${maxCostUsd}.`,
      });
    }
  };

  const reader = new JsonlReader({
    maxLineBytes: limits.maxLineMb * 1024 * 1024,
    onLine: (line) => {
      const parsed = parsePiRecord(line);
      if (!parsed.ok) {
        if (++badRecords > MAX_BAD_RECORDS) {
          return tripOnce({
            code: "limit",
            limit: "records",
            message: `Pi's output had more than ${MAX_BAD_RECORDS} lines that are not Pi events.`,
          });
        }
        // A copy, not a slice: a slice would keep the whole (up to maxLineMb) line alive.
        timeline.sandbox("pi.invalid-record", {
          error: parsed.error,
          preview: Buffer.from(line.slice(0, 200)).toString(),
        });
        return;
      }
      collector.observe(parsed.event);
      timeline.pi(parsed.event);
      checkBudgets(parsed.event.type);
      if (parsed.event.type === "agent_settled" && !trip && !piSettled) {
        // Pi's last record: everything the host needs has arrived. Stopping the container now
        // skips Node's and the runtime's exit (~25 ms on runc, ~60 ms on runsc per call).
        piSettled = true;
        void container.kill().catch(() => {});
      }
    },
    // Reported as soon as the line passes the limit: the container is stopped, not read to the end.
    onOversizeLine: () =>
      tripOnce({
        code: "limit",
        limit: "line",
        message: `Pi wrote an event line over the ${limits.maxLineMb} MiB line limit.`,
      }),
  });

  const streams = await container.attach().catch((error: unknown) => {
    throw containerFailure(error, plan, "start");
  });
  // stdout and stderr share one budget: code in the sandbox can write to /proc/1/fd/1 and /2.
  const withinOutputLimit = (chunk: Buffer): boolean => {
    outputBytes += chunk.length;
    if (outputBytes <= maxOutput) return true;
    tripOnce({
      code: "limit",
      limit: "output",
      message: `The sandbox's output passed the ${limits.maxOutputMb} MiB output limit.`,
    });
    return false;
  };
  const stdoutDone = new Promise<void>((resolve) => {
    streams.stdout.on("data", (chunk: Buffer) => {
      if (withinOutputLimit(chunk) && !trip) reader.push(chunk);
    });
    streams.stdout.on("end", () => {
      reader.end();
      resolve();
    });
  });
  const stderrDone = new Promise<void>((resolve) => {
    streams.stderr.on("data", (chunk: Buffer) => {
      if (withinOutputLimit(chunk)) stderrTail = (stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
    });
    streams.stderr.on("end", resolve);
  });

  const onAbort = () => tripOnce({ code: "aborted", message: "The run was aborted." });
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(
    () =>
      tripOnce({
        code: "timeout",
        message: `The run did not finish within ${Math.round(run.timeoutMs / 100) / 10} s.`,
      }),
    run.timeoutMs,
  );

  try {
    await container.start().catch((error: unknown) => {
      throw containerFailure(error, plan, "start");
    });
    timeline.sandbox("container.started", { containerId: container.id });
    streams.stdin.end(run.prompt);
    if (signal?.aborted) onAbort();

    const exit = await container.wait();
    await Promise.race([Promise.all([stdoutDone, stderrDone]), delay(DRAIN_GRACE_MS)]);
    // Stopped by the host after Pi settled: Pi had finished, so the run's exit code is 0.
    const stoppedByHost = piSettled && exit.exitCode === 137 && !exit.oomKilled;
    const exitCode = stoppedByHost ? 0 : exit.exitCode;
    timeline.sandbox("container.exited", {
      exitCode: exit.exitCode,
      oomKilled: exit.oomKilled,
      ...(stoppedByHost ? { stoppedByHost } : {}),
    });

    const evidence = {
      exitCode,
      stderrTail: stderrTail.trim(),
      containerId: container.id,
      lastEvents: timeline.lastEvents(),
      durationMs: Date.now() - started,
      runId: plan.runId,
      usage: collector.usage,
    };
    if (trip?.code === "aborted") throw signal?.reason ?? new SandboxRunError("aborted", trip.message, evidence);
    if (trip?.code === "timeout") {
      throw new SandboxRunError("timeout", trip.message, {
        ...evidence,
        hint: "Raise the timeout (--timeout / timeoutMs) or give the agent a smaller task.",
      });
    }
    if (trip)
      throw new SandboxRunError("limit", trip.message, { ...evidence, limit: trip.limit, hint: limitHint(trip.limit) });
    const limitFromExit = limitOf({ exitCode, oomKilled: exit.oomKilled }, stderrTail);
    if (limitFromExit) {
      throw new SandboxRunError("limit", limitFromExit.message, {
        ...evidence,
        limit: limitFromExit.limit,
        hint: limitHint(limitFromExit.limit),
      });
    }

    const outcome = collector.outcome();
    if (exitCode !== 0 && outcome.kind !== "structured" && outcome.kind !== "text") {
      throw new SandboxRunError(
        "agent-crashed",
        `Pi exited with code ${exitCode}${crashReason(exitCode, plan.runtime)}.`,
        {
          ...evidence,
          hint: "See the stderr tail on this error (or --events) for what Pi reported.",
        },
      );
    }
    const details = {
      runId: plan.runId,
      model: plan.model,
      piVersion: ctx.piVersion,
      policy: plan.policyName,
      image: plan.image,
      containerId: container.id,
      exitCode,
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
        throw new SandboxRunError(
          "no-result",
          `The agent finished without a result: ${outcome.reason}${badRecords ? ` (${badRecords} unreadable records)` : ""}.`,
          {
            ...evidence,
            hint: plan.finalToolName
              ? "Ask for the result explicitly in the prompt, or use a stronger model."
              : "Check the events (--events) to see where the agent stopped.",
          },
        );
    }
    throw new Error(`unhandled outcome ${(outcome as { kind: string }).kind}`);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function limitOf(
  exit: { exitCode: number; oomKilled: boolean },
  stderr: string,
): { limit: string; message: string } | undefined {
  if (exit.oomKilled)
    return { limit: "memory", message: "The sandbox ran out of memory and was killed (memory limit)." };
  if (/ENOSPC|no space left on device/i.test(stderr)) {
    return {
      limit: "tmpfs",
      message: "The sandbox's temporary space (/tmp or home tmpfs) is full (tmpfs size limit).",
    };
  }
  if (/EAGAIN.*(spawn|fork)|fork: retry|Resource temporarily unavailable/i.test(stderr) && exit.exitCode !== 0) {
    return { limit: "pids", message: "The sandbox could not start more processes (pids limit)." };
  }
  return undefined;
}

function limitHint(limit?: string): string {
  switch (limit) {
    case "memory":
      return "Raise limits.memoryMb in a policy file, or make the task use less memory.";
    case "tmpfs":
      return "Raise limits.tmpMb / limits.homeMb in a policy file, or keep tool output smaller.";
    case "pids":
      return "Raise limits.pids in a policy file if the task really needs more processes.";
    case "output":
      return "Raise limits.maxOutputMb in a policy file, or keep tool output smaller.";
    case "turns":
      return "Raise the turn budget (--max-turns / maxTurns), or give the agent a smaller task.";
    case "cost":
      return "Raise the cost budget (--max-cost / maxCostUsd), or use a cheaper model.";
    case "line":
      return "Raise limits.maxLineMb in a policy file; a single event this large usually means runaway tool output.";
    case "records":
      return "Something in the sandbox wrote into Pi's event stream (e.g. to /proc/1/fd/1); treat this run's output as untrusted.";
    default:
      return "See the policy's limits (`sandbox-run policy show`).";
  }
}

function crashReason(code: number, runtime: string): string {
  if (code === 90) return " (the launcher could not prepare the sandbox)";
  // Pi never exits 2; Go's fatal errors do. Under runsc that is gVisor's own kernel failing,
  // usually because the pids limit also counts its threads (google/gvisor#2490).
  if (code === 2 && runtime === "runsc")
    return " (gVisor's sandbox kernel failed: under runsc the pids limit also counts gVisor's own threads; raise limits.pids)";
  if (code === 91) return " (the sandbox lost its connection to the host controller)";
  if (code === 137) return " (killed)";
  return "";
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
