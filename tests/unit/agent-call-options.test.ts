// What a JavaScript caller may pass that TypeScript would have caught: each is a usage error that
// says what to pass, never a TypeError from deep inside, and a listener's failure never ends the
// caller's process (review, session 34).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { SandboxRunError } from "../../src/errors.js";
import { callListener, type RunEvent, RunTimeline } from "../../src/run/run-events.js";
import { optionsNow } from "../../src/util/options-now.js";

// One workspace for the whole file (tempTrees removes its trees after each test).
const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-call-options-")));
const hostEnv = { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-test-0123456789abcdef0123" };
const agent = new ContainerPiAgent({ cwd: ws, model: "openai/gpt-4o", hostEnv, reapOrphans: false });
afterAll(async () => {
  await agent.close();
  fs.rmSync(ws, { recursive: true, force: true });
});

const usage = (call: () => unknown, message: RegExp) => {
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toMatchObject({ code: "usage", shortMessage: expect.stringMatching(message) });
};

describe("a call's options of the wrong kind", () => {
  it("are usage errors naming the option and what it must be", () => {
    usage(
      () => agent.plan("hi", { timeoutMs: "5000" as never }),
      /Timeout must be a number of milliseconds, got "5000"/,
    );
    usage(() => agent.plan("hi", { maxCostUsd: "5" as never }), /cost budget must be a positive number/);
    usage(
      () => agent.plan("hi", { cwd: Buffer.from(ws) as never }),
      /must be a path \(a string or a file: URL\), not a Buffer/,
    );
    usage(() => agent.plan("hi", { cwd: 42 as never }), /must be a path .*not number/);
    usage(() => agent.plan("hi", { cwd: new URL("https://example.com/") as never }), /not a https: URL/);
    usage(() => agent.plan("hi", { onEvent: "nope" as never }), /onEvent must be a function, not a string/);
    usage(
      () => agent.plan("hi", { signal: { aborted: false } as never }),
      /signal must be an AbortSignal, not a plain object/,
    );
    usage(() => agent.plan("hi", [] as never), /options must be an object, not an array/);
    expect(() => new ContainerPiAgent({ onEvent: 1 as never, reapOrphans: false })).toThrow(
      /onEvent must be a function/,
    );
  });

  it("a variable the engine could not create is refused before any engine is asked: a NUL in its value, an empty name, a name with = or NUL", () => {
    usage(() => agent.plan("hi", { env: { A: "x\0y" } }), /env's A holds a NUL byte/);
    usage(() => agent.plan("hi", { env: { "": "x" } }), /env has a variable named "": a name may not be empty/);
    usage(() => agent.plan("hi", { env: { "HOME=/x": "y" } }), /named "HOME=\/x"/);
    usage(() => agent.plan("hi", { env: { A: 1 as never } }), /env's A is number, not a string/);
  });

  it("a schema that is no JSON value: a cycle, a BigInt, nesting past the stack", () => {
    const cyclic: Record<string, unknown> = { type: "object", properties: {} };
    (cyclic.properties as Record<string, unknown>).self = cyclic;
    usage(() => agent.plan("hi", { schema: cyclic as never }), /schema cannot be written as JSON: .*circular/i);
    usage(() => agent.plan("hi", { schema: { type: "object", maxProperties: 10n } as never }), /BigInt/);
    let deep: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 20_000; i++) deep = { type: "object", properties: { x: deep } };
    usage(() => agent.plan("hi", { schema: deep as never }), /schema cannot be written as JSON/);
  });

  // Review of this session's change (fix34b): own properties only were copied, and a call meant
  // read-only over a named folder ran workspace-write over the process's folder.
  it("options inherited from a prototype or given by a class's getters count, as the call reads them", () => {
    const inherited = Object.create({ cwd: ws, sandbox: "read-only" });
    expect(agent.plan("hi", inherited).run.cwd).toBe(ws);
    expect(agent.plan("hi", inherited).run.policy.workspace).toBe("read-only");
    class Options {
      get cwd() {
        return ws;
      }
      get sandbox() {
        return "read-only" as const;
      }
    }
    expect(agent.plan("hi", new Options() as never).run.policy.workspace).toBe("read-only");
  });

  it("null options are none; a file: URL is a folder", () => {
    expect(agent.plan("hi", null as never).run.cwd).toBe(ws);
    expect(agent.plan("hi", { cwd: pathToFileURL(ws) as never }).run.cwd).toBe(ws);
  });

  it("optionsNow copies a call's options and their arrays and plain objects one level down", () => {
    const signal = new AbortController().signal;
    const given = { cwd: "/a", env: { A: "1" }, additionalWritableDirectories: ["/w"], signal };
    const now = optionsNow(given, "call", { cwd: true, env: true, additionalWritableDirectories: true, signal: true });
    given.cwd = "/b";
    given.env.A = "2";
    given.additionalWritableDirectories.push("/x");
    expect(now).toEqual({ cwd: "/a", env: { A: "1" }, additionalWritableDirectories: ["/w"], signal });
    expect(now.signal).toBe(signal);
  });
});

describe("an abort while the call fails", () => {
  // Review of this session's change (fix34b): a run's own failure (packs it set aside, named only
  // there) became "stopped before its sandbox was made: nothing was started" when the caller aborted.
  it("keeps the run's own error once its sandbox existed; before that, the abort says nothing was started", async () => {
    const failing = (error: () => Error) => {
      const controller = new AbortController();
      let pings = 0;
      // The pool's own ping answers; the run's check of the engine (the next one) fails as the caller aborts.
      const engine = {
        name: "fake",
        ping: async () => {
          if (++pings < 2) return;
          controller.abort(new Error("the caller's abort"));
          throw error();
        },
        info: async () => ({ runtimes: { runc: {} } }),
      } as unknown as Engine;
      const withEngine = new ContainerPiAgent({ cwd: ws, model: "openai/gpt-4o", hostEnv, reapOrphans: false, engine });
      return withEngine
        .run("hi", { signal: controller.signal })
        .then(
          () => {
            throw new Error("expected a failure");
          },
          (caught: unknown) => caught,
        )
        .finally(() => withEngine.close());
    };
    const own = new SandboxRunError("usage", "packs were set aside", { containerId: "c0ffee" });
    expect(await failing(() => own)).toBe(own);
    expect(await failing(() => new Error("engine gone"))).toMatchObject({
      code: "aborted",
      hint: "The caller's AbortSignal stopped it before its sandbox was made: nothing was started.",
    });
  });
});

describe("a caller's listener", () => {
  it("that throws, or is async and rejects, breaks neither the run's events nor the process", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const seen: string[] = [];
      const timeline = new RunTimeline("r1", [
        async () => {
          throw new Error("log service down");
        },
        () => {
          throw new Error("sync");
        },
        (event: RunEvent) => void seen.push(event.type),
      ]);
      timeline.sandbox("a");
      timeline.sandbox("b");
      callListener(() => Promise.reject(new Error("direct")), { type: "c" } as RunEvent);
      // A thenable whose then throws.
      const odd = JSON.parse('{"then": 0}');
      // biome-ignore lint/suspicious/noThenProperty: a thenable is the point
      odd.then = () => {
        throw new Error("odd thenable");
      };
      callListener((() => odd) as never, { type: "d" } as RunEvent);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(seen).toEqual(["a", "b"]);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
