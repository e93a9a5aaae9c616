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
  /**
   * A stand-in whose kill gets no answer for 30 s the first `slow` times, then is answered (or,
   * with `exitedAfter`, answered "is not running", as Docker does for a container that died
   * meanwhile); `ping` is the engine's. Inspecting the container hangs, as Docker's did while
   * gVisor's sandbox died (review, session 32): nothing may depend on it.
   */
  function slowToStop(slow: number, ping: () => Promise<unknown>, exitedAfter = false) {
    const calls = { kill: 0, ping: 0 };
    const fake = {
      id: "c0ffee",
      kill: () =>
        ++calls.kill <= slow
          ? new Promise((_resolve, reject) => setTimeout(() => reject(unanswered()), 30_000))
          : exitedAfter
            ? Promise.reject(Object.assign(new Error("container c0ffee is not running"), { statusCode: 409 }))
            : Promise.resolve(),
      inspect: () => new Promise(() => {}),
      remove: (options: { abortSignal: AbortSignal }) =>
        new Promise((_resolve, reject) => options.abortSignal.addEventListener("abort", () => reject(unanswered()))),
      // The engine's wait answers only at exit; an abort of its request fails it with the reason.
      modem: {
        dial: (options: { abortSignal: AbortSignal }, callback: (error: unknown) => void) =>
          options.abortSignal.addEventListener("abort", () => callback(options.abortSignal.reason)),
      },
    } as unknown as Docker.Container;
    const container = new DockerContainer(fake, {
      ping: () => {
        calls.ping++;
        return ping();
      },
    });
    return { container, calls };
  }
  const answers = async () => "OK";
  const silent = () => Promise.reject(unanswered());

  it("a stop the engine does not answer in 30 s, while it answers its ping, is asked again (a gVisor sandbox dying slowly)", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(2, answers);
      const stopped = container.kill();
      await vi.advanceTimersByTimeAsync(61_000);
      await stopped;
      expect(calls).toEqual({ kill: 3, ping: 2 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("a container that died meanwhile: the next stop is answered 'not running', and that is done", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(1, answers, true);
      const stopped = container.kill();
      await vi.advanceTimersByTimeAsync(31_000);
      await stopped;
      expect(calls).toEqual({ kill: 2, ping: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("two stops at once (a settled run's and a timeout's) are one", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(1, answers);
      const both = Promise.all([container.kill(), container.kill()]);
      await vi.advanceTimersByTimeAsync(31_000);
      await both;
      expect(calls).toEqual({ kill: 2, ping: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("an engine that answers neither: the stop fails in words, a pending wait ends with the same error, and the removal gets 5 s", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(5, silent);
      const waited = container.wait().catch((error: unknown) => error);
      const stopped = container.kill().catch((error: unknown) => error);
      await vi.advanceTimersByTimeAsync(31_000);
      const failure = await stopped;
      expect((failure as SandboxRunError).shortMessage).toBe(
        "The engine did not stop the sandbox's container c0ffee within 30 s.",
      );
      expect(await waited).toBe(failure);
      expect(calls).toEqual({ kill: 1, ping: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("the removal after an unanswered stop: 5 s when the ping went unanswered too, the full minute when the engine answers", async () => {
    vi.useFakeTimers();
    const silentOne = slowToStop(5, silent);
    const slowOne = slowToStop(100, answers);
    try {
      const stops = [silentOne.container.kill().catch(() => {}), slowOne.container.kill().catch(() => {})];
      await vi.advanceTimersByTimeAsync(200_000);
      await Promise.all(stops);
    } finally {
      vi.useRealTimers();
    }
    // Real time (engineDeadline's timer is not one vitest fakes).
    await expect(silentOne.container.remove()).rejects.toThrow("the engine did not finish removing it within 5 s");
    const slowRemoval = slowOne.container.remove().catch((error: unknown) => error);
    expect(
      await Promise.race([slowRemoval, new Promise((resolve) => setTimeout(() => resolve("still waiting"), 6_000))]),
    ).toBe("still waiting");
  }, 20_000);

  it("a container the engine never stops though it answers: fails after two minutes, saying the engine answers", async () => {
    vi.useFakeTimers();
    try {
      const { container, calls } = slowToStop(100, answers);
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
