// A warm sandbox as plan data: a warm-shaped plan is a copy-mode plan with the trees at fixed
// paths; two calls that differ only in what reaches the sandbox at its claim (workspace, model,
// schema, prompt, the tools' environment) have one shape; what is fixed when a container is made
// (runtime, limits, trees, network) makes another shape, said in words. The container of a warm
// sandbox carries nothing of any call, and labels that let gc and reaping find it.
import { describe, expect, it } from "vitest";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { buildRunPlan, type PlanInput } from "../../src/run/plan/build-run-plan.js";
import {
  claimedRunOf,
  warmContainerSpec,
  warmIneligible,
  warmShapeDifference,
  warmShapeKey,
  warmShapeOf,
} from "../../src/run/plan/warm-shape.js";
import { orphanReason } from "../../src/run/reap-orphans.js";
import {
  LABEL_DEADLINE,
  LABEL_IDLE_DEADLINE,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_OWNER_PIDNS,
  LABEL_OWNER_TOKEN,
  LABEL_RUN_ID,
  LABEL_WARM,
  LAUNCHER_DEADLINE_GRACE_MS,
  WARM_PATHS,
} from "../../src/sandbox-contract.js";

function input(overrides: Partial<PlanInput> = {}): PlanInput {
  return {
    runId: "abc123",
    image: "sandbox-run/pi:test",
    policy: loadPolicy("workspace-write"),
    model: "scripted/x",
    cwd: "/work/project",
    writableRoots: [],
    readOnlyMounts: [],
    runDir: "/tmp/sandbox-run-xyz",
    caller: { uid: 1000, gid: 1000 },
    sandboxEnv: {},
    containerModelsJson: { providers: { scripted: { baseUrl: "http://127.0.0.1:18080/scripted" } } },
    extraArgs: [],
    timeoutMs: 60_000,
    owner: { pid: 42, host: "host" },
    now: new Date("2030-01-02T03:04:05.000Z"),
    warm: true,
    ...overrides,
  };
}

describe("a warm-shaped plan", () => {
  it("is a copy-mode plan with the workspace at /workspace and the n-th writable root at /writable/n", () => {
    const plan = buildRunPlan(input({ writableRoots: ["/work/cache", "/work/out"] }));
    expect(plan.warmShaped).toBe(true);
    expect(plan.workspaceMode).toBe("copy");
    expect(plan.mounts).toEqual([]);
    expect(plan.workingDir).toBe(WARM_PATHS.workspace);
    expect(plan.copies.map((c) => [c.hostPath, c.containerPath])).toEqual([
      ["/work/project", "/workspace"],
      ["/work/cache", "/writable/0"],
      ["/work/out", "/writable/1"],
    ]);
    expect(Object.keys(plan.tmpfs)).toEqual(expect.arrayContaining(["/workspace", "/writable/0", "/writable/1"]));
    expect(plan.user).toBe("65532:65532");
  });

  it("has one shape for calls that differ only in what the claim brings (workspace, model, schema, env)", () => {
    const a = warmShapeOf(buildRunPlan(input()));
    const b = warmShapeOf(
      buildRunPlan(
        input({
          runId: "def456",
          cwd: "/elsewhere/repo",
          model: "scripted/y",
          schema: { type: "object", properties: { ok: { type: "boolean" } } },
          sandboxEnv: { FOO: "bar" },
          runDir: "/tmp/sandbox-run-other",
          timeoutMs: 10_000,
        }),
      ),
    );
    expect(warmShapeKey(b)).toBe(warmShapeKey(a));
    expect(warmShapeDifference(b, a)).toBeUndefined();
    // What the sandbox starts with holds nothing of any call.
    expect(JSON.stringify(a)).not.toContain("/work/project");
    expect(JSON.stringify(a)).not.toContain("scripted");
  });

  it("says in words how a call's shape differs from the pool's (runtime, limits, trees)", () => {
    const pool = warmShapeOf(buildRunPlan(input()));
    const policy = parsePolicy(
      {
        ...loadPolicy("workspace-write"),
        runtime: "runsc",
        limits: { ...loadPolicy("workspace-write").limits, memoryMb: 512 },
      },
      "test",
    );
    const other = warmShapeOf(buildRunPlan(input({ policy, writableRoots: ["/work/cache"] })));
    const difference = warmShapeDifference(other, pool)!;
    expect(difference).toContain("runtime runsc (the pool's: runc)");
    expect(difference).toContain("limit memoryMb 512 (the pool's: 2048)");
    expect(difference).toContain("trees /workspace, /writable/0 (the pool's: /workspace)");
  });

  it("keeps the call's platform: the pool makes its sandboxes of it, and a call of another platform does not fit (review, session 33: an arm64 pool was never served)", () => {
    const arm64 = parsePolicy({ ...loadPolicy("workspace-write"), platform: "linux/arm64" }, "test");
    const shape = warmShapeOf(buildRunPlan(input({ policy: arm64 })));
    expect(shape.platform).toBe("linux/arm64");
    const spec = warmContainerSpec(shape, {
      warmId: "warm-1",
      owner: { pid: 42, host: "host", token: "t" },
      now: new Date("2030-01-02T03:04:05.000Z"),
      idleMs: 60_000,
      maxRunMs: 60_000,
    });
    expect(spec.platform).toBe("linux/arm64");
    const native = warmShapeOf(buildRunPlan(input()));
    expect(native.platform).toBeUndefined();
    expect(warmShapeDifference(native, shape)).toContain("platform the engine's (the pool's: linux/arm64)");
  });

  it("is refused for what a warm sandbox cannot be: an open network, Node start-up variables, a read-only mount at its workspace path", () => {
    const open = parsePolicy({ ...loadPolicy("workspace-write"), network: "open" }, "test");
    expect(warmIneligible(buildRunPlan(input({ policy: open })), [])).toMatch(/network is open/);
    expect(warmIneligible(buildRunPlan(input({ sandboxEnv: { NODE_OPTIONS: "--x" } })), ["NODE_OPTIONS"])).toMatch(
      /NODE_OPTIONS, which Node reads when it starts/,
    );
    const clash = buildRunPlan(input({ readOnlyMounts: ["/workspace/data"], cwd: "/work/project" }));
    expect(warmIneligible(clash, [])).toMatch(/read-only mount \/workspace\/data/);
    expect(warmIneligible(buildRunPlan(input({ warm: false, workspaceMode: "copy" })), [])).toMatch(/not planned/);
    expect(warmIneligible(buildRunPlan(input()), [])).toBeUndefined();
  });

  it("is refused when its trees would meet in the warm layout (review: a workspace at /writable/0 beside a writable root, each host folder got the other's files)", () => {
    for (const sandboxCwd of ["/writable/0", "/writable"]) {
      const plan = buildRunPlan(input({ sandboxCwd, writableRoots: ["/work/cache"] }));
      expect(warmIneligible(plan, []), sandboxCwd).toMatch(/would meet in a warm sandbox's layout/);
    }
    expect(
      warmIneligible(buildRunPlan(input({ sandboxCwd: "/srv/app", writableRoots: ["/work/cache"] })), []),
    ).toBeUndefined();
  });
});

describe("a warm sandbox's container", () => {
  const shape = warmShapeOf(buildRunPlan(input()));
  const now = new Date("2030-01-02T03:04:05.000Z");
  const spec = warmContainerSpec(shape, {
    warmId: "warm-0123456789ab",
    owner: { pid: 4242, host: "ci-7", token: "0f1e2d3c4b5a" },
    now,
    idleMs: 600_000,
    maxRunMs: 900_000,
  });

  it("carries the launcher's waiting configuration and nothing of any call (no models, no schema, no route, no socket)", () => {
    const config = JSON.parse(spec.env.SANDBOX_RUN_CONFIG!);
    expect(config).toEqual({
      warm: {
        idleMs: 600_000,
        piCli: expect.stringContaining("pi-coding-agent"),
        preload: [],
        relay: expect.objectContaining({ sockets: [], claim: true }),
      },
    });
    expect(spec.cmd).toEqual([]);
    expect(spec.mounts).toEqual([]);
    expect(spec.network).toBe("none");
    expect(Object.keys(spec.env).sort()).toEqual(
      [
        "HOME",
        "LANG",
        "PI_CODING_AGENT_DIR",
        "PI_OFFLINE",
        "PI_SKIP_VERSION_CHECK",
        "PI_TELEMETRY",
        "SANDBOX_RUN_CONFIG",
        "TMPDIR",
      ].sort(),
    );
  });

  it("is labelled ours and warm, with its owner's token, its idle deadline and an overall deadline of idle + longest run + grace", () => {
    expect(spec.labels).toMatchObject({
      [LABEL_MANAGED]: "true",
      [LABEL_WARM]: "true",
      [LABEL_RUN_ID]: "warm-0123456789ab",
      [LABEL_OWNER_PID]: "4242",
      [LABEL_OWNER_HOST]: "ci-7",
      [LABEL_OWNER_TOKEN]: "0f1e2d3c4b5a",
      [LABEL_IDLE_DEADLINE]: new Date(now.getTime() + 600_000).toISOString(),
      [LABEL_DEADLINE]: new Date(now.getTime() + 600_000 + 900_000 + LAUNCHER_DEADLINE_GRACE_MS).toISOString(),
    });
  });

  it("is an orphan once its owner is gone, or once it stopped after its idle deadline; not while it waits for a live owner", () => {
    const context = (minutes: number) => ({
      host: "ci-7",
      now: now.getTime() + minutes * 60_000,
      alive: (pid: number) => pid === 4242,
    });
    expect(orphanReason(spec.labels, context(1), "running")).toBeUndefined();
    expect(orphanReason(spec.labels, context(12), "running")).toBeUndefined();
    expect(orphanReason(spec.labels, context(12), "exited")).toBe("warm sandbox: stopped at its idle deadline");
    expect(orphanReason(spec.labels, context(5), "exited")).toBeUndefined();
    expect(orphanReason(spec.labels, { ...context(1), alive: () => false }, "running")).toBe(
      "warm sandbox: owner process 4242 is gone",
    );
  });

  it("judges its owner's pid only in the owner's PID namespace (review: a live controller in a namespace of its own, on a host of the same name, had its sandboxes removed)", () => {
    const labelled = warmContainerSpec(shape, {
      warmId: "warm-0123456789ab",
      owner: { pid: 4242, host: "ci-7", token: "0f1e2d3c4b5a", pidns: "pid:[4026532999]" },
      now,
      idleMs: 600_000,
      maxRunMs: 900_000,
    }).labels;
    expect(labelled[LABEL_OWNER_PIDNS]).toBe("pid:[4026532999]");
    const gone = { host: "ci-7", now: now.getTime() + 60_000, alive: () => false };
    expect(orphanReason(labelled, { ...gone, pidns: "pid:[4026531836]" }, "running")).toBeUndefined();
    expect(orphanReason(labelled, { ...gone, pidns: "pid:[4026532999]" }, "running")).toBe(
      "warm sandbox: owner process 4242 is gone",
    );
    // Past its deadline it goes whatever namespace made it.
    const late = { ...gone, pidns: "pid:[4026531836]", now: now.getTime() + 40 * 60_000 };
    expect(orphanReason(labelled, late, "running")).toBe("warm sandbox: past its deadline");
  });
});

describe("a claim", () => {
  it("hands the launcher the run's argv, working directory, environment, models.json, final tool and deadline", () => {
    const plan = buildRunPlan(
      input({
        schema: { type: "object", properties: { ok: { type: "boolean" } } },
        sandboxEnv: { FOO: "bar" },
      }),
    );
    const run = claimedRunOf(plan);
    expect(run.argv).toEqual(plan.piArgs);
    expect(run.cwd).toBe("/workspace");
    expect(run.env.FOO).toBe("bar");
    expect(run.env.SANDBOX_RUN_CONFIG).toBeUndefined();
    expect(run.modelsJson).toEqual(input().containerModelsJson);
    expect(run.finalTool).toMatchObject({ parameters: { type: "object" } });
    expect(run.deadlineMs).toBe(60_000 + LAUNCHER_DEADLINE_GRACE_MS);
    expect(run.sockets.map((s) => s.name)).toEqual(["gateway"]);
    expect(run.forwards).toEqual([{ port: 18080, socketPath: "/run/sandbox-run/gateway.sock" }]);
  });
});
