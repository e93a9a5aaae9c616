// Podman's variants of the create options (see src/engine/podman-compat.ts for why each exists).
import { describe, expect, it } from "vitest";
import { dockerCreateOptions, podmanTmpfs } from "../../src/engine/docker-create-options.js";
import type { ContainerSpec } from "../../src/engine/engine.js";
import { assertPodmanLimits, assertPodmanRuntime, type PodmanService } from "../../src/engine/podman-compat.js";

const spec: ContainerSpec = {
  image: "sandbox-run/pi:test",
  entrypoint: ["node"],
  cmd: [],
  env: {},
  user: "65532:65532",
  labels: {},
  runtime: "runc",
  network: "none",
  mounts: [],
  tmpfs: {
    "/tmp": "rw,nosuid,nodev,size=512m,mode=1777",
    "/home/sandbox": "rw,nosuid,nodev,size=64m,uid=65532,gid=65532,mode=0700",
  },
  limits: { memoryMb: 512, pids: 64, fileSizeMb: 10 },
  openStdin: true,
  init: true,
};

const service = (over: Partial<PodmanService> = {}): PodmanService => ({
  version: "4.3.1",
  defaultRuntime: "runc",
  rootless: false,
  cgroupVersion: "v1",
  cgroupControllers: ["cpu", "memory", "pids"],
  ...over,
});

describe("Podman's create options", () => {
  it("tmpfs: the owner becomes `U`, and Docker's noexec and no copy-up are spelled out", () => {
    expect(podmanTmpfs(spec.tmpfs, spec.user)).toEqual({
      "/tmp": "rw,nosuid,nodev,size=512m,mode=1777,noexec,notmpcopyup",
      "/home/sandbox": "rw,nosuid,nodev,size=64m,mode=0700,U,noexec,notmpcopyup",
    });
    expect(podmanTmpfs({ "/w": "rw,exec,size=8m" }, spec.user)).toEqual({ "/w": "rw,exec,size=8m,notmpcopyup" });
    expect(() => podmanTmpfs({ "/x": "uid=1,gid=1" }, "65532:65532")).toThrow(/only give it to the container's user/);
  });

  it("passes the service's default ulimits on (ours win), and keep-id when rootless", () => {
    const options = dockerCreateOptions(spec, {
      defaultUlimits: [
        { Name: "nofile", Soft: 20000, Hard: 20000 },
        { Name: "fsize", Soft: 1, Hard: 1 },
      ],
      rootless: true,
    });
    expect(options.HostConfig?.Ulimits).toEqual([
      { Name: "core", Soft: 0, Hard: 0 },
      { Name: "fsize", Soft: 10 * 1024 * 1024, Hard: 10 * 1024 * 1024 },
      { Name: "nofile", Soft: 20000, Hard: 20000 },
    ]);
    expect((options.HostConfig as { UsernsMode?: string }).UsernsMode).toBe("keep-id");
    expect(options.HostConfig?.Tmpfs?.["/home/sandbox"]).toContain(",U,");
    // Podman's own writable, unbounded tmpfs on /var/tmp and /run (read-only root) is replaced by
    // ours (review: 180 MiB written to /var/tmp past a 16 MiB tmpMb, and executed there).
    expect(options.HostConfig?.Tmpfs?.["/var/tmp"]).toBe("ro,nosuid,nodev,noexec,size=64k,mode=0755,notmpcopyup");
    expect(options.HostConfig?.Tmpfs?.["/run"]).toBe("rw,nosuid,nodev,noexec,size=1m,mode=0755,tmpcopyup");
    // Docker's options are untouched.
    const docker = dockerCreateOptions(spec);
    expect((docker.HostConfig as { UsernsMode?: string }).UsernsMode).toBeUndefined();
    expect(docker.HostConfig?.Tmpfs).toEqual(spec.tmpfs);
  });

  it("refuses a runtime the service would ignore, and a service that would drop the limits", () => {
    expect(() => assertPodmanRuntime(service(), "runc", "p")).not.toThrow();
    expect(() => assertPodmanRuntime(service({ defaultRuntime: "crun" }), "runc", "p")).not.toThrow();
    expect(() => assertPodmanRuntime(service(), "runsc", "p")).toThrow(
      'Engine "p" is Podman 4.3.1, which runs every container with its service\'s runtime (runc); it cannot give this run runsc.',
    );
    expect(() => assertPodmanLimits(service(), "p", true)).not.toThrow();
    expect(() => assertPodmanLimits(service({ rootless: true, cgroupControllers: [] }), "p", true)).toThrow(
      'Engine "p" is rootless Podman 4.3.1 on cgroup v1, which cannot enforce the sandbox\'s memory, pids, cpu limits (it would silently drop them).',
    );
  });
});
