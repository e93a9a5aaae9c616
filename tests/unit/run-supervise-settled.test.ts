// superviseRun over a stand-in container that streams a real Pi text run (tests/fixtures), then
// takes its time to stop, as a gVisor sandbox that ran a few hundred processes does on a loaded
// host (seconds, once minutes). Pi settled before the run's deadline, so the run's result stands:
// the deadline passing while the host stops the container is not a timeout (review, session 32:
// exit 124 and the result dropped, on runc too when the answer came just before the deadline).
import fs from "node:fs";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { EngineContainer } from "../../src/engine/engine.js";
import type { SandboxRunError } from "../../src/errors.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { OutputBudget } from "../../src/run/output-budget.js";
import { buildRunPlan } from "../../src/run/plan/build-run-plan.js";
import { RunTimeline } from "../../src/run/run-events.js";
import { RunTrip } from "../../src/run/run-trip.js";
import { superviseRun } from "../../src/run/supervise-run.js";

const PI_TEXT_RUN = fs.readFileSync(new URL("../fixtures/pi-text-run.jsonl", import.meta.url));
const lastAssistantText = (() => {
  const events = PI_TEXT_RUN.toString("utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const end = events.filter((e) => e.type === "message_end" && e.message.role === "assistant").at(-1);
  return end.message.content.map((c: { text: string }) => c.text).join("");
})();

/** A container whose Pi writes the fixture at once, and whose stop takes `stopMs`. */
function slowToStopContainer(stopMs: number): EngineContainer & { kills: number } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let exited: (code: number) => void = () => {};
  const exit = new Promise<number>((resolve) => (exited = resolve));
  const container = {
    id: "c0ffee",
    kills: 0,
    attach: async () => ({ stdin: new PassThrough(), stdout, stderr }),
    start: async () => {
      stdout.write(PI_TEXT_RUN);
    },
    wait: async () => ({ exitCode: await exit, oomKilled: false }),
    kill: async () => {
      container.kills++;
      await new Promise((resolve) => setTimeout(resolve, stopMs));
      stdout.end();
      stderr.end();
      exited(137);
    },
  };
  return container as unknown as EngineContainer & { kills: number };
}

function planOf() {
  return buildRunPlan({
    runId: "settled",
    image: "i",
    policy: loadPolicy("read-only"),
    model: "scripted/x",
    cwd: "/work/p",
    writableRoots: [],
    readOnlyMounts: [],
    runDir: "/tmp/d",
    caller: { uid: 1000, gid: 1000 },
    sandboxEnv: {},
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 1000,
    owner: { pid: 1, host: "h" },
    now: new Date(0),
  });
}

const evidence = {
  toolCall: () => undefined,
  callsOf: () => [],
  lastReply: () => ({ text: lastAssistantText, toolCallCount: 0, complete: true, stopReason: "stop" }),
  failureSinceLastReply: () => undefined,
};

describe("superviseRun: a run whose Pi settled in time", () => {
  it("keeps its result when the container takes longer to stop than the time the run had left", async () => {
    const plan = planOf();
    const trip = new RunTrip();
    const events: string[] = [];
    const timeline = new RunTimeline(plan.runId, [(e) => events.push(e.type)]);
    const container = slowToStopContainer(1_500);
    const result = await superviseRun({
      plan,
      prompt: "Say hello.",
      timeoutMs: 1_000,
      budgets: {},
      container,
      timeline,
      trip,
      budget: new OutputBudget(plan.limits.maxOutputMb, trip),
      evidence,
      startedAt: performance.now(),
    });
    expect(result.result).toBe(lastAssistantText);
    expect(result.exitCode).toBe(0);
    expect(trip.tripped).toBeUndefined();
    expect(events).not.toContain("limit.tripped");
    expect(container.kills).toBe(1);
  });

  it("still times out while the host reads the workspace back after Pi settled (copy mode): the sandbox can stall that read (review, session 32)", async () => {
    const plan = planOf();
    const trip = new RunTrip();
    const container = slowToStopContainer(10);
    const failure = await superviseRun({
      plan,
      prompt: "Say hello.",
      timeoutMs: 1_000,
      budgets: {},
      container,
      timeline: new RunTimeline(plan.runId, []),
      trip,
      budget: new OutputBudget(plan.limits.maxOutputMb, trip),
      evidence,
      startedAt: performance.now(),
      // A copy-out that never ends (the relay stopped by the sandbox).
      companion: { afterStart: async () => {}, beforeStop: () => new Promise(() => {}) },
    }).then(
      () => undefined,
      (error: unknown) => error as SandboxRunError,
    );
    expect(failure?.code).toBe("timeout");
    expect(container.kills).toBe(1);
  });
});
