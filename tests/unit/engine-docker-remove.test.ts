// DockerEngine.removeContainer (and so every remover: forced-removal.ts) against a stand-in dockerode
// client: a container another remover has in hand (409, "removal already in progress") is waited for
// until the engine no longer knows it; a removal the engine answers failed (5xx) is tried again, as
// a gVisor sandbox on a loaded host sometimes needs (CI, session 31).
import type Docker from "dockerode";
import { describe, expect, it, vi } from "vitest";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { RemovalError } from "../../src/engine/forced-removal.js";

type StandIn = { remove: (options: { abortSignal: AbortSignal }) => Promise<unknown>; inspect: () => Promise<unknown> };

function engineWith(container: StandIn, removalTimeoutMs?: number) {
  const docker = { getContainer: () => container, modem: { socketPath: "/var/run/docker.sock" } };
  return new DockerEngine({ docker: docker as unknown as Docker, answers: { removalTimeoutMs } });
}

const status = (statusCode: number, message = `HTTP ${statusCode}`) =>
  Object.assign(new Error(`(HTTP code ${statusCode}) ${message}`), { statusCode, json: { message } });

describe("DockerEngine.removeContainer", () => {
  it("a container being removed by someone else (409): resolves only once the engine no longer knows it", async () => {
    let inspections = 0;
    const engine = engineWith({
      remove: () => Promise.reject(status(409)),
      inspect: () =>
        ++inspections < 3 ? Promise.resolve({ State: { Status: "removing" } }) : Promise.reject(status(404)),
    });
    // Another remover took it: a reaper leaves its run to that one.
    expect(await engine.removeContainer("c0ffee")).toBe("gone");
    expect(inspections).toBe(3);
  });

  it("one still there 10 s after the other removal began: rejects, so gc hands back nothing lent to it and reports it", async () => {
    vi.useFakeTimers();
    try {
      const engine = engineWith({
        remove: () => Promise.reject(status(409)),
        inspect: () => Promise.resolve({ State: { Status: "removing" } }),
      });
      const removal = expect(engine.removeContainer("c0ffee")).rejects.toThrow(
        /under way for 10 s and it is still there/,
      );
      await vi.advanceTimersByTimeAsync(11_000);
      await removal;
    } finally {
      vi.useRealTimers();
    }
  });

  it("a container already gone (404): resolves at once, without asking again", async () => {
    let inspections = 0;
    const engine = engineWith({
      remove: () => Promise.reject(status(404)),
      inspect: () => {
        inspections++;
        return Promise.resolve({});
      },
    });
    expect(await engine.removeContainer("c0ffee")).toBe("gone");
    expect(inspections).toBe(0);
    expect(
      await engineWith({ remove: () => Promise.resolve(), inspect: () => Promise.resolve({}) }).removeContainer(
        "c0ffee",
      ),
    ).toBe("removed");
  });

  it("a removal the engine answers failed (500) is tried again a moment later, and the second attempt's success counts", async () => {
    vi.useFakeTimers();
    try {
      let attempts = 0;
      const engine = engineWith({
        remove: () =>
          ++attempts === 1
            ? Promise.reject(
                status(500, "cannot remove container: tried to kill container, but did not receive an exit event"),
              )
            : Promise.resolve(),
        inspect: () => Promise.resolve({}),
      });
      let done = false;
      const removal = engine.removeContainer("c0ffee").then(() => (done = true));
      await vi.advanceTimersByTimeAsync(500);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1_000);
      await removal;
      expect(attempts).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a failure that lasts is the caller's to see after five attempts, in the engine's own words", async () => {
    vi.useFakeTimers();
    try {
      let attempts = 0;
      const engine = engineWith({
        remove: () => {
          attempts++;
          return Promise.reject(status(500, "unlinkat /var/lib/docker/x: device or resource busy"));
        },
        inspect: () => Promise.resolve({}),
      });
      const removal = expect(engine.removeContainer("c0ffee")).rejects.toThrow(
        /^the engine failed to remove it \(5 attempts\): unlinkat \/var\/lib\/docker\/x: device or resource busy$/,
      );
      await vi.advanceTimersByTimeAsync(10_000);
      await removal;
      expect(attempts).toBe(5);
    } finally {
      vi.useRealTimers();
    }
  });

  it("no attempt is begun that the deadline leaves no time for: the failure stands", async () => {
    let attempts = 0;
    const engine = engineWith(
      {
        remove: () => {
          attempts++;
          return Promise.reject(status(500, "busy"));
        },
        inspect: () => Promise.resolve({}),
      },
      2_500,
    );
    await expect(engine.removeContainer("c0ffee")).rejects.toThrow("the engine failed to remove it: busy");
    expect(attempts).toBe(1);
  });

  it("no answer within the deadline: fails saying so, marked as timed out (gc counts those)", async () => {
    const engine = engineWith(
      {
        remove: ({ abortSignal }) =>
          new Promise((_resolve, reject) => abortSignal.addEventListener("abort", () => reject(new Error("aborted")))),
        inspect: () => Promise.resolve({}),
      },
      300,
    );
    const failure = await engine.removeContainer("c0ffee").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RemovalError);
    expect((failure as RemovalError).message).toBe("the engine did not finish removing it within 0.3 s");
    expect((failure as RemovalError).timedOut).toBe(true);
  });

  it("a failure without an answer of the engine's (a broken link) is the caller's as it came, not tried again", async () => {
    let attempts = 0;
    const broken = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const engine = engineWith({
      remove: () => {
        attempts++;
        return Promise.reject(broken);
      },
      inspect: () => Promise.resolve({}),
    });
    await expect(engine.removeContainer("c0ffee")).rejects.toBe(broken);
    expect(attempts).toBe(1);
  });
});
