// Two calls of one process over the same workspace (docs/security.md W8): the later waits until
// the earlier run is over (its container gone, its tree judged and handed back), so each sandbox
// holds the tree alone and the host never judges or writes it while another sandbox is live.
// Before, both ran at once: the first run's hand-back took the tree back from under the second
// sandbox, whose writes then failed unseen. Two sandbox-run processes of one user are kept apart too.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import type { RunEvent } from "../../src/run/run-events.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  bashThenFinal,
  builtCli,
  checkNoContainersLeftAfterEach,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

describe.skipIf(!dockerAvailable())("runs over one workspace", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  const runs = checkNoContainersLeftAfterEach();

  beforeAll(async () => {
    server = await startModel({
      // Done at once; its hand-back would take the tree back while the other sandbox is live.
      quick: bashThenFinal("echo quick > quick.txt", { done: "quick" }),
      // Writes late: at once beside the quick run, the write would come after that hand-back.
      slow: bashThenFinal("sleep 8; ls > seen-by-slow.txt; echo slow > slow.txt", { done: "slow" }),
    });
    agent = new ContainerPiAgent({ models: modelsFor(server, ["quick", "slow"]), onEvent: runs.onEvent });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("the later call waits for the earlier run, says for which, and both runs' changes arrive", async () => {
    const ws = makeWorkspace({ "keep.txt": "keep\n" });
    const events: RunEvent[] = [];
    let slowStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => (slowStarted = resolve));
    const onEvent = (e: RunEvent) => {
      events.push(e);
      if (e.type === "container.started") slowStarted();
    };
    const slow = agent.runDetailed("Slow.", { cwd: ws, model: "scripted/slow", schema: { type: "object" }, onEvent });
    // The quick call comes while the slow run's sandbox is up; it records its run.
    await started;
    const record = path.join(makeWorkspace(), "record");
    const quick = agent.runDetailed("Quick.", {
      cwd: ws,
      model: "scripted/quick",
      schema: { type: "object" },
      onEvent,
      record,
    });
    const [s, q] = await Promise.all([slow, quick]);
    expect(s.result).toEqual({ done: "slow" });
    expect(q.result).toEqual({ done: "quick" });
    // Both runs' changes arrived: the slow sandbox kept the tree to itself until it was done.
    expect(fs.readFileSync(path.join(ws, "slow.txt"), "utf8")).toBe("slow\n");
    expect(fs.readFileSync(path.join(ws, "quick.txt"), "utf8")).toBe("quick\n");
    expect(fs.readFileSync(path.join(ws, "seen-by-slow.txt"), "utf8")).not.toContain("quick.txt");
    // The quick call waited for the slow run and named it.
    const waited = events.filter((e) => e.type === "workspace.waiting");
    expect(waited.map((e) => [e.runId, e.data])).toEqual([[q.runId, { heldBy: s.runId, tree: ws }]]);
    // The quick run's container was made only after the slow run's was gone.
    const at = (type: string, runId: string) => events.findIndex((e) => e.type === type && e.runId === runId);
    expect(at("container.created", q.runId)).toBeGreaterThan(at("container.exited", s.runId));
    // The record's changes are the quick run's alone: the workspace before and after it were taken
    // while the quick run held the tree (before, the slow run's files showed in it as the quick's).
    const patch = fs.readFileSync(path.join(record, "changes.patch"), "utf8");
    expect(patch).toContain("quick.txt");
    expect(patch).not.toMatch(/slow\.txt|seen-by-slow/);
    fs.rmSync(ws, { recursive: true, force: true });
  });

  it("a call aborted while it waits starts nothing and rejects as aborted; the run it waited for is untouched", async () => {
    const ws = makeWorkspace({ "keep.txt": "keep\n" });
    const events: RunEvent[] = [];
    const onEvent = (e: RunEvent) => void events.push(e);
    const slow = agent.runDetailed("Slow.", { cwd: ws, model: "scripted/slow", schema: { type: "object" }, onEvent });
    await expect.poll(() => events.some((e) => e.type === "container.started"), { timeout: 60_000 }).toBe(true);
    const stop = new AbortController();
    const waiting = agent
      .runDetailed("Quick.", {
        cwd: ws,
        model: "scripted/quick",
        schema: { type: "object" },
        onEvent,
        signal: stop.signal,
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    await expect.poll(() => events.some((e) => e.type === "workspace.waiting"), { timeout: 60_000 }).toBe(true);
    const waiter = events.find((e) => e.type === "workspace.waiting")!.runId;
    stop.abort(new Error("the caller gave up"));
    const error = await waiting;
    expect(isSandboxRunError(error) && error.code).toBe("aborted");
    expect((await slow).result).toEqual({ done: "slow" });
    expect(events.filter((e) => e.runId === waiter).map((e) => e.type)).toEqual(["workspace.waiting"]);
    expect(fs.existsSync(path.join(ws, "quick.txt"))).toBe(false);
    expect(fs.readFileSync(path.join(ws, "slow.txt"), "utf8")).toBe("slow\n");
    fs.rmSync(ws, { recursive: true, force: true });
  });

  it("two sandbox-run processes on one workspace: the later one waits for the earlier run (its progress says so), and both changes arrive", async () => {
    const ws = makeWorkspace({ "keep.txt": "keep\n" });
    const models = path.join(path.dirname(ws), `${path.basename(ws)}-models.json`);
    fs.writeFileSync(models, JSON.stringify(modelsFor(server, ["quick", "slow"])));
    const cli = (model: string) => {
      const child = spawn(process.execPath, [builtCli, "--models", models, "--model", model, "--cwd", ws, "Go."], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      const status = new Promise<number | null>((resolve) => child.on("close", resolve));
      return { stderr: () => stderr, status };
    };
    const slow = cli("scripted/slow");
    await expect.poll(() => slow.stderr(), { timeout: 120_000, interval: 100 }).toContain("sandbox started");
    const quick = cli("scripted/quick");
    expect(await quick.status, quick.stderr()).toBe(0);
    expect(await slow.status, slow.stderr()).toBe(0);
    expect(fs.readFileSync(path.join(ws, "slow.txt"), "utf8")).toBe("slow\n");
    expect(fs.readFileSync(path.join(ws, "quick.txt"), "utf8")).toBe("quick\n");
    expect(fs.readFileSync(path.join(ws, "seen-by-slow.txt"), "utf8")).not.toContain("quick.txt");
    expect(quick.stderr()).toMatch(/waiting: run [0-9a-f]{12} holds .*; this run starts once that one is over/);
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(models, { force: true });
  });
});
