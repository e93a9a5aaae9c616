// What the sandbox prints: Pi truncates a tool's flood before it reaches the model or the event
// stream, and bytes written straight into the container's stdout or stderr are charged to one
// output budget (maxOutputMb) and to the records limit. The host reads the container's output
// the same way whatever the workspace mode (the attach stream; copy mode's relay is an exec of its
// own), so these run in bind mode and over the remote engine's link (vitest.config.ts), not again
// in copy and warm mode, where each run prints hundreds of MB for nothing new.
import { describe, expect, it } from "vitest";
import { containersOfRuns } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

describe.concurrent("output limits", () => {
  it("a tool printing hundreds of MB: Pi truncates what the model and the event stream get", async () => {
    const outcome = await runHostile(
      server,
      [bash("yes 'hostile output line' | head -c 200M; echo; echo last-line"), finish()],
      {
        policy: hostilePolicy({ limits: { tmpMb: 256, memoryMb: 768 } }),
      },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    expect(printed).toContain("last-line");
    expect(printed).toMatch(/\[Showing lines \d+-\d+ of \d+/);
    expect(printed.length).toBeLessThan(100 * 1024);
    // No event carries the 200 MB, only Pi's truncated tail (the largest was ~1.2 MB in every
    // mode). How many updates Pi sends while the tool runs depends on the machine's speed (36 MB
    // of events in all in a 105 s run on a slow one), so the bound is per event; the total is
    // bounded by maxOutputMb, or the run had failed.
    const largest = Math.max(...outcome.events.map((e) => JSON.stringify(e).length));
    expect(largest).toBeLessThan(2 * 1024 * 1024);
  });

  // Code in the sandbox can write to the container's stdout (Pi's event stream) and stderr
  // through /proc/1/fd/1 and /2; both count against one output budget.
  it.each([
    ["the event stream (stdout)", `yes '{"type":"noise"}' | head -c 64M > /proc/1/fd/1`],
    ["the container's stderr", "yes 'stderr noise' | head -c 64M > /proc/1/fd/2"],
  ])("output written straight to %s past maxOutputMb fails the run naming the output limit", async (_where, flood) => {
    const outcome = await runHostile(server, [bash(`${flood}; echo written`), finish()], {
      policy: hostilePolicy({ limits: { maxOutputMb: 8 } }),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("output");
    expect(outcome.error?.shortMessage).toMatch(/8 MiB output limit/);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("lines that are not Pi events, written into the stream, stop the run naming the records limit", async () => {
    const outcome = await runHostile(
      server,
      [bash("yes 'not a Pi event' | head -c 64M > /proc/1/fd/1; echo written"), finish()],
      {
        policy: hostilePolicy({ limits: { maxOutputMb: 256 } }),
      },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("records");
    expect(outcome.error?.shortMessage).toMatch(/more than 20 lines that are not Pi events/);
    expect(outcome.error?.hint).toMatch(/\/proc\/1\/fd\/1/);
    expect(outcome.events.filter((e) => e.type === "pi.invalid-record")).toHaveLength(20);
  });
});
