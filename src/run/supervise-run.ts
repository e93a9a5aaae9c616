// The live part of a run: attach to the container, start it, hand Pi the prompt, read its output as
// it arrives (pi-stream.ts), stop the container when anything trips (run-trip.ts) or Pi settles, then
// decide the outcome from what the host saw (decide-outcome.ts).
import type { ContainerStreams, EngineContainer } from "../engine/engine.js";
import { SandboxRunError, type SandboxRunErrorDetails } from "../errors.js";
import type { ModelWait } from "../gateway/model-gateway.js";
import { ResultCollector, type Usage } from "../pi/result-collector.js";
import type { RunPlan } from "../sandbox-contract.js";
import { type Budgets, budgetTrip } from "./budget-tracker.js";
import type { ModelEvidence } from "./confirm-outcome.js";
import { containerFailure } from "./container-failure.js";
import { decideOutcome, type OutcomeFacts } from "./decide-outcome.js";
import type { OutputBudget } from "./output-budget.js";
import { PiStream } from "./pi-stream.js";
import type { ResultValidator } from "./result-validator.js";
import type { RunTimeline } from "./run-events.js";
import type { RunTrip } from "./run-trip.js";
import { decideInWorker } from "./validate-in-worker.js";

/** How long to wait for the attach stream to drain after the container exited. */
const DRAIN_GRACE_MS = 2_000;

/**
 * Work done beside a run while its container runs (copy mode: fill the workspace and start the
 * relay once it started; read the workspace back once Pi settled, before the host stops it). A
 * rejection stops the container and fails the run with that error, unless a limit, timeout or
 * abort decided the run already.
 */
export interface RunCompanion {
  afterStart(): Promise<void>;
  beforeStop(): Promise<void>;
  /** Calls `listener` if the companion's link to the sandbox misbehaves while the run goes on (copy mode's relay): the run stops. */
  onFailure?(listener: (error: unknown) => void): void;
}

interface SupervisedRun {
  plan: RunPlan;
  prompt: string;
  timeoutMs: number;
  budgets: Budgets;
  validator?: ResultValidator;
  container: EngineContainer;
  timeline: RunTimeline;
  trip: RunTrip;
  /** The run's output budget, shared with the host events the sandbox causes. */
  budget: OutputBudget;
  /** What the model said in Pi's conversation (the gateway's ledger): the result is taken from it. */
  evidence: ModelEvidence;
  /** The gateway's open requests, so a timeout can say the run was waiting on the model. */
  modelWait?: () => ModelWait | undefined;
  signal?: AbortSignal;
  /** performance clock of the run's start, for durations. */
  startedAt: number;
  companion?: RunCompanion;
  /**
   * A warm sandbox: its container runs already and its streams were attached before it started;
   * the companion's afterStart is its claim.
   */
  attached?: ContainerStreams;
}

interface SupervisedResult {
  result: unknown;
  exitCode: number;
  turns: number;
  toolCalls: number;
  usage: Usage;
}

export async function superviseRun(run: SupervisedRun): Promise<SupervisedResult> {
  const { plan, container, timeline, trip, signal } = run;
  const collector = new ResultCollector({ finalToolName: plan.finalToolName });
  let piSettled = false;
  let timer: NodeJS.Timeout | undefined;
  let companionFailure: { error: unknown } | undefined;
  const companionFailed = (error: unknown) => {
    companionFailure ??= { error };
    void container.kill().catch(() => {});
  };

  trip.onTrip((t) => {
    timeline.sandbox("limit.tripped", { ...t });
    void container.kill().catch(() => {});
  });
  const stream = new PiStream(plan.limits, trip, run.budget, {
    onEvent: (event) => {
      collector.observe(event);
      timeline.pi(event);
      // A tool the limit killed has ended: what only the running container can say is read now.
      if (event.type === "tool_execution_end") container.sampleCounters?.();
      const over = budgetTrip(run.budgets, event.type, collector.turns, collector.usage.cost);
      if (over) trip.fire(over);
      if (event.type === "agent_settled" && !trip.tripped && !piSettled) {
        // Pi's last record: everything the host needs has arrived. Stopping the container now
        // skips Node's and the runtime's exit (~25 ms on runc, ~60 ms on runsc per call). Once the
        // host has all it needs (copy mode: the workspace read back, which the deadline still
        // bounds, as the sandbox can stall it) the deadline is over: a stop that takes seconds
        // (gVisor) must not make a run that finished in time a timeout (review, session 32: exit
        // 124, the result dropped).
        piSettled = true;
        const stop = () => {
          clearTimeout(timer);
          return container.kill().catch(() => {});
        };
        if (run.companion) void run.companion.beforeStop().then(stop, companionFailed);
        else void stop();
      }
    },
    onInvalidRecord: (error, preview) => timeline.sandbox("pi.invalid-record", { error, preview }),
  });

  const streams =
    run.attached ??
    (await container.attach(signal).catch((error: unknown) => {
      throw containerFailure(error, plan, "start");
    }));
  const drained = drain(streams, stream);

  const onAbort = () => trip.fire({ code: "aborted", message: "The run was aborted." });
  signal?.addEventListener("abort", onAbort, { once: true });
  timer = setTimeout(() => {
    const wait = run.modelWait?.();
    trip.fire({
      code: "timeout",
      message: timeoutMessage(run.timeoutMs, wait),
      ...(wait ? { waitingOnModel: true } : {}),
    });
  }, run.timeoutMs);
  try {
    if (!run.attached) {
      await container.start(signal).catch((error: unknown) => {
        throw containerFailure(error, plan, "start");
      });
      timeline.sandbox("container.started", { containerId: container.id });
    }
    run.companion?.onFailure?.(companionFailed);
    run.companion?.afterStart().catch(companionFailed);
    streams.stdin.end(run.prompt);
    if (signal?.aborted) onAbort();

    const exit = await container.wait();
    await Promise.race([drained, delay(DRAIN_GRACE_MS)]);
    // The invalid-result watch's verdicts on the model's replies, which may still trip the run: its
    // checks run in the run's check worker (validate-in-worker.ts), bounded each, in order.
    await run.validator?.worker?.idle();
    // Stopped by the host after Pi settled: Pi had finished, so the run's exit code is 0.
    const stoppedByHost = piSettled && exit.exitCode === 137 && !exit.oomKilled;
    const exitCode = stoppedByHost ? 0 : exit.exitCode;
    timeline.sandbox("container.exited", {
      exitCode: exit.exitCode,
      oomKilled: exit.oomKilled,
      ...(stoppedByHost ? { stoppedByHost } : {}),
    });

    if (companionFailure && !trip.tripped) {
      const error = companionFailure.error;
      if (error instanceof SandboxRunError) {
        error.containerId ??= container.id;
        error.runId ??= plan.runId;
        error.lastEvents ??= timeline.lastEvents();
      }
      throw error;
    }
    // From the outcome on, an abort no longer stops the run (its result stands, README): not even
    // one from a listener of the `run.result` event itself, which reported a trip that was none.
    signal?.removeEventListener("abort", onAbort);
    // Nor does the timer: the outcome is decided from what happened so far (the checks of the
    // result, in the worker, take time of their own).
    clearTimeout(timer);
    return await settle(run, collector, stream, { exitCode, oomKilled: exit.oomKilled });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** What a timeout says: where the time went, when the host knows (a model request still open). */
export function timeoutMessage(timeoutMs: number, wait: ModelWait | undefined): string {
  // Below a second in ms: a 1 ms timeout read "within 0 s" (review, session 34).
  const span = (ms: number) => (ms < 1000 ? `${Math.max(1, Math.round(ms))} ms` : `${Math.round(ms / 100) / 10} s`);
  const base = `The run did not finish within ${span(timeoutMs)}`;
  if (!wait) return `${base}.`;
  const more = wait.requests > 1 ? ` (and ${wait.requests - 1} more)` : "";
  return `${base}: it was waiting for the model's reply (a request to ${wait.upstream} open for ${span(wait.forMs)}${more}).`;
}

/** Pi is done and the container gone: the outcome from what arrived (decide-outcome.ts), as a result or a failure. */
async function settle(
  run: SupervisedRun,
  collector: ResultCollector,
  stream: PiStream,
  exit: { exitCode: number; oomKilled: boolean },
): Promise<SupervisedResult> {
  const { plan, container, timeline, trip, signal } = run;
  const exitCode = exit.exitCode;
  const evidence: SandboxRunErrorDetails = {
    exitCode,
    stderrTail: stream.stderrTail,
    containerId: container.id,
    lastEvents: timeline.lastEvents(),
    durationMs: Date.now() - run.startedAt,
    runId: plan.runId,
    usage: collector.usage,
  };
  const facts: OutcomeFacts = {
    trip: trip.tripped,
    abortReason: signal?.aborted ? signal.reason : undefined,
    exit,
    stderrTail: stream.stderrTail,
    outcome: collector.outcome(),
    badRecords: stream.badRecords,
    tooLargeRecords: stream.tooLargeRecords,
    runtime: plan.runtime,
    pids: plan.limits.pids,
    validator: run.validator,
    schema: plan.schema,
    finalToolName: plan.finalToolName,
    evidence: run.evidence,
    scrub: (value) => timeline.scrub(value),
  };
  // Schema mode: the model's final call is prepared and the result validated in the run's check
  // worker, with a deadline and a memory cap (validate-in-worker.ts), not on this thread (but a
  // plain schema's checks of small values, which it answers here).
  const worker = run.validator?.worker;
  const decision = worker
    ? await decideInWorker(worker, (checks) => decideOutcome({ ...facts, checks }, evidence), evidence)
    : decideOutcome(facts, evidence);
  if (!decision.ok) {
    const error = decision.error as SandboxRunError;
    // The host's own record that the sandbox's output and the model disagreed, with both sides.
    if (error?.code === "contradiction") timeline.sandbox("result.contradicted", { message: error.shortMessage });
    throw decision.error;
  }
  timeline.sandbox("run.result", { kind: decision.kind });
  return {
    result: decision.result,
    exitCode,
    turns: collector.turns,
    toolCalls: collector.toolCalls,
    usage: collector.usage,
  };
}

/** Both of the container's streams into the Pi stream reader; resolves when both ended. */
function drain(
  streams: { stdout: NodeJS.ReadableStream; stderr: NodeJS.ReadableStream },
  stream: PiStream,
): Promise<unknown> {
  return Promise.all([
    new Promise<void>((resolve) => {
      streams.stdout.on("data", (chunk: Buffer) => stream.stdout(chunk));
      streams.stdout.on("end", () => {
        stream.endStdout();
        resolve();
      });
    }),
    new Promise<void>((resolve) => {
      streams.stderr.on("data", (chunk: Buffer) => stream.stderr(chunk));
      streams.stderr.on("end", resolve);
    }),
  ]);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
