// The Engine API options a run plan becomes: this is where the hardening is, so every piece of it is
// pinned here, as literal values (not recomputed with the code's own formulas).
import { describe, expect, it } from "vitest";
import { dockerCreateOptions } from "../../src/engine/docker-create-options.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { buildRunPlan } from "../../src/run/plan/build-run-plan.js";
import { containerSpecOf } from "../../src/run/plan/container-spec.js";

function planFor(policy: Policy, caller = { uid: 1000, gid: 1000 }, workspaceMode?: "bind" | "copy") {
  return buildRunPlan({
    runId: "run42",
    image: "sandbox-run/pi:test",
    policy,
    model: "scripted/x",
    cwd: "/work/project",
    writableRoots: ["/work/extra"],
    readOnlyMounts: [],
    runDir: "/tmp/sandbox-run-1000/run-run42",
    caller,
    sandboxEnv: { A: "1" },
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 1000,
    owner: { pid: 1, host: "h" },
    now: new Date(0),
    ...(workspaceMode ? { workspaceMode } : {}),
  });
}

function optionsFor(policy: Policy, caller = { uid: 1000, gid: 1000 }) {
  // The container is made a minute after its plan (a call can wait for trees, the engine, an image):
  // its labels' times count from then, so no reaper takes a live run for one past its deadline.
  return dockerCreateOptions(containerSpecOf(planFor(policy, caller), new Date(60_000)));
}

/** workspace-write under runsc with another pids limit. */
function runscWithPids(pids: number) {
  const policy = loadPolicy("workspace-write");
  return optionsFor({ ...policy, runtime: "runsc", limits: { ...policy.limits, pids } }).HostConfig!;
}

describe("dockerCreateOptions of a run plan", () => {
  // workspace-write: 2048 MiB, 2 CPUs, 256 pids, /tmp 512 MiB, home 64 MiB.
  const options = optionsFor(loadPolicy("workspace-write"));
  const host = options.HostConfig!;

  it("hardens the container: read-only root, no capabilities, no-new-privileges, the filter's init, private IPC and cgroup namespaces", () => {
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.CapDrop).toEqual(["ALL"]);
    expect(host.CapAdd).toBeUndefined();
    expect(host.Privileged).toBeUndefined();
    expect(host.SecurityOpt).toEqual(["no-new-privileges:true"]);
    // Bind mode: the no-setuid filter's perl is the init (the engine's would run outside the filter).
    expect(host.Init).toBe(false);
    expect(options.Entrypoint?.[0]).toBe("/usr/bin/perl");
    expect(host.IpcMode).toBe("private");
    expect((host as { CgroupnsMode?: string }).CgroupnsMode).toBe("private");
    expect(host.OomScoreAdj).toBe(1000);
    // No core dumps; no file past the disk limit (workspace-write: 4096 MiB).
    expect(host.Ulimits).toEqual([
      { Name: "core", Soft: 0, Hard: 0 },
      { Name: "fsize", Soft: 4294967296, Hard: 4294967296 },
    ]);
    expect(host.LogConfig).toEqual({ Type: "none", Config: {} });
    // An image's HEALTHCHECK would run through the engine's exec, outside the filter's init (review, session 34).
    expect(options.Healthcheck).toEqual({ Test: ["NONE"] });
  });

  it("limits pids, memory (swap equal to memory: no swap) and cpus from the policy", () => {
    expect(host.PidsLimit).toBe(256);
    expect(host.Memory).toBe(2147483648);
    expect(host.MemorySwap).toBe(2147483648);
    expect(host.NanoCpus).toBe(2000000000);
  });

  it("under runsc: the policy's pids are the sandbox's RLIMIT_NPROC (gVisor's kernel enforces it), and the pids cgroup, which counts gVisor's own threads, has room for them", () => {
    const gvisor = runscWithPids(256);
    expect(gvisor.Ulimits).toContainEqual({ Name: "nproc", Soft: 256, Hard: 256 });
    expect(gvisor.PidsLimit).toBe(2816);
    // Capped: a fork bomb fills the room, and ten times 1024 was a third of a 32,768-pid host.
    expect(runscWithPids(1024).PidsLimit).toBe(4096);
    expect(runscWithPids(1024).Ulimits).toContainEqual({ Name: "nproc", Soft: 1024, Hard: 1024 });
    expect(runscWithPids(8192).PidsLimit).toBe(8192);
    // Under runc the cgroup is the limit; RLIMIT_NPROC would count the caller's uid host-wide.
    expect(host.Ulimits!.some((u) => u.Name === "nproc")).toBe(false);
  });

  it("copy mode: the container's memory is the policy's plus the copied trees' size (their tmpfs counts as memory)", () => {
    const plan = planFor(loadPolicy("workspace-write"), undefined, "copy");
    expect(dockerCreateOptions(containerSpecOf(plan, new Date(0), { copiedMb: 1900 })).HostConfig!.Memory).toBe(
      (2048 + 1900) * 1024 * 1024,
    );
    expect(dockerCreateOptions(containerSpecOf(plan, new Date(0))).HostConfig!.Memory).toBe(2048 * 1024 * 1024);
  });

  it("has no network for the none policy, and the bridge for danger-full-access", () => {
    expect(host.NetworkMode).toBe("none");
    expect(options.NetworkDisabled).toBe(true);
    const open = optionsFor(loadPolicy("danger-full-access"));
    expect(open.HostConfig!.NetworkMode).toBe("bridge");
    expect(open.NetworkDisabled).toBe(false);
  });

  it("runs as the caller's uid, or 65532 for root, in the workspace, with the plan's runtime, labels, tmpfs and env", () => {
    expect(options.User).toBe("1000:1000");
    expect(optionsFor(loadPolicy("workspace-write"), { uid: 0, gid: 0 }).User).toBe("65532:65532");
    expect(options.WorkingDir).toBe("/work/project");
    expect(host.Runtime).toBe("runc");
    expect(optionsFor({ ...loadPolicy("workspace-write"), runtime: "runsc" }).HostConfig!.Runtime).toBe("runsc");
    expect(options.Labels).toMatchObject({
      "sandbox-run.managed": "true",
      "sandbox-run.run-id": "run42",
      "sandbox-run.owner-pid": "1",
      "sandbox-run.owner-host": "h",
      "sandbox-run.created-at": "1970-01-01T00:01:00.000Z",
      "sandbox-run.deadline": "1970-01-01T00:01:01.000Z",
    });
    expect(host.Tmpfs).toEqual({
      "/tmp": "rw,nosuid,nodev,exec,size=512m,mode=1777",
      "/home/sandbox": "rw,nosuid,nodev,exec,size=64m,uid=1000,gid=1000,mode=0700",
    });
    expect(options.Env).toContain("A=1");
    expect(options.Entrypoint?.slice(-3)).toEqual([
      "/opt/sandbox-run/node/bin/node",
      "--disable-sigusr1",
      "/opt/sandbox-run/launcher.mjs",
    ]);
    expect((options as { name?: string }).name).toBe("sandbox-run-run42");
  });

  it("bind-mounts exactly the workspace, the extra root and the gateway socket, read-only where the plan says", () => {
    expect(host.Binds).toBeUndefined();
    const bind = (source: string, target: string, readOnly: boolean) => ({
      Type: "bind",
      Source: source,
      Target: target,
      ReadOnly: readOnly,
      BindOptions: { Propagation: "rprivate" },
    });
    expect(host.Mounts).toEqual([
      bind("/work/project", "/work/project", false),
      bind("/work/extra", "/work/extra", false),
      bind("/tmp/sandbox-run-1000/run-run42/gateway.sock", "/run/sandbox-run/gateway.sock", false),
    ]);
    const ro = optionsFor({ ...loadPolicy("read-only"), writableRoots: true });
    expect(ro.HostConfig!.Mounts!.find((m) => m.Target === "/work/project")!.ReadOnly).toBe(true);
  });

  it("attaches stdin once and without a TTY so the JSONL stream stays clean", () => {
    expect(options).toMatchObject({ AttachStdin: true, OpenStdin: true, StdinOnce: true, Tty: false });
    expect(host.AutoRemove).toBe(false);
  });
});
