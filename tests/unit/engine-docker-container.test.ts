// DockerContainer over a fake dockerode container: what it does to the hijacked streams.
import { PassThrough } from "node:stream";
import type Docker from "dockerode";
import { describe, expect, it, vi } from "vitest";
import { DockerContainer } from "../../src/engine/docker-container.js";
import type { SandboxRunError } from "../../src/errors.js";

/** A hijacked stream as dockerode returns it over TCP: a duplex with socket options. */
function hijacked() {
  const stream = new PassThrough() as PassThrough & { noDelay: boolean[]; setNoDelay: (on?: boolean) => void };
  stream.noDelay = [];
  stream.setNoDelay = (on = true) => void stream.noDelay.push(on);
  return stream;
}

describe("DockerContainer", () => {
  it("turns Nagle's algorithm off on attach and exec streams (small writes of the relay and of Pi's events go out at once on TCP engines)", async () => {
    const attached = hijacked();
    const execed = hijacked();
    const fake = {
      id: "c1",
      attach: async () => attached,
      exec: async () => ({ start: async () => execed, inspect: async () => ({ ExitCode: 0 }) }),
    } as unknown as Docker.Container;
    const container = new DockerContainer(fake);
    await container.attach();
    const session = await container.exec({ cmd: ["true"], user: "65532" });
    expect(attached.noDelay).toEqual([true]);
    expect(execed.noDelay).toEqual([true]);
    execed.end();
    await expect(session.exit).resolves.toBe(0);
  });
});

describe("DockerContainer.kill", () => {
  const unanswered = () => Object.assign(new Error("The operation was aborted"), { name: "AbortError" });
  /** A stand-in whose kill gets no answer for 30 s the first `slow` times, then is answered. */
  function slowToStop(slow: number, state: () => Promise<unknown>) {
    const calls = { kill: 0, inspect: 0 };
    const fake = {
      id: "c0ffee",
      kill: () =>
        ++calls.kill <= slow
          ? new Promise((_resolve, reject) => setTimeout(() => reject(unanswered()), 30_000))
          : Promise.resolve(),
      inspect: () => {
        calls.inspect++;
        return state();
      },
      // The engine's wait answers only at exit; an abort of its request fails it with the reason.
      modem: {
        dial: (options: { abortSignal: AbortSignal }, callback: (error: unknown) => void) =>
          options.abortSignal.addEventListener("abort", () => callback(options.abortSignal.reason)),
      },
    } as unknown as Docker.Container;
    return { container: new DockerContainer(fake), calls };
  }

  it("a stop the engine does not answer in 30 s, while it still answers an inspection, is asked again (a gVisor sandbox dying slowly)", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(2, async () => ({ State: { Running: true } }));
      const stopped = container.kill();
      await vi.advanceTimersByTimeAsync(61_000);
      await stopped;
      expect(calls).toEqual({ kill: 3, inspect: 2 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("an unanswered stop of a container that exited meanwhile is done", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(5, async () => ({ State: { Running: false } }));
      const stopped = container.kill();
      await vi.advanceTimersByTimeAsync(31_000);
      await stopped;
      expect(calls).toEqual({ kill: 1, inspect: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("an engine that answers neither: the stop fails in words, and a pending wait ends with the same error", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(5, () => Promise.reject(unanswered()));
      const waited = container.wait().catch((error: unknown) => error);
      const stopped = container.kill().catch((error: unknown) => error);
      await vi.advanceTimersByTimeAsync(31_000);
      const failure = await stopped;
      expect((failure as SandboxRunError).shortMessage).toBe(
        "The engine did not stop the sandbox's container c0ffee within 30 s.",
      );
      expect(await waited).toBe(failure);
      expect(calls).toEqual({ kill: 1, inspect: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("a container the engine never stops though it answers: fails after two minutes, saying the engine answers", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(100, async () => ({ State: { Running: true } }));
      const stopped = container.kill().catch((error: unknown) => error);
      await vi.advanceTimersByTimeAsync(200_000);
      expect(((await stopped) as SandboxRunError).shortMessage).toBe(
        "The engine did not stop the sandbox's container c0ffee within 120 s, though it answers.",
      );
      expect(calls.kill).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });
});
