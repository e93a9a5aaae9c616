// doctor's platform lines: what the engine is (Docker Desktop and what it changes), which
// platforms' runner images it holds, whether the other platform can run; and the controller's host.
import { describe, expect, it } from "vitest";
import type { Engine, EngineInfo, ImageDetails } from "../../src/engine/engine.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { checkPlatformImages, describeEngineKind } from "../../src/operations/doctor-platforms.js";
import { controllerHostProblem } from "../../src/util/controller-host.js";

function collect() {
  const lines: string[] = [];
  return { lines, say: { ok: (w: string) => lines.push(`ok ${w}`), note: (w: string) => lines.push(`note ${w}`) } };
}

const linuxInfo: EngineInfo = {
  version: "20.10.24",
  apiVersion: "1.41",
  runtimes: {},
  securityOptions: [],
  platform: "linux/amd64",
  architecture: "x86_64",
  operatingSystem: "Debian GNU/Linux 12 (bookworm)",
  // Not this machine's kernel: its emulators are not read here.
  kernelVersion: "6.1.0-remote",
  dockerDesktop: false,
};

function engineHolding(images: Record<string, ImageDetails>): Engine {
  return { name: "local", imageDetails: async (ref: string) => images[ref] } as unknown as Engine;
}

describe("doctor: platforms", () => {
  it("says an engine is Docker Desktop and that runs there use copy mode and the exec relay", () => {
    const { lines, say } = collect();
    describeEngineKind(
      {
        ...linuxInfo,
        platform: "linux/arm64",
        operatingSystem: "Docker Desktop",
        kernelVersion: "6.10.0-linuxkit",
        dockerDesktop: true,
      },
      say,
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^note engine is Docker Desktop \(Docker Desktop, kernel 6\.10\.0-linuxkit, linux\/arm64\)/,
    );
    expect(lines[0]).toContain("copy mode");
    expect(lines[0]).toContain("exec relay");
  });

  it("says an engine remaps user ids and that runs there use copy mode", () => {
    const { lines, say } = collect();
    describeEngineKind({ ...linuxInfo, remapsUsers: "userns" }, say);
    expect(lines).toEqual([
      "ok engine platform linux/amd64",
      expect.stringMatching(
        /^note engine remaps user ids \(userns-remap: .*runs copy the workspace in and out \(copy mode\); --workspace bind is refused there$/,
      ),
    ]);
  });

  it("names a plain engine's platform", () => {
    const { lines, say } = collect();
    describeEngineKind(linuxInfo, say);
    expect(lines).toEqual(["ok engine platform linux/amd64"]);
  });

  it("lists which platforms' runner images the engine holds and how to build the others", async () => {
    const amd64 = runnerImageSpec("linux/amd64").tag;
    const { lines, say } = collect();
    await checkPlatformImages(
      engineHolding({ [amd64]: { labels: {}, platform: "linux/amd64", sizeBytes: 684 * 1048576 } }),
      linuxInfo,
      say,
    );
    expect(lines).toEqual([
      `ok runner images by platform: linux/amd64 ${amd64} (684 MiB)`,
      "note no linux/arm64 runner image here (build it: sandbox-run image build --platform linux/arm64)",
      "note --platform linux/arm64 runs emulated here once its image is built",
    ]);
  });

  it("does not count an image of the wrong platform under a platform's tag", async () => {
    const arm64 = runnerImageSpec("linux/arm64").tag;
    const { lines, say } = collect();
    await checkPlatformImages(
      engineHolding({ [arm64]: { labels: {}, platform: "linux/amd64", sizeBytes: 1 } }),
      linuxInfo,
      say,
    );
    expect(lines[0]).toBe("ok runner images by platform: none yet");
  });
});

describe("the controller's host", () => {
  it("is Linux with /proc/self/fd; elsewhere a clear error that says where to run it", () => {
    expect(controllerHostProblem("linux", () => true)).toBeUndefined();
    const mac = controllerHostProblem("darwin", () => false);
    expect(mac?.code).toBe("docker-unavailable");
    expect(mac?.shortMessage).toContain("/proc/self/fd, which darwin does not have");
    expect(mac?.hint).toContain("WSL 2");
    expect(controllerHostProblem("linux", () => false)?.hint).toContain("mount -t proc");
  });
});
