// Copy mode as plan data: no host path is mounted, every tree becomes a tmpfs at its own path, the
// launcher waits for the relay and holds on after Pi; the mode is chosen by option, policy and
// engine. Also: the launcher's and the relay's own copies of the shared numbers and paths agree.
import fs from "node:fs";
import { describe, expect, it } from "vitest";
import { IMAGE_DIR } from "../../src/image/runner-image.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { FULL_FREE_BYTES, RELAY_EXIT, RELAY_PATHS } from "../../src/relay/relay-protocol.js";
import { buildRunPlan, type PlanInput } from "../../src/run/plan/build-run-plan.js";
import { preparePlan } from "../../src/run/plan/prepare-plan.js";
import { resolveRun } from "../../src/run/plan/resolve-options.js";
import {
  CA_BUNDLE_ENV_NAMES,
  GATEWAY_SOCKET,
  IMAGE_PATHS,
  LABEL_HAND_BACK,
  LAUNCHER_DEADLINE_GRACE_MS,
  LAUNCHER_EXIT,
  READ_ONLY_OWNER_UID,
  RELAY_BRIDGE_SOCKET,
  SANDBOX_CA_BUNDLE,
  SANDBOX_TRUST_BUNDLE,
  SANDBOX_UID,
  SYSTEM_CA_BUNDLE,
} from "../../src/sandbox-contract.js";
import { UNCHANGED_PAX_KEY } from "../../src/workspace-transfer/tar-header.js";
import { makeWorkspace } from "../support/harness.js";

function input(overrides: Partial<PlanInput> = {}): PlanInput {
  return {
    runId: "abc123",
    image: "sandbox-run/pi:test",
    policy: loadPolicy("workspace-write"),
    model: "scripted/x",
    cwd: "/work/project",
    writableRoots: ["/work/cache"],
    readOnlyMounts: [],
    runDir: "/tmp/sandbox-run-xyz",
    caller: { uid: 0, gid: 0 },
    sandboxEnv: {},
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 60_000,
    owner: { pid: 42, host: "host" },
    now: new Date("2030-01-02T03:04:05.000Z"),
    workspaceMode: "copy",
    protectedMounts: ["/work/project/.git/hooks"],
    ...overrides,
  };
}

const launcherConfig = (env: Record<string, string>) => JSON.parse(env.SANDBOX_RUN_CONFIG!);

describe("the copy-mode plan", () => {
  it("mounts no host path: the trees are tmpfs copies at their own paths, the sockets come through the relay", () => {
    const policy = parsePolicy(
      {
        ...loadPolicy("workspace-write"),
        readOnlyMounts: [],
        trustHostCaBundle: true,
        // Each copied tree's tmpfs is the size of the disk limit.
        limits: { ...loadPolicy("workspace-write").limits, diskMb: 256 },
      },
      "test",
    );
    const plan = buildRunPlan(input({ policy, readOnlyMounts: ["/opt/data"], hostCaBundle: "/etc/ca.crt" }));
    expect(plan.workspaceMode).toBe("copy");
    expect(plan.mounts).toEqual([]);
    expect(plan.copies).toEqual([
      { hostPath: "/work/project", containerPath: "/work/project", kind: "workspace", writable: true },
      { hostPath: "/work/cache", containerPath: "/work/cache", kind: "writable-root", writable: true },
      { hostPath: "/opt/data", containerPath: "/opt/data", kind: "read-only", writable: false },
      { hostPath: "/etc/ca.crt", containerPath: SANDBOX_CA_BUNDLE, kind: "ca-bundle", writable: false },
    ]);
    expect(plan.tmpfs["/work/project"]).toBe(
      `rw,exec,nosuid,nodev,size=256m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0755`,
    );
    expect(plan.tmpfs["/work/cache"]).toContain(`uid=${SANDBOX_UID}`);
    expect(plan.tmpfs["/opt/data"]).toContain(`uid=${READ_ONLY_OWNER_UID},gid=${READ_ONLY_OWNER_UID}`);
    expect(plan.tmpfs[IMAGE_PATHS.socketDir]).toContain(`uid=${SANDBOX_UID}`);
    for (const name of CA_BUNDLE_ENV_NAMES) expect(plan.env[name]).toBe(SANDBOX_CA_BUNDLE);
  });

  it("a run with secrets: the run's trust bundle replaces the system bundle through a small tmpfs over its folder (the read-only root takes no copy)", () => {
    const policy = parsePolicy(
      {
        ...loadPolicy("workspace-write"),
        network: "allowlist",
        allowedDomains: ["github.com"],
        secrets: { GITHUB_TOKEN: { hosts: ["github.com"], inject: ["bearer"] } },
      },
      "test",
    );
    const plan = buildRunPlan(input({ policy, secretPlaceholders: { GITHUB_TOKEN: "placeholder" } }));
    expect(plan.copies.filter((c) => c.kind === "ca-bundle").map((c) => c.containerPath)).toEqual([
      SANDBOX_TRUST_BUNDLE,
      SYSTEM_CA_BUNDLE,
    ]);
    expect(plan.tmpfs["/etc/ssl/certs"]).toBe(
      `rw,nosuid,nodev,noexec,size=8m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0755`,
    );
  });

  it("a read-only workspace belongs to the read-only owner, not to the sandbox", () => {
    const plan = buildRunPlan(input({ policy: loadPolicy("read-only"), writableRoots: [] }));
    expect(plan.copies).toEqual([
      { hostPath: "/work/project", containerPath: "/work/project", kind: "workspace", writable: false },
    ]);
    expect(plan.tmpfs["/work/project"]).toContain(`uid=${READ_ONLY_OWNER_UID}`);
    expect(plan.user).toBe(`${SANDBOX_UID}:${SANDBOX_UID}`);
  });

  it("runs as the sandbox uid whoever calls, and lends nothing", () => {
    for (const caller of [
      { uid: 0, gid: 0 },
      { uid: 1500, gid: 1500 },
    ]) {
      const plan = buildRunPlan(input({ caller }));
      expect(plan.user).toBe(`${SANDBOX_UID}:${SANDBOX_UID}`);
      expect(plan.handBackTo).toBeUndefined();
      expect(plan.labels[LABEL_HAND_BACK]).toBeUndefined();
    }
  });

  it("the launcher waits for the relay, holds on after Pi, and has a deadline (bind mode: the deadline only)", () => {
    const copy = launcherConfig(buildRunPlan(input()).env);
    expect(copy).toMatchObject({
      relayWaitMs: expect.any(Number),
      holdAfterPi: true,
      relay: { bridgeSocket: RELAY_BRIDGE_SOCKET, sockets: [{ name: "gateway", path: GATEWAY_SOCKET }] },
    });
    expect(copy.deadlineMs).toBe(60_000 + LAUNCHER_DEADLINE_GRACE_MS);
    const bind = launcherConfig(buildRunPlan(input({ workspaceMode: "bind" })).env);
    expect(bind.relayWaitMs).toBeUndefined();
    expect(bind.holdAfterPi).toBeUndefined();
    expect(bind.deadlineMs).toBe(60_000 + LAUNCHER_DEADLINE_GRACE_MS);
  });
});

describe("choosing the mode", () => {
  const plan = (options: Record<string, unknown>, place: { sharesHostFilesystem?: boolean } = {}) =>
    preparePlan(
      resolveRun("go", {}, { model: "anthropic/x", cwd: makeWorkspace(), ...options }, { ANTHROPIC_API_KEY: "k" }),
      { image: "i", ...place },
    ).plan;

  it("local engines default to bind; --workspace and the policy choose copy", () => {
    expect(plan({}).workspaceMode).toBe("bind");
    expect(plan({ workspaceMode: "copy" }).workspaceMode).toBe("copy");
    const policy = { ...loadPolicy("workspace-write"), workspaceMode: "copy" };
    expect(plan({ policy }).workspaceMode).toBe("copy");
    expect(plan({ policy, workspaceMode: "bind" }).workspaceMode).toBe("bind");
  });

  it("an engine that does not share this host's filesystem forces copy, and refuses an explicit bind", () => {
    expect(plan({}, { sharesHostFilesystem: false }).workspaceMode).toBe("copy");
    expect(() => plan({ workspaceMode: "bind" }, { sharesHostFilesystem: false })).toThrow(/cannot be bind-mounted/);
    expect(() => plan({ workspaceMode: "mirror" })).toThrow(/Unknown workspace mode "mirror"/);
  });
});

describe("the image's scripts keep the shared numbers", () => {
  it("launcher.mjs and relay.mjs exit with the codes the controller explains, and the relay uses its paths", () => {
    const launcher = fs.readFileSync(`${IMAGE_DIR}/launcher.mjs`, "utf8");
    expect(launcher).toContain(`EXIT_SETUP_FAILED = ${LAUNCHER_EXIT.setupFailed}`);
    expect(launcher).toContain(`EXIT_CONTROLLER_GONE = ${LAUNCHER_EXIT.controllerGone}`);
    expect(launcher).toContain(`EXIT_DEADLINE_PASSED = ${LAUNCHER_EXIT.deadlinePassed}`);
    expect(launcher).toContain(`const RELAY_MODULE = "${IMAGE_PATHS.relay}"`);
    const relay = fs.readFileSync(`${IMAGE_DIR}/relay.mjs`, "utf8");
    expect(relay).toContain(`EXIT_SETUP_FAILED = ${RELAY_EXIT.setupFailed}`);
    expect(relay).toContain(`EXIT_CONTROLLER_GONE = ${RELAY_EXIT.controllerGone}`);
    expect(relay).toContain(`"${RELAY_PATHS.control}"`);
    expect(relay).toContain(`\`${RELAY_PATHS.connectPrefix}\${name}\``);
    expect(relay).toContain(`\`${RELAY_PATHS.archivePrefix}\${command.id}\``);
    expect(relay).toContain(`"${UNCHANGED_PAX_KEY}"`);
    expect(relay).toContain(`FULL_FREE_BYTES = ${FULL_FREE_BYTES};`);
    expect(fs.readFileSync(`${IMAGE_DIR}/Dockerfile`, "utf8")).toMatch(
      /COPY [^\n]*relay\.mjs[^\n]* \/opt\/sandbox-run\//,
    );
  });
});
