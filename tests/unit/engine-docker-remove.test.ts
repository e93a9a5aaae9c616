// DockerEngine.removeContainer against a stand-in dockerode client: a container another remover
// has in hand (409, "removal already in progress") is waited for until the engine no longer knows it.
import type Docker from "dockerode";
import { describe, expect, it, vi } from "vitest";
import { DockerEngine } from "../../src/engine/docker-engine.js";

function engineWith(container: { remove: () => Promise<unknown>; inspect: () => Promise<unknown> }) {
  const docker = { getContainer: () => container, modem: { socketPath: "/var/run/docker.sock" } };
  return new DockerEngine({ docker: docker as unknown as Docker });
}

const status = (statusCode: number) => Object.assign(new Error(`HTTP ${statusCode}`), { statusCode });

describe("DockerEngine.removeContainer", () => {
  it("a container being removed by someone else (409): resolves only once the engine no longer knows it", async () => {
    let inspections = 0;
    const engine = engineWith({
      remove: () => Promise.reject(status(409)),
      inspect: () =>
        ++inspections < 3 ? Promise.resolve({ State: { Status: "removing" } }) : Promise.reject(status(404)),
    });
    await engine.removeContainer("c0ffee");
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
    await engine.removeContainer("c0ffee");
    expect(inspections).toBe(0);
  });

  it("any other refusal is the caller's to see", async () => {
    const engine = engineWith({ remove: () => Promise.reject(status(500)), inspect: () => Promise.resolve({}) });
    await expect(engine.removeContainer("c0ffee")).rejects.toThrow("HTTP 500");
  });
});
