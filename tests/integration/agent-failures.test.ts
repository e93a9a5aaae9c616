// Every way a run can fail on the real engine ends in one SandboxRunError (or the caller's
// abort reason) and leaves no container behind: abort, timeout, an unreachable or failing
// provider, and bad input that must fail before any container exists.

import { getEventListeners } from "node:events";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import type { ContainerSpec } from "../../src/engine/engine.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { runDirsParent } from "../../src/run/run-dirs.js";
import type { RunEvent } from "../../src/run/run-events.js";
import { LABEL_MANAGED, LABEL_OWNER_PID } from "../../src/sandbox-contract.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  checkNoContainersLeftAfterEach,
  containersOfRuns,
  docker,
  dockerAvailable,
  eventLog,
  makeWorkspace,
  modelsFor,
  SECRET_KEY,
  startModel,
} from "../support/harness.js";

const sleepThenText = [
  { toolCalls: [{ name: "bash", arguments: { command: "sleep 30; echo woke" } }] },
  { text: "finished" },
];

/** Containers created by this test file's process (the owner-pid label), running or not. */
async function ourContainers(): Promise<string[]> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [`${LABEL_MANAGED}=true`, `${LABEL_OWNER_PID}=${process.pid}`] },
  });
  return list.map((c) => c.Id);
}

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected the run to fail, it returned ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

function asRunError(error: unknown): SandboxRunError {
  expect(isSandboxRunError(error)).toBe(true);
  return error as SandboxRunError;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.skipIf(!dockerAvailable())("run failures", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let ws: string;
  const runs = checkNoContainersLeftAfterEach();

  beforeAll(async () => {
    server = await startModel({
      abort: sleepThenText,
      timeout: sleepThenText,
      http500: [{ httpStatus: 500, body: "upstream exploded: quota exceeded for project demo" }],
      never: [{ text: "should not be asked" }],
      quick: [{ text: "done" }],
      touch: [{ toolCalls: [{ name: "bash", arguments: { command: "touch made-here" } }] }, { text: "done" }],
    });
    agent = new ContainerPiAgent({
      models: modelsFor(server, ["abort", "timeout", "http500", "never", "quick", "touch"]),
      onEvent: runs.onEvent,
    });
    ws = makeWorkspace({ "a.txt": "a\n" });
  });

  afterAll(async () => {
    await server?.close();
    if (ws) fs.rmSync(ws, { recursive: true, force: true });
  });

  it("abort mid-run (while bash sleeps): rejects with a SandboxRunError (aborted, the signal's reason as cause) and removes the container", async () => {
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const log = eventLog();
    const error = await failureOf(
      agent.run("Sleep.", {
        cwd: ws,
        model: "scripted/abort",
        signal: controller.signal,
        onEvent: (event) => {
          log.onEvent(event);
          if (event.type === "tool_execution_start") controller.abort(reason);
        },
      }),
    );
    expect(asRunError(error).code).toBe("aborted");
    expect(asRunError(error).cause).toBe(reason);
    expect(log.ofType("tool_execution_end")).toEqual([]); // the sleep never finished
    expect(log.ofType("limit.tripped")[0]?.data).toMatchObject({ code: "aborted" });
    expect(log.ofType("container.removed")).toHaveLength(1);
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("an abort from the run.result event's own listener: the call resolves with its result, and no trip is reported", async () => {
    const controller = new AbortController();
    const log = eventLog();
    const result = await agent.run("Say done.", {
      cwd: ws,
      model: "scripted/quick",
      signal: controller.signal,
      onEvent: (event) => {
        log.onEvent(event);
        if (event.type === "run.result") controller.abort(new Error("the service stops"));
      },
    });
    expect(result).toBe("done");
    // Before, the abort still reached the run's trip: a limit.tripped (aborted) for a call that succeeded.
    expect(log.ofType("limit.tripped")).toEqual([]);
    expect(log.ofType("run.failed")).toEqual([]);
  });

  it("an abort while the engine makes the container (the client's request dropped, the container made all the same) leaves no container behind", async () => {
    const controller = new AbortController();
    const reason = new Error("service cancelled the task");
    // The race a service cancelling tasks hits at random (review, session 28): the engine has made
    // the container when the caller aborts, and a request given the signal drops the answer with its id.
    class AbortedWhileCreating extends DockerEngine {
      override async createContainer(spec: ContainerSpec, signal?: AbortSignal) {
        const made = await super.createContainer(spec);
        controller.abort(reason);
        signal?.throwIfAborted();
        return made;
      }
    }
    const racing = new ContainerPiAgent({
      models: modelsFor(server, ["quick"]),
      engine: new AbortedWhileCreating(),
      onEvent: runs.onEvent,
    });
    const log = eventLog();
    const error = asRunError(
      await failureOf(
        racing.run("Say done.", { cwd: ws, model: "scripted/quick", signal: controller.signal, onEvent: log.onEvent }),
      ),
    );
    expect(error.code).toBe("aborted");
    expect(error.cause).toBe(reason);
    expect(log.ofType("container.created")).toHaveLength(1);
    // The event (and a record) says what the error says.
    expect(log.ofType("run.failed")[0]?.data).toMatchObject({ code: "aborted" });
    expect(await containersOfRuns(log.runIds())).toEqual([]);
    expect(await ourContainers()).toEqual([]);
    // A container that never started wrote nothing: its run folder goes with the run (review,
    // session 30: its watch state was kept as "never judged", and the next process refused the
    // workspace, telling the user to run `gc`).
    expect(log.runIds().map((id) => fs.existsSync(path.join(runDirsParent(), `run-${id}`)))).toEqual([false]);
  });

  it("one long-lived signal passed to every call (a service's shutdown signal) holds no listener of a finished call", async () => {
    const shutdown = new AbortController();
    for (let i = 0; i < 3; i++) {
      const result = await agent.run("Say done.", { cwd: ws, model: "scripted/quick", signal: shutdown.signal });
      expect(result).toBe("done");
      expect(getEventListeners(shutdown.signal, "abort"), `after call ${i + 1}`).toHaveLength(0);
    }
  });

  // Review, session 34: a call read its options after an await, and a caller reusing one object
  // (`opts.cwd = next` in a loop) ran both calls in the last folder, each reporting success.
  it("a call's options are read when the call is made: one object reused for the next call changes neither", async () => {
    const first = makeWorkspace({ "a.txt": "a\n" });
    const second = makeWorkspace({ "b.txt": "b\n" });
    try {
      const options: { cwd?: string; model: string } = { model: "scripted/touch" };
      const calls: Promise<unknown>[] = [];
      for (const dir of [first, second]) {
        options.cwd = dir;
        calls.push(agent.runDetailed("Touch a file.", options));
      }
      await Promise.all(calls);
      expect(fs.existsSync(path.join(first, "made-here"))).toBe(true);
      expect(fs.existsSync(path.join(second, "made-here"))).toBe(true);
    } finally {
      fs.rmSync(first, { recursive: true, force: true });
      fs.rmSync(second, { recursive: true, force: true });
    }
  });

  it("timeout while bash sleeps: code timeout, container removed", async () => {
    const log = eventLog();
    const error = asRunError(
      await failureOf(
        agent.run("Sleep.", { cwd: ws, model: "scripted/timeout", timeoutMs: 4_000, onEvent: log.onEvent }),
      ),
    );
    expect(error.code).toBe("timeout");
    expect(error.timedOut).toBe(true);
    expect(error.shortMessage).toContain("did not finish within 4 s");
    expect(error.hint).toContain("timeout");
    expect(log.ofType("tool_execution_end")).toEqual([]);
    expect(log.ofType("limit.tripped")[0]?.data).toMatchObject({ code: "timeout" });
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("model unreachable (models.json points at a closed port): code model-error naming the cause", async () => {
    const port = await closedPort();
    const unreachable = new ContainerPiAgent({
      models: {
        providers: {
          dead: {
            baseUrl: `http://127.0.0.1:${port}/v1`,
            api: "openai-completions",
            apiKey: SECRET_KEY,
            models: [{ id: "m" }],
          },
        },
      },
      onEvent: runs.onEvent,
    });
    const error = asRunError(await failureOf(unreachable.run("Hello?", { cwd: ws, model: "dead/m" })));
    expect(error.code).toBe("model-error");
    expect(error.shortMessage).toMatch(/^The model provider failed: /);
    expect(error.shortMessage).toContain("ECONNREFUSED");
    expect(error.shortMessage).toContain(`127.0.0.1:${port}`);
    expect(error.hint).toContain("sandbox-run doctor");
  });

  it("an upstream answering 500: code model-error with the provider's message", async () => {
    const error = asRunError(await failureOf(agent.run("Hello?", { cwd: ws, model: "scripted/http500" })));
    expect(error.code).toBe("model-error");
    expect(error.shortMessage).toContain("500");
    expect(error.shortMessage).toContain("upstream exploded: quota exceeded for project demo");
    expect(error.exitCode).toBe(0); // Pi itself exits 0; the failure is read from its events
    expect(server.requests.filter((r) => r.body.model === "http500").length).toBeGreaterThan(0);
  });

  describe("bad input fails before any container exists", () => {
    async function expectNothingStarted(run: (onEvent: (e: RunEvent) => void) => Promise<unknown>): Promise<unknown> {
      const events: RunEvent[] = [];
      const before = await ourContainers();
      const requestsBefore = server.requests.length;
      const error = await failureOf(run((e) => void events.push(e)));
      expect(events).toEqual([]);
      expect(await ourContainers()).toEqual(before);
      expect(server.requests.length).toBe(requestsBefore);
      return error;
    }

    it("an empty prompt", async () => {
      const error = asRunError(
        await expectNothingStarted((onEvent) => agent.run("   ", { cwd: ws, model: "scripted/never", onEvent })),
      );
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toBe("The prompt is empty.");
    });

    it("an already-aborted signal rejects with a SandboxRunError (aborted) whose cause is its reason", async () => {
      const reason = new Error("aborted before the call");
      const controller = new AbortController();
      controller.abort(reason);
      const error = await expectNothingStarted((onEvent) =>
        agent.run("Do it.", { cwd: ws, model: "scripted/never", signal: controller.signal, onEvent }),
      );
      expect(asRunError(error).code).toBe("aborted");
      expect(asRunError(error).cause).toBe(reason);
      // No sandbox was made, and the hint says so (review, session 34: "the sandbox was stopped and removed").
      expect(asRunError(error).hint).toBe(
        "The caller's AbortSignal stopped it before its sandbox was made: nothing was started.",
      );
    });

    it("a provider that is neither built in nor in models.json", async () => {
      const error = asRunError(
        await expectNothingStarted((onEvent) => agent.run("Do it.", { cwd: ws, model: "nobody/x", onEvent })),
      );
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toContain('Unknown model provider "nobody"');
    });

    // Review, session 34: only each tree's top repository was scanned, and a PAT that a second
    // actions/checkout kept in vendor/lib/.git/config reached the model and the PR comment.
    it("a checkout nested in the workspace, or in a read-only mount, whose git config keeps a token: refused, naming it", async () => {
      const header =
        '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hwX05FU1RFRA==\n';
      const nested = makeWorkspace({ "a.txt": "a\n", "vendor/lib/.git/config": header, "vendor/lib/x.c": "" });
      const mounted = makeWorkspace({ "deep/er/repo/.git/config": header });
      try {
        for (const options of [
          { cwd: nested, policy: "read-only" as const },
          { cwd: nested, policy: "workspace-write" as const },
          { cwd: ws, policy: { ...loadPolicy("read-only"), name: "with-a-mount", readOnlyMounts: [mounted] } },
        ]) {
          const error = asRunError(
            await expectNothingStarted((onEvent) =>
              agent.run("Do it.", { ...options, model: "scripted/never", onEvent }),
            ),
          );
          expect(error.code).toBe("usage");
          const repo = options.cwd === nested ? path.join(nested, "vendor/lib") : path.join(mounted, "deep/er/repo");
          expect(error.shortMessage).toBe(
            `The git config of ${repo} holds a credential the sandbox could read: http.https://github.com/.extraheader.`,
          );
          expect(JSON.stringify(error)).not.toContain("eC1hY2Nlc3MtdG9rZW46");
        }
      } finally {
        fs.rmSync(nested, { recursive: true, force: true });
        fs.rmSync(mounted, { recursive: true, force: true });
      }
    });

    it("a schema that is not an object schema", async () => {
      const error = asRunError(
        await expectNothingStarted((onEvent) =>
          agent.run("Do it.", {
            cwd: ws,
            model: "scripted/never",
            schema: { type: "array", items: { type: "string" } },
            onEvent,
          }),
        ),
      );
      expect(error.code).toBe("usage");
    });
  });
});
