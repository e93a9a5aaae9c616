// One batch task against a stand-in agent: what it says beside the progress. A warm pool that could
// not start makes every task start cold; the batch says so once (review, session 33: it said nothing).
import { describe, expect, it } from "vitest";
import { type BatchTaskContext, runBatchTask } from "../../src/cli/batch-task-run.js";
import type { ContainerPiAgent, RunDetails, RunEvent } from "../../src/index.js";

function agentEmitting(events: Array<Pick<RunEvent, "type" | "data">>): ContainerPiAgent {
  return {
    runDetailed: async (_prompt: string, options: { onEvent?: (e: RunEvent) => void }) => {
      for (const [seq, e] of events.entries())
        options.onEvent?.({ runId: "r", seq, time: seq, source: "sandbox", ...e } as RunEvent);
      return {
        result: "done",
        runId: "r",
        warm: false,
        changedFiles: { created: [], modified: [], deleted: [] },
      } as unknown as RunDetails;
    },
  } as unknown as ContainerPiAgent;
}

function context(agent: ContainerPiAgent, notes: string[], poolDown?: (reason: string) => void): BatchTaskContext {
  return {
    agent,
    signal: new AbortController().signal,
    stoppedExit: () => undefined,
    quiet: false,
    io: { stdout: () => {}, stderr: () => {}, readStdin: async () => undefined, env: {}, stderrIsTty: false },
    note: (text) => void notes.push(text),
    ...(poolDown ? { poolDown } : {}),
  };
}

describe("a batch task", () => {
  it("tells the batch when it started cold because the warm pool could not start, and not for a pool merely busy", async () => {
    const said: string[] = [];
    const task = { id: "t1", line: 1, prompt: "p", options: {} };
    const down = agentEmitting([
      { type: "warm.miss", data: { reason: "the warm pool could not start: image x is linux/arm64" } },
    ]);
    expect(
      await runBatchTask(
        task,
        context(down, [], (reason) => said.push(reason)),
      ),
    ).toBe(true);
    expect(said).toEqual(["the warm pool could not start: image x is linux/arm64"]);
    const busy = agentEmitting([
      { type: "warm.miss", data: { reason: "every one of the pool's 2 warm sandbox(es) is taken" } },
    ]);
    await runBatchTask(
      task,
      context(busy, [], (reason) => said.push(reason)),
    );
    expect(said).toHaveLength(1);
  });
});
