// Docker Desktop runs its engine in a VM: runs there use copy mode (no host path or unix socket is
// mounted). The choice is made from the engine's own answers to /info and /version, here recorded
// ones (tests/fixtures/docker-info/README.md says where each comes from), read through the real
// DockerEngine and ContainerPiAgent.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type Docker from "dockerode";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { sharesHostFilesystemByDefault } from "../../src/engine/engine-endpoint.js";
import { engineKindOf } from "../../src/engine/engine-kind.js";
import { isSandboxRunError } from "../../src/errors.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { placeOnEngine } from "../../src/run/place-on-engine.js";

const FIXTURES = path.join(import.meta.dirname, "../fixtures/docker-info");
const answer = (name: string, kind: "info" | "version") =>
  JSON.parse(fs.readFileSync(path.join(FIXTURES, `${name}.${kind}.json`), "utf8"));

/** A dockerode client on the local socket that answers /info and /version from a recording. */
function recordedClient(name: string): Docker {
  return {
    modem: { socketPath: "/var/run/docker.sock" },
    info: async () => answer(name, "info"),
    version: async () => answer(name, "version"),
  } as unknown as Docker;
}

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-desktop-")));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const models = {
  providers: {
    scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] },
  },
};

function agentOn(name: string) {
  const engine = new DockerEngine({ docker: recordedClient(name) });
  return {
    engine,
    agent: new ContainerPiAgent({ engine, models, hostEnv: { PATH: "/usr/bin:/bin" }, reapOrphans: false }),
  };
}

/** What planning a bind-mode call throws (undefined when it plans). */
function bindPlanError(agent: ContainerPiAgent): unknown {
  try {
    agent.plan("do it", { model: "scripted/m", cwd: dir, workspaceMode: "bind" });
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("engineKindOf", () => {
  it("recognises Docker Desktop on an Apple Silicon Mac and on Windows (WSL 2), and its platform", () => {
    const mac = engineKindOf(
      answer("docker-desktop-macos-arm64", "info"),
      answer("docker-desktop-macos-arm64", "version"),
    );
    expect(mac).toMatchObject({ dockerDesktop: true, platform: "linux/arm64", kernelVersion: "6.10.0-linuxkit" });
    const windows = engineKindOf(
      answer("docker-desktop-windows-wsl2-amd64", "info"),
      answer("docker-desktop-windows-wsl2-amd64", "version"),
    );
    expect(windows).toMatchObject({ dockerDesktop: true, platform: "linux/amd64" });
  });

  it("recognises it from any one of its marks, and not a plain Linux engine", () => {
    expect(engineKindOf(answer("debian-bookworm-amd64", "info"), answer("debian-bookworm-amd64", "version"))).toEqual({
      platform: "linux/amd64",
      architecture: "x86_64",
      operatingSystem: "Debian GNU/Linux 12 (bookworm)",
      kernelVersion: "6.18.44-fc-v857",
      dockerDesktop: false,
    });
    const plain = { OperatingSystem: "Ubuntu 24.04", KernelVersion: "6.8.0-45-generic", Architecture: "aarch64" };
    expect(engineKindOf(plain).dockerDesktop).toBe(false);
    expect(engineKindOf({ ...plain, KernelVersion: "6.10.0-linuxkit" }).dockerDesktop).toBe(true);
    expect(engineKindOf(plain, { Platform: { Name: "Docker Desktop 4.33.0 (160616)" } }).dockerDesktop).toBe(true);
    expect(engineKindOf({ ...plain, Labels: ["com.docker.desktop.address=unix:///x"] }).dockerDesktop).toBe(true);
  });
});

describe("a run's engine choice", () => {
  it("plans copy mode and the engine's own (arm64) runner image once Docker Desktop's answers are in", async () => {
    const { agent } = agentOn("docker-desktop-macos-arm64");
    await agent.learnEngines();
    const { plan } = agent.plan("do it", { model: "scripted/m", cwd: dir });
    expect(plan.workspaceMode).toBe("copy");
    expect(plan.mounts).toEqual([]);
    expect(plan.image).toBe(runnerImageSpec("linux/arm64").tag);
  });

  it("keeps bind mode on the plain Linux engine of the same shape", async () => {
    const { agent } = agentOn("debian-bookworm-amd64");
    await agent.learnEngines();
    const { plan } = agent.plan("do it", { model: "scripted/m", cwd: dir });
    expect(plan.workspaceMode).toBe("bind");
    expect(plan.image).toBe(runnerImageSpec("linux/amd64").tag);
  });

  it("refuses bind mode on Docker Desktop, saying why", async () => {
    const { agent } = agentOn("docker-desktop-windows-wsl2-amd64");
    await agent.learnEngines();
    const error = bindPlanError(agent);
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toContain('The engine "local" is Docker Desktop');
    expect((error as Error).message).toContain("--workspace copy");
  });

  it("refuses, at the engine, a bind plan made before Docker Desktop answered", async () => {
    const { engine, agent } = agentOn("docker-desktop-macos-arm64");
    const planned = agent.plan("do it", { model: "scripted/m", cwd: dir });
    expect(planned.plan.workspaceMode).toBe("bind");
    let error: unknown;
    try {
      placeOnEngine(planned, engine, await engine.info());
    } catch (e) {
      error = e;
    }
    expect(isSandboxRunError(error) && error.shortMessage).toContain(
      "is Docker Desktop (Docker Desktop, kernel 6.10.0-linuxkit)",
    );
  });

  it("an engine that remaps user ids (userns-remap, rootless Docker) gets copy mode, saying why; bind mode is refused there (review, session 33: the sandbox could write nothing, and the run said it succeeded)", async () => {
    expect(engineKindOf(answer("debian-bookworm-userns-amd64", "info")).remapsUsers).toBe("userns");
    expect(
      engineKindOf({ SecurityOptions: ["name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"] }).remapsUsers,
    ).toBe("rootless");
    expect(engineKindOf(answer("debian-bookworm-amd64", "info")).remapsUsers).toBeUndefined();
    // An engine's answer is untrusted: entries that are no strings name nothing (they ended every run as "a bug").
    expect(engineKindOf({ SecurityOptions: [1, {}, null, "name=userns"] as unknown as string[] }).remapsUsers).toBe(
      "userns",
    );
    expect(engineKindOf({ SecurityOptions: {} as unknown as string[] }).remapsUsers).toBeUndefined();

    const { engine, agent } = agentOn("debian-bookworm-userns-amd64");
    const early = agent.plan("do it", { model: "scripted/m", cwd: dir });
    await agent.learnEngines();
    const planned = agent.plan("do it", { model: "scripted/m", cwd: dir });
    expect(planned.plan.workspaceMode).toBe("copy");
    expect(planned.plan.mounts).toEqual([]);
    expect(planned.copyModeReason).toMatch(/copy mode.*the engine "local" remaps user ids \(userns-remap: /);
    const error = bindPlanError(agent);
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toContain('The engine "local" remaps user ids (userns-remap');
    // A bind plan made before the engine answered is refused at the engine.
    expect(early.plan.workspaceMode).toBe("bind");
    const info = await engine.info();
    expect(() => placeOnEngine(early, engine, info)).toThrow(/remaps user ids/);
  });

  it("takes no local engine on macOS or Windows for one that shares this host's files", () => {
    const socket = { kind: "unix" as const, socketPath: "/var/run/docker.sock" };
    expect(sharesHostFilesystemByDefault(socket, "linux")).toBe(true);
    expect(sharesHostFilesystemByDefault(socket, "darwin")).toBe(false);
    expect(sharesHostFilesystemByDefault(socket, "win32")).toBe(false);
  });
});
