// A run's record is moved into place while the run still holds its trees and the record's folder
// (docs/security.md W8): given back earlier, the next run over a tree holding that folder had its
// sandbox live, and its walks going, while the record was moved there.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { SandboxRunError } from "../../src/errors.js";
import { openRunRecord } from "../../src/run/open-run-record.js";
import { holdTrees } from "../../src/run/tree-holds.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir, tree } = tempTrees("sandbox-run-record-hold-");

/** An engine that refuses at once: the run holds its trees, then fails before any sandbox exists. */
const deadEngine = {
  name: "dead",
  ping: async () => {
    throw new SandboxRunError("usage", "no engine in a unit test");
  },
} as unknown as Engine;

const models = {
  providers: { p: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] } },
};

describe("a run's record and its hold on the trees", () => {
  it("a run over the workspace or over the record's folder waits until the record is in place", async () => {
    const ws = tree({ "a.txt": "a\n" });
    const outside = dir();
    const recordDir = path.join(outside, "record");
    const agent = new ContainerPiAgent({ engine: deadEngine, models, hostEnv: { PATH: "/usr/bin:/bin" } });
    const planned = agent.plan("do it", { model: "p/m", cwd: ws });
    const recorder = await openRunRecord(recordDir, planned);
    await expect(agent.runPlanned(planned, { recorder })).rejects.toThrow(/no engine in a unit test/);

    // The run is over, its record not yet moved into place: the next runs wait.
    const started: string[] = [];
    const next = (runId: string, tree: string) =>
      holdTrees({ runId, writable: [tree], readOnly: [] }).then((hold) => {
        started.push(runId);
        return hold;
      });
    const overWorkspace = next("over-the-workspace", ws);
    const overRecord = next("over-the-record-folder", outside);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(started).toEqual([]);

    const notes = await recorder.finish({
      ok: false,
      error: { code: "usage", message: "no engine in a unit test" },
      meta: { runId: planned.plan.runId },
    });
    expect(notes).toEqual([]);
    expect(fs.existsSync(path.join(recordDir, "meta.json"))).toBe(true);
    // Once it is there, they start, in the order they came.
    const holds = await Promise.all([overWorkspace, overRecord]);
    expect(started).toEqual(["over-the-workspace", "over-the-record-folder"]);
    for (const hold of holds) hold.release();
  });

  it("a hold handed over after the record is finished is given back at once: later runs do not wait for ever", async () => {
    const ws = tree({ "a.txt": "a\n" });
    const agent = new ContainerPiAgent({ engine: deadEngine, models, hostEnv: { PATH: "/usr/bin:/bin" } });
    const planned = agent.plan("do it", { model: "p/m", cwd: ws });
    const recorder = await openRunRecord(path.join(dir(), "record"), planned);
    await recorder.abandon();
    // A run still unwinding hands its hold over now.
    recorder.keepHold(await holdTrees({ runId: "late", writable: [ws], readOnly: [] }));
    const next = holdTrees({ runId: "next", writable: [ws], readOnly: [] });
    const started = await Promise.race([
      next.then((hold) => {
        hold.release();
        return true;
      }),
      new Promise((resolve) => setTimeout(() => resolve(false), 2_000)),
    ]);
    expect(started).toBe(true);
  });
});

describe("an agent after close()", () => {
  it("refuses a call with a usage error (review, session 28: a warm agent's call ran cold instead)", async () => {
    const agent = new ContainerPiAgent({ engine: deadEngine, models, hostEnv: { PATH: "/usr/bin:/bin" } });
    await expect(agent.run("do it", { model: "p/m", cwd: tree({ "a.txt": "a\n" }) })).rejects.toThrow(
      /no engine in a unit test/,
    );
    await agent.close();
    const refused = await agent.run("do it", { model: "p/m", cwd: tree({ "a.txt": "a\n" }) }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(SandboxRunError);
    expect((refused as SandboxRunError).code).toBe("usage");
    expect((refused as SandboxRunError).message).toMatch(/This agent was closed/);
  });
});
