// The run plan is pure data: these tests pin what a run will mount, whom it runs as, what it
// may reach and what it carries in its environment, without Docker.
import { describe, expect, it } from "vitest";
import {
  PI_CREDENTIAL_ENV_NAMES,
  planProviderRouting,
  SANDBOX_PLACEHOLDER_API_KEY,
} from "../../src/gateway/provider-routes.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { buildRunPlan, type PlanInput } from "../../src/run/plan/build-run-plan.js";
import {
  GATEWAY_SOCKET,
  LABEL_CREATED_AT,
  LABEL_DEADLINE,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_RUN_ID,
  PROXY_SOCKET,
  SANDBOX_UID,
} from "../../src/sandbox-contract.js";

const SECRET = "sk-unit-SECRET-9d1e";
const NOW = new Date("2030-01-02T03:04:05.000Z");

function routing() {
  return planProviderRouting({
    model: "scripted/x",
    modelsJson: {
      providers: {
        scripted: {
          baseUrl: "http://127.0.0.1:9/v1",
          api: "openai-completions",
          apiKey: SECRET,
          models: [{ id: "x" }],
        },
      },
    },
    env: {},
    gatewayBaseUrl: "http://127.0.0.1:18080",
  });
}

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
    caller: { uid: 1000, gid: 1001 },
    sandboxEnv: {},
    containerModelsJson: routing().containerModelsJson,
    extraArgs: [],
    timeoutMs: 60_000,
    owner: { pid: 4242, host: "builder" },
    now: NOW,
    ...overrides,
  };
}

describe("buildRunPlan: mounts", () => {
  it("mounts the workspace and writable roots read-write at the same absolute paths", () => {
    const plan = buildRunPlan(input({ writableRoots: ["/work/cache"], readOnlyMounts: ["/opt/data"] }));
    expect(plan.mounts).toEqual([
      { hostPath: "/work/project", containerPath: "/work/project", readOnly: false, kind: "workspace" },
      { hostPath: "/work/cache", containerPath: "/work/cache", readOnly: false, kind: "writable-root" },
      { hostPath: "/opt/data", containerPath: "/opt/data", readOnly: true, kind: "read-only" },
      { hostPath: "/tmp/sandbox-run-xyz/gateway.sock", containerPath: GATEWAY_SOCKET, readOnly: false, kind: "socket" },
    ]);
    expect(plan.workingDir).toBe("/work/project");
  });

  it("mounts the workspace read-only under the read-only policy", () => {
    const plan = buildRunPlan(input({ policy: loadPolicy("read-only") }));
    const workspace = plan.mounts.find((m) => m.kind === "workspace");
    expect(workspace).toEqual({
      hostPath: "/work/project",
      containerPath: "/work/project",
      readOnly: true,
      kind: "workspace",
    });
    // Nothing but the gateway socket is writable.
    expect(plan.mounts.filter((m) => !m.readOnly).map((m) => m.kind)).toEqual(["socket"]);
  });

  it("binds every mount point below a read-only tree read-only over it (Docker before 25 made only a bind's top read-only); nothing below a writable one, nothing in copy mode", () => {
    const below: Record<string, string[]> = {
      "/work/project": ["cache", "cache/deeper", ".venv"],
      "/opt/data": ["vol"],
      "/work/cache": ["tmp"],
    };
    const mountsInside = (p: string) => below[p] ?? [];
    const readOnlyRun = buildRunPlan(
      input({
        policy: loadPolicy("read-only"),
        writableRoots: ["/work/cache"],
        readOnlyMounts: ["/opt/data"],
        mountsInside,
      }),
    );
    expect(readOnlyRun.mounts.filter((m) => !["workspace", "writable-root", "socket"].includes(m.kind))).toEqual([
      { hostPath: "/opt/data", containerPath: "/opt/data", readOnly: true, kind: "read-only" },
      {
        hostPath: "/work/project/cache",
        containerPath: "/work/project/cache",
        readOnly: true,
        kind: "protected",
        cover: true,
      },
      {
        hostPath: "/work/project/cache/deeper",
        containerPath: "/work/project/cache/deeper",
        readOnly: true,
        kind: "protected",
        cover: true,
      },
      {
        hostPath: "/work/project/.venv",
        containerPath: "/work/project/.venv",
        readOnly: true,
        kind: "protected",
        cover: true,
      },
      { hostPath: "/opt/data/vol", containerPath: "/opt/data/vol", readOnly: true, kind: "read-only", cover: true },
    ]);
    // Below the workspace as the sandbox sees it, wherever that is.
    const moved = buildRunPlan(
      input({ policy: loadPolicy("read-only"), sandboxCwd: "/workspace", mountsInside: () => ["cache"] }),
    );
    expect(moved.mounts).toContainEqual({
      hostPath: "/work/project/cache",
      containerPath: "/workspace/cache",
      readOnly: true,
      kind: "protected",
      cover: true,
    });
    // A writable workspace's mount points are the workspace's (judged after the run: F8).
    const writable = buildRunPlan(input({ writableRoots: ["/work/cache"], mountsInside }));
    expect(writable.mounts.filter((m) => m.kind === "protected")).toEqual([]);
    expect(
      buildRunPlan(input({ policy: loadPolicy("read-only"), mountsInside, workspaceMode: "copy" })).mounts,
    ).toEqual([]);
  });

  it("adds no proxy socket without allowlist networking, and one with it", () => {
    expect(buildRunPlan(input()).mounts.some((m) => m.containerPath === PROXY_SOCKET)).toBe(false);
    const allowlist: Policy = {
      ...loadPolicy("workspace-write"),
      network: "allowlist",
      allowedDomains: ["registry.npmjs.org"],
    };
    const plan = buildRunPlan(input({ policy: allowlist }));
    expect(plan.mounts).toContainEqual({
      hostPath: "/tmp/sandbox-run-xyz/proxy.sock",
      containerPath: PROXY_SOCKET,
      readOnly: false,
      kind: "socket",
    });
    expect(plan.env.HTTPS_PROXY).toBe("http://127.0.0.1:18081");
    expect(plan.network).toBe("none");
    // The registry is reachable through the proxy: npm is not told it is offline.
    expect(plan.env.NPM_CONFIG_OFFLINE).toBeUndefined();
  });
});

describe("buildRunPlan: user and tmpfs", () => {
  it("runs as the caller's uid:gid and sizes the tmpfs mounts from the policy", () => {
    const plan = buildRunPlan(input());
    expect(plan.user).toBe("1000:1001");
    expect(plan.handBackTo).toBeUndefined();
    expect(plan.tmpfs).toEqual({
      "/tmp": "rw,nosuid,nodev,exec,size=512m,mode=1777",
      "/home/sandbox": "rw,nosuid,nodev,exec,size=64m,uid=1000,gid=1001,mode=0700",
    });
  });

  it("never runs as root: a root caller gets uid 65532 and the tree is handed back to root", () => {
    const plan = buildRunPlan(input({ caller: { uid: 0, gid: 0 } }));
    expect(plan.user).toBe(`${SANDBOX_UID}:${SANDBOX_UID}`);
    expect(SANDBOX_UID).toBe(65532);
    expect(plan.handBackTo).toEqual({ uid: 0, gid: 0 });
    expect(plan.tmpfs["/home/sandbox"]).toContain("uid=65532,gid=65532");
  });

  it("takes tmpfs sizes from the policy's limits", () => {
    const policy = loadPolicy("read-only");
    const plan = buildRunPlan(input({ policy: { ...policy, limits: { ...policy.limits, tmpMb: 7, homeMb: 3 } } }));
    expect(plan.tmpfs["/tmp"]).toContain("size=7m");
    expect(plan.tmpfs["/home/sandbox"]).toContain("size=3m");
  });
});

describe("buildRunPlan: network", () => {
  it.each([
    ["read-only", "none"],
    ["workspace-write", "none"],
    ["danger-full-access", "bridge"],
  ] as const)("policy %s -> network %s", (name, network) => {
    expect(buildRunPlan(input({ policy: loadPolicy(name) })).network).toBe(network);
  });
});

describe("buildRunPlan: labels", () => {
  it("labels the container so gc can find it and knows its owner and deadline", () => {
    const plan = buildRunPlan(input());
    expect(plan.labels).toEqual({
      [LABEL_MANAGED]: "true",
      [LABEL_RUN_ID]: "abc123",
      [LABEL_OWNER_PID]: "4242",
      [LABEL_OWNER_HOST]: "builder",
      [LABEL_CREATED_AT]: "2030-01-02T03:04:05.000Z",
      [LABEL_DEADLINE]: "2030-01-02T03:05:05.000Z",
    });
  });
});

describe("buildRunPlan: environment", () => {
  it("carries only the caller's sandbox variables and its own, never host credentials", () => {
    const added = PI_CREDENTIAL_ENV_NAMES.filter((name) => process.env[name] === undefined);
    try {
      // Even with credentials in the host environment, the plan's env comes only from its input.
      for (const name of added) process.env[name] = `host-secret-${name}`;
      const plan = buildRunPlan(input({ sandboxEnv: { MY_FLAG: "1" } }));
      expect(plan.env.MY_FLAG).toBe("1");
      for (const name of PI_CREDENTIAL_ENV_NAMES) expect(plan.env).not.toHaveProperty(name);
      expect(JSON.stringify(plan)).not.toContain("host-secret-");
      expect(Object.keys(plan.env).sort()).toEqual(
        [
          // git's highest-precedence configuration: no repository-chosen command runs (git-safety-env.ts).
          "GIT_CONFIG_COUNT",
          "GIT_CONFIG_KEY_0",
          "GIT_CONFIG_KEY_1",
          "GIT_CONFIG_KEY_2",
          "GIT_CONFIG_KEY_3",
          "GIT_CONFIG_KEY_4",
          "GIT_CONFIG_KEY_5",
          "GIT_CONFIG_VALUE_0",
          "GIT_CONFIG_VALUE_1",
          "GIT_CONFIG_VALUE_2",
          "GIT_CONFIG_VALUE_3",
          "GIT_CONFIG_VALUE_4",
          "GIT_CONFIG_VALUE_5",
          "GIT_PAGER",
          "HOME",
          "LANG",
          "MY_FLAG",
          // No way out at all (network none, no proxy): npm fails at once (session 29).
          "NPM_CONFIG_OFFLINE",
          "PI_CODING_AGENT_DIR",
          "PI_OFFLINE",
          "PI_SKIP_VERSION_CHECK",
          "PI_TELEMETRY",
          "SANDBOX_RUN_CONFIG",
          "TMPDIR",
        ].sort(),
      );
    } finally {
      for (const name of added) delete process.env[name];
    }
  });

  it("npm is offline only where nothing leaves the sandbox, and the caller may say otherwise (session 29)", () => {
    expect(buildRunPlan(input()).env.NPM_CONFIG_OFFLINE).toBe("true");
    expect(buildRunPlan(input({ sandboxEnv: { NPM_CONFIG_OFFLINE: "false" } })).env.NPM_CONFIG_OFFLINE).toBe("false");
    const open = buildRunPlan(input({ policy: { ...input().policy, network: "open" } }));
    expect(open.env.NPM_CONFIG_OFFLINE).toBeUndefined();
  });

  it("does not let a caller variable override what the sandbox relies on", () => {
    const plan = buildRunPlan(input({ sandboxEnv: { HOME: "/root", PI_OFFLINE: "0" } }));
    expect(plan.env.HOME).toBe("/home/sandbox");
    expect(plan.env.PI_OFFLINE).toBe("1");
  });

  it("SANDBOX_RUN_CONFIG carries the models.json with placeholder keys pointing at the gateway", () => {
    const plan = buildRunPlan(input());
    const raw = plan.env.SANDBOX_RUN_CONFIG!;
    expect(raw).not.toContain(SECRET);
    const config = JSON.parse(raw);
    const provider = config.modelsJson.providers.scripted;
    expect(provider.apiKey).toBe(SANDBOX_PLACEHOLDER_API_KEY);
    expect(provider.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:18080\//);
    expect(config.forwards).toEqual([{ port: 18080, socketPath: GATEWAY_SOCKET }]);
    expect(config.finalTool).toBeNull();
    expect(JSON.stringify(plan)).not.toContain(SECRET);
  });

  it("puts the caller's schema on the final tool in schema mode", () => {
    const schema = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
    const plan = buildRunPlan(input({ schema }));
    const config = JSON.parse(plan.env.SANDBOX_RUN_CONFIG!);
    expect(config.finalTool).toMatchObject({ name: FINAL_TOOL_NAME, parameters: schema });
    expect(plan.finalToolName).toBe(FINAL_TOOL_NAME);
  });
});
