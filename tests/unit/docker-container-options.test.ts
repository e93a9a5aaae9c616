// The Engine API options a run plan becomes: this is where the hardening is, so every piece
// of it is pinned here.
import { describe, expect, it } from "vitest";
import { containerCreateOptions } from "../../src/docker/container-options.js";
import { LABEL_MANAGED, LABEL_RUN_ID } from "../../src/docker/labels.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { buildRunPlan } from "../../src/run/run-plan.js";

function planFor(policy: Policy, caller = { uid: 1000, gid: 1000 }) {
  return buildRunPlan({
    runId: "run42",
    image: "sandbox-run/pi:test",
    policy,
    model: "scripted/x",
    cwd: "/work/project",
    writableRoots: ["/work/extra"],
    readOnlyMounts: [],
    runDir: "/tmp/sandbox-run-abc",
    caller,
    sandboxEnv: { A: "1" },
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 1000,
    owner: { pid: 1, host: "h" },
    now: new Date(0),
  });
}

describe("containerCreateOptions", () => {
  const policy = loadPolicy("workspace-write");
  const plan = planFor(policy);
  const options = containerCreateOptions(plan);
  const host = options.HostConfig!;

  it("hardens the container: read-only root, no capabilities, no-new-privileges, init", () => {
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.CapDrop).toEqual(["ALL"]);
    expect(host.CapAdd ?? []).toEqual([]);
    expect(host.Privileged ?? false).toBe(false);
    expect(host.SecurityOpt).toContain("no-new-privileges:true");
    expect(host.Init).toBe(true);
    expect(host.IpcMode).toBe("private");
  });

  it("limits pids, memory (with swap equal to memory, so no swap) and cpus from the policy", () => {
    expect(host.PidsLimit).toBe(policy.limits.pids);
    expect(host.Memory).toBe(policy.limits.memoryMb * 1024 * 1024);
    expect(host.MemorySwap).toBe(host.Memory);
    expect(host.NanoCpus).toBe(policy.limits.cpus * 1e9);
  });

  it("has no network for the none policy, and the bridge for danger-full-access", () => {
    expect(host.NetworkMode).toBe("none");
    expect(options.NetworkDisabled).toBe(true);
    const open = containerCreateOptions(planFor(loadPolicy("danger-full-access")));
    expect(open.HostConfig!.NetworkMode).toBe("bridge");
    expect(open.NetworkDisabled).toBe(false);
  });

  it("runs as the plan's user, in the workspace, with the plan's runtime, labels, tmpfs and env", () => {
    expect(options.User).toBe("1000:1000");
    expect(containerCreateOptions(planFor(policy, { uid: 0, gid: 0 })).User).toBe("65532:65532");
    expect(options.WorkingDir).toBe("/work/project");
    expect(host.Runtime).toBe(policy.runtime);
    expect(containerCreateOptions(planFor({ ...policy, runtime: "runsc" })).HostConfig!.Runtime).toBe("runsc");
    expect(options.Labels).toMatchObject({ [LABEL_MANAGED]: "true", [LABEL_RUN_ID]: "run42" });
    expect(host.Tmpfs).toEqual(plan.tmpfs);
    expect(options.Env).toContain("A=1");
    expect(options.Entrypoint).toEqual(plan.entrypoint);
    expect(options.Cmd).toEqual(plan.piArgs);
  });

  it("bind-mounts exactly the plan's mounts at the same paths, read-only where the plan says", () => {
    expect(host.Binds ?? []).toEqual([]);
    expect(host.Mounts).toEqual(
      plan.mounts.map((m) => ({
        Type: "bind",
        Source: m.hostPath,
        Target: m.containerPath,
        ReadOnly: m.readOnly,
        BindOptions: { Propagation: "rprivate" },
      })),
    );
    const ro = containerCreateOptions(planFor({ ...loadPolicy("read-only"), writableRoots: true }));
    expect(ro.HostConfig!.Mounts!.find((m) => m.Target === "/work/project")!.ReadOnly).toBe(true);
  });

  it("attaches stdin once and without a TTY so the JSONL stream stays clean", () => {
    expect(options).toMatchObject({ AttachStdin: true, OpenStdin: true, StdinOnce: true, Tty: false });
    expect(host.AutoRemove).toBe(false);
  });
});
