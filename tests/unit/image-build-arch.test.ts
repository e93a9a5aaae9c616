// `image build` on a platform the engine cannot run is refused up front (before debootstrap, npm or a
// build starts), saying what would make it possible; an engine on an architecture without a runner
// image too. (The x86-64-only refusal this file once tested is gone: every platform builds now.)
import { describe, expect, it } from "vitest";
import type { Engine, EngineInfo } from "../../src/engine/engine.js";
import { isSandboxRunError } from "../../src/errors.js";
import { buildRunnerImage } from "../../src/image/build-runner-image.js";

/** An engine that answers info() and fails the test on anything else a build would do. */
function engineSaying(info: Partial<EngineInfo>): { engine: Engine; calls: string[] } {
  const calls: string[] = [];
  const engine = new Proxy({ name: "local", sharesHostFilesystem: true } as unknown as Engine, {
    get(target, key) {
      if (key in target) return target[key as keyof Engine];
      return async () => {
        calls.push(String(key));
        if (key === "info") return { version: "20.10", apiVersion: "1.41", runtimes: {}, securityOptions: [], ...info };
        throw new Error(`the build went on to ${String(key)}`);
      };
    },
  });
  return { engine, calls };
}

async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a refusal");
}

describe("image build for a platform", () => {
  it("refuses a platform the engine cannot run before any work, with the command that registers an emulator", async () => {
    // An engine on this machine's kernel, whose binfmt_misc holds no emulator.
    const { engine, calls } = engineSaying({
      platform: "linux/amd64",
      architecture: "x86_64",
      kernelVersion: "6.1.0-x",
    });
    const host = { os: "linux", release: "6.1.0-x", binfmtEntries: () => ({}) };
    const error = await refusal(buildRunnerImage(engine, { platform: "linux/arm64", host }));
    expect(isSandboxRunError(error) && error.code).toBe("docker-unavailable");
    expect(isSandboxRunError(error) && error.shortMessage).toContain("cannot run linux/arm64 containers");
    expect(isSandboxRunError(error) && error.hint).toContain("apt-get install -y qemu-user-static binfmt-support");
    expect(calls).toEqual(["info"]);
  });

  it("refuses an engine whose own architecture has no runner image, naming it", async () => {
    const { engine, calls } = engineSaying({ architecture: "s390x", kernelVersion: "6.1.0" });
    const error = await refusal(buildRunnerImage(engine));
    expect(isSandboxRunError(error) && error.code).toBe("image-missing");
    expect((error as Error).message).toContain("runs on s390x");
    expect(isSandboxRunError(error) && error.hint).toContain("--platform");
    expect(calls).toEqual(["info"]);
  });
});
