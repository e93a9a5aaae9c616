// Copy mode as plan data: no host path is mounted, every tree becomes a tmpfs at its own path, the
// launcher waits for the relay and holds on after Pi; the mode is chosen by option, policy and
// engine. Also: the launcher's and the relay's own copies of the shared numbers and paths agree.
import fs from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { IMAGE_DIR } from "../../src/image/runner-image.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { FULL_FREE_BYTES, RELAY_EXIT, RELAY_PATHS } from "../../src/relay/relay-protocol.js";
import { buildRunPlan, type PlanInput } from "../../src/run/plan/build-run-plan.js";
import { type PlanPlace, preparePlan } from "../../src/run/plan/prepare-plan.js";
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
import {
  type PerUserLimits,
  readPerUserLimits,
  SAFE_PER_USER_SYSCTLS,
  sharedUidProblem,
} from "../../src/util/per-user-limits.js";
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
  // Per-uid limits no sandbox can use up, unless a test says otherwise (see the last tests).
  const roomy: PerUserLimits = { epollWatches: Number(SAFE_PER_USER_SYSCTLS["fs.epoll.max_user_watches"]) };
  const planned = (options: Record<string, unknown>, place: Partial<PlanPlace> = {}) =>
    preparePlan(
      resolveRun("go", {}, { model: "anthropic/x", cwd: makeWorkspace(), ...options }, { ANTHROPIC_API_KEY: "k" }),
      { image: "i", perUserLimits: roomy, ...place },
    );
  const plan = (options: Record<string, unknown>, place: Partial<PlanPlace> = {}) => planned(options, place).plan;
  afterEach(() => {
    vi.restoreAllMocks();
  });

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

  // Review, session 34: a controller in a container on the host's docker socket had the engine mount
  // the host's own folder of the workspace's name; bind mode by default let the sandbox read and write it.
  it("a controller in a container defaults to copy mode on a local engine, saying why; bind stays when asked for", () => {
    const chosen = planned({}, { controllerContainer: "its init's cgroup is /docker/abc" });
    expect(chosen.plan.workspaceMode).toBe("copy");
    expect(chosen.copyModeReason).toContain(
      "sandbox-run runs in a container (its init's cgroup is /docker/abc), and an engine reached through a mounted socket mounts the folders of its own host",
    );
    expect(plan({ workspaceMode: "bind" }, { controllerContainer: "x" }).workspaceMode).toBe("bind");
    expect(plan({}, { controllerContainer: "" }).workspaceMode).toBe("bind");
  });

  // This host's default (4 % of its memory): one 2 GiB sandbox holds more watches than that.
  const tight: PerUserLimits = { epollWatches: 5_491_667 };

  it("a non-root caller's bind-mode sandbox, which runs as the caller's uid, goes to copy mode where it could use up the caller's epoll watches", () => {
    vi.spyOn(process as { getuid(): number }, "getuid").mockReturnValue(1500);
    const chosen = planned({}, { perUserLimits: tight });
    expect(chosen.plan.workspaceMode).toBe("copy");
    expect(chosen.plan.user).toBe(`${SANDBOX_UID}:${SANDBOX_UID}`);
    expect(chosen.copyModeReason).toMatch(
      /lets one user hold 5,491,667 epoll watches \(fs.epoll.max_user_watches\), fewer than its memory can buy/,
    );
    expect(chosen.copyModeReason).toContain("fs.epoll.max_user_watches = 1099511627776");
    // Asked for by name, bind mode is refused, saying how to get it.
    expect(() => plan({ workspaceMode: "bind" }, { perUserLimits: tight })).toThrow(
      /Bind mode runs the sandbox as your own uid/,
    );
    // Where the host's memory runs out first, or the sandbox is not the caller's uid, or runs under gVisor: bind mode.
    expect(plan({}, { perUserLimits: roomy }).workspaceMode).toBe("bind");
    expect(planned({}, { perUserLimits: roomy }).copyModeReason).toBeUndefined();
    expect(plan({ runtime: "runsc" }, { perUserLimits: tight }).workspaceMode).toBe("bind");
    vi.spyOn(process as { getuid(): number }, "getuid").mockReturnValue(0);
    expect(plan({}, { perUserLimits: tight }).workspaceMode).toBe("bind");
  });

  it("reads the host's limits from /proc, and a limit it cannot read judges nothing", () => {
    const files: Record<string, string> = {
      "/proc/sys/fs/epoll/max_user_watches": "5491667\n",
      "/proc/sys/fs/inotify/max_user_instances": "128\n",
    };
    const read = (file: string) => {
      if (!(file in files)) throw new Error("ENOENT");
      return files[file]!;
    };
    expect(readPerUserLimits(read)).toEqual({ epollWatches: 5_491_667, inotifyInstances: 128 });
    // Judged against the host's whole memory (sandboxes of one uid count together): 24 GiB here.
    const host = 24 * 1024 ** 3;
    expect(sharedUidProblem(readPerUserLimits(read), host)).toMatch(
      /5,491,667 epoll watches .* and 128 inotify instances/,
    );
    expect(sharedUidProblem({ epollWatches: 5_491_667 }, 512 * 1024 ** 2)).toBeUndefined();
    expect(sharedUidProblem({ epollWatches: 1e12, inotifyInstances: 128 }, host)).toMatch(
      /^this host lets one user hold 128 inotify instances/,
    );
    expect(readPerUserLimits(() => "junk")).toBeUndefined();
    expect(sharedUidProblem(undefined)).toBeUndefined();
    // scripts/setup-host.sh raises the limits to these numbers, which no memory limit can reach.
    const setup = fs.readFileSync("scripts/setup-host.sh", "utf8");
    for (const [key, value] of Object.entries(SAFE_PER_USER_SYSCTLS)) expect(setup).toContain(`${key} = ${value}`);
    expect(
      sharedUidProblem(
        {
          epollWatches: Number(SAFE_PER_USER_SYSCTLS["fs.epoll.max_user_watches"]),
          inotifyInstances: Number(SAFE_PER_USER_SYSCTLS["fs.inotify.max_user_instances"]),
        },
        512 * 1024 ** 3,
      ),
    ).toBeUndefined();
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
