// The run plan: everything one call will do, as plain data. Built by a pure function from resolved
// options, printed by --dry-run, turned into a container by engine/, and tested without an engine.
import type { JsonSchema } from "../../agent.js";
import { usageError } from "../../errors.js";
import { buildPiArgs, FINAL_TOOL_DESCRIPTION, FINAL_TOOL_NAME, FINAL_TOOL_REMINDER } from "../../pi/pi-args.js";
import type { Policy } from "../../policy/policy-schema.js";
import { SANDBOX_TRUST_FILE } from "../../proxy/sandbox-trust-file.js";
import { secretSandboxEnv } from "../../proxy/secret-env.js";
import { DEFAULT_RELAY_LIMITS } from "../../relay/relay-protocol.js";
import {
  CA_BUNDLE_ENV_NAMES,
  containerLabels,
  GATEWAY_PORT,
  GATEWAY_SOCKET,
  type HandBackMode,
  HOST_CA_BUNDLE,
  IMAGE_PATHS,
  LABEL_HAND_BACK,
  LABEL_LENT_ROOTS,
  LAUNCHER_COMMAND,
  LAUNCHER_DEADLINE_GRACE_MS,
  type Mount,
  PROXY_PORT,
  PROXY_SOCKET,
  RELAY_BRIDGE_SOCKET,
  type RunPlan,
  SANDBOX_CA_BUNDLE,
  SANDBOX_TRUST_BUNDLE,
  SANDBOX_UID,
  SYSTEM_CA_BUNDLE,
  WARM_PATHS,
  type WorkspaceMode,
} from "../../sandbox-contract.js";
import type { GitDrivers } from "../../workspace/git-config-scan.js";
import { copyModePlan } from "./copy-mode-plan.js";
import { gitSafetyEntries, withGitConfig } from "./git-safety-env.js";
import { bindModeEntrypoint } from "./no-setuid-filter.js";

export interface PlanInput {
  runId: string;
  image: string;
  policy: Policy;
  model: string;
  schema?: JsonSchema;
  /** Canonical (realpath) host paths. */
  cwd: string;
  /** Where the workspace appears inside the sandbox (Pi's cwd); default: its host path. */
  sandboxCwd?: string;
  writableRoots: string[];
  readOnlyMounts: string[];
  /** Host directory of this run's sockets (the gateway's, the proxy's). */
  runDir: string;
  /** Existing directories and files (canonical, inside cwd) that protectedPaths name as a whole. */
  protectedMounts?: string[];
  /**
   * The mount points below a host folder, relative to it, as this host's mount table lists them
   * (util/mount-table.ts mountPointsInside); default: none.
   */
  mountsInside?: (hostPath: string) => string[];
  /** Host CA bundle to mount when the policy trusts it; default HOST_CA_BUNDLE. */
  hostCaBundle?: string;
  /** Per-run placeholders of the policy's secrets, by variable name (the values stay on the host). */
  secretPlaceholders?: Record<string, string>;
  /** The git drivers the workspace's repository defines: neutralised inside the sandbox. */
  gitDrivers?: GitDrivers;
  caller: { uid: number; gid: number };
  sandboxEnv: Record<string, string>;
  containerModelsJson: unknown;
  extraArgs: string[];
  timeoutMs: number;
  owner: { pid: number; host: string; pidns?: string };
  now: Date;
  /** bind (default) or copy: see WorkspaceMode. */
  workspaceMode?: WorkspaceMode;
  /** What becomes of the workspace's judged changes; default apply. */
  handBack?: HandBackMode;
  /**
   * Plan for a warm sandbox (made before the call): copy mode, the workspace at WARM_PATHS.workspace
   * (unless sandboxCwd names another path) and the n-th writable root at WARM_PATHS.writableRoot/n.
   */
  warm?: boolean;
}

/** Copy mode: how long the launcher waits for the relay's sockets to appear before it gives up. */
const RELAY_WAIT_MS = 60_000;

// Its length is the plan literal at the end, field for field the RunPlan a reader compares it with.
export function buildRunPlan(input: PlanInput): RunPlan {
  const { policy } = input;
  // A warm sandbox's mount points exist before the call: it is always a copy-mode run.
  const copyMode = input.workspaceMode === "copy" || input.warm === true;
  // A root caller's trees are lent to the sandbox uid for the run. Copy mode lends nothing: the
  // sandbox's uid means nothing on the host (the controller writes the changes back as the
  // caller), so it is always the fixed sandbox uid.
  const lends = input.caller.uid === 0 && !copyMode;
  const fixedUid = input.caller.uid === 0 || copyMode;
  const uid = fixedUid ? SANDBOX_UID : input.caller.uid;
  const gid = fixedUid ? SANDBOX_UID : input.caller.gid;
  const finalToolName = input.schema ? FINAL_TOOL_NAME : undefined;
  const sandboxCwd = input.sandboxCwd ?? (input.warm ? WARM_PATHS.workspace : input.cwd);
  const mounts = treeMounts(input, sandboxCwd);
  // Secrets (allowlist only): placeholders in the environment, the run's CA trusted (trustPlan).
  const secrets = policy.network === "allowlist" ? (policy.secrets ?? {}) : {};
  const gitEnv = withGitConfig(
    pickGitConfig(input.sandboxEnv),
    gitSafetyEntries(input.gitDrivers ?? { filters: [], diffs: [], merges: [], externalDiff: false }),
  );
  const secretEnv = secretSandboxEnv(secrets, input.secretPlaceholders ?? {}, { ...input.sandboxEnv, ...gitEnv });
  const { caMounts, caEnv } = trustPlan(input, Object.keys(secrets).length > 0);
  mounts.push(...caMounts);
  const { forwards, proxyEnv, proxyMounts } = egressPlan(input);
  mounts.push(...proxyMounts);

  // Each copied tree's tmpfs is as big as the disk the run may add to it (limits.diskMb): the
  // copy-mode disk limit is the filesystem's own, exact.
  const copy = copyMode ? copyModePlan(mounts, policy.limits.diskMb) : undefined;

  const agentDir = `${IMAGE_PATHS.home}/.pi/agent`;
  const launcherConfig = launcherConfigOf(input, { forwards, agentDir, copyMode });

  const env: Record<string, string> = {
    // No way out at all (no proxy, no open network): npm fails at once (ENOTCACHED) instead of
    // retrying DNS for ~75 s and ending in EAI_AGAIN, which reads as worth another try (review,
    // session 29). The caller's environment may say otherwise.
    ...(policy.network !== "open" && Object.keys(proxyEnv).length === 0 ? { NPM_CONFIG_OFFLINE: "true" } : {}),
    ...input.sandboxEnv,
    ...gitEnv,
    ...secretEnv,
    ...proxyEnv,
    ...caEnv,
    HOME: IMAGE_PATHS.home,
    TMPDIR: "/tmp",
    LANG: "C.UTF-8",
    PI_CODING_AGENT_DIR: agentDir,
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    PI_TELEMETRY: "0",
    ...(policy.runtime === "runsc" ? { PATH: `${IMAGE_PATHS.gvisorCompatBin}:${IMAGE_PATHS.path}` } : {}),
    SANDBOX_RUN_CONFIG: launcherConfigText(launcherConfig),
  };
  refuseOversizeEnvironment(env);

  return {
    runId: input.runId,
    image: input.image,
    ...(policy.platform ? { platform: policy.platform } : {}),
    runtime: policy.runtime,
    policyName: policy.name,
    model: input.model,
    user: `${uid}:${gid}`,
    handBackTo: lends ? { uid: input.caller.uid, gid: input.caller.gid } : undefined,
    workingDir: sandboxCwd,
    entrypoint: copyMode ? [...LAUNCHER_COMMAND] : bindModeEntrypoint(policy.platform, [...LAUNCHER_COMMAND], mounts),
    piArgs: buildPiArgs({
      finalToolExtension: IMAGE_PATHS.finalToolExtension,
      model: input.model,
      tools: policy.tools,
      finalToolName,
      contextFiles: policy.contextFiles,
      extraArgs: input.extraArgs,
    }),
    env,
    workspaceMode: copyMode ? "copy" : "bind",
    mounts: copy ? [] : [...mounts, ...readOnlyCovers(mounts, input.mountsInside)],
    copies: copy?.copies ?? [],
    handBack: input.handBack ?? "apply",
    tmpfs: {
      // exec: `go test` and `go run` run the binaries they build in $TMPDIR, and a read-only run has no
      // other place to build in (review, session 27: every go test failed). noexec guarded nothing
      // the sandbox cannot do anyway: interpreters run any code (perl's syscall() any system call),
      // and a writable workspace is exec. $HOME likewise: npx, `npm exec` and `npm create` run what
      // they install in ~/.npm/_npx, and under noexec each failed "Permission denied" (review, session 29).
      "/tmp": `rw,nosuid,nodev,exec,size=${policy.limits.tmpMb}m,mode=1777`,
      [IMAGE_PATHS.home]: `rw,nosuid,nodev,exec,size=${policy.limits.homeMb}m,uid=${uid},gid=${gid},mode=0700`,
      ...copy?.tmpfs,
    },
    network: policy.network === "open" ? "bridge" : "none",
    limits: policy.limits,
    labels: {
      ...containerLabels({
        runId: input.runId,
        pid: input.owner.pid,
        host: input.owner.host,
        ...(input.owner.pidns ? { pidns: input.owner.pidns } : {}),
        createdAt: input.now,
        deadline: new Date(input.now.getTime() + input.timeoutMs),
      }),
      // Let `gc` hand every lent tree back (any mode) if this controller dies before it can.
      ...(lends
        ? {
            [LABEL_HAND_BACK]: `${input.caller.uid}:${input.caller.gid}`,
            [LABEL_LENT_ROOTS]: JSON.stringify([input.cwd, ...input.writableRoots]),
          }
        : {}),
    },
    finalToolName,
    schema: input.schema,
    ...(input.warm ? { warmShaped: true } : {}),
  };
}

/** The trees the sandbox sees (and, in copy mode, gets copies of) and the gateway's socket. */
function treeMounts(input: PlanInput, sandboxCwd: string): Mount[] {
  const { policy } = input;
  // A host path inside the workspace, as the sandbox sees it.
  const inSandbox = (hostPath: string) =>
    hostPath === input.cwd ? sandboxCwd : `${sandboxCwd}${hostPath.slice(input.cwd.length)}`;

  const mounts: Mount[] = [
    { hostPath: input.cwd, containerPath: sandboxCwd, readOnly: policy.workspace === "read-only", kind: "workspace" },
    ...input.writableRoots.map(
      (p, i): Mount => ({
        hostPath: p,
        containerPath: input.warm ? `${WARM_PATHS.writableRoot}/${i}` : p,
        readOnly: false,
        kind: "writable-root",
      }),
    ),
    ...input.readOnlyMounts.map((p): Mount => ({ hostPath: p, containerPath: p, readOnly: true, kind: "read-only" })),
    { hostPath: `${input.runDir}/gateway.sock`, containerPath: GATEWAY_SOCKET, readOnly: false, kind: "socket" },
  ];
  // Read-only over the read-write workspace: writes there fail with EROFS (the post-run diff
  // catches what a mount cannot). Pointless when the whole workspace is read-only.
  if (policy.workspace === "read-write") {
    for (const p of input.protectedMounts ?? [])
      mounts.push({ hostPath: p, containerPath: inSandbox(p), readOnly: true, kind: "protected" });
  }
  return mounts;
}

/**
 * A read-only bind of every mount point below each read-only tree (bind mode): the engine binds a
 * tree with what is mounted below it, and Docker before 25 (API 1.44) makes only the top of such a
 * bind read-only, so a tmpfs, cache volume or bind mount inside a read-only workspace,
 * `readOnlyMounts` folder or protected folder stayed writable: a read-only run planted a git
 * config there, and the host's next `git status` ran it (review, session 33). gVisor made them
 * read-only; runc did not. The engine mounts the covers after their tree (it sorts by depth).
 * Inside the workspace they are protected mounts (checked again after a run waited for the tree).
 */
export function readOnlyCovers(mounts: readonly Mount[], mountsInside?: (hostPath: string) => string[]): Mount[] {
  if (!mountsInside) return [];
  const covers: Mount[] = [];
  const seen = new Set(mounts.map((m) => m.containerPath));
  for (const mount of mounts) {
    if (!mount.readOnly || mount.kind === "socket" || mount.kind === "ca-bundle" || mount.cover) continue;
    for (const below of mountsInside(mount.hostPath)) {
      const containerPath = `${mount.containerPath}/${below}`;
      if (seen.has(containerPath)) continue;
      seen.add(containerPath);
      covers.push({
        hostPath: `${mount.hostPath}/${below}`,
        containerPath,
        readOnly: true,
        kind: mount.kind === "read-only" ? "read-only" : "protected",
        cover: true,
      });
    }
  }
  return covers;
}

/**
 * The CA bundles the sandbox trusts: the host's (trustHostCaBundle), and with secrets the run's own
 * CA through a bundle the egress proxy's run folder holds (see proxy/sandbox-trust.ts).
 */
function trustPlan(input: PlanInput, withSecrets: boolean): { caMounts: Mount[]; caEnv: Record<string, string> } {
  const caMounts: Mount[] = [];
  const caEnv: Record<string, string> = {};
  if (input.policy.trustHostCaBundle) {
    caMounts.push({
      hostPath: input.hostCaBundle ?? HOST_CA_BUNDLE,
      containerPath: SANDBOX_CA_BUNDLE,
      readOnly: true,
      kind: "ca-bundle",
    });
    for (const name of CA_BUNDLE_ENV_NAMES) caEnv[name] = SANDBOX_CA_BUNDLE;
  }
  if (withSecrets) {
    const hostPath = `${input.runDir}/${SANDBOX_TRUST_FILE}`;
    for (const containerPath of [SANDBOX_TRUST_BUNDLE, SYSTEM_CA_BUNDLE])
      caMounts.push({ hostPath, containerPath, readOnly: true, kind: "ca-bundle" });
    for (const name of CA_BUNDLE_ENV_NAMES) caEnv[name] = SANDBOX_TRUST_BUNDLE;
  }
  return { caMounts, caEnv };
}

/** An allow-list policy's proxy: its socket, the port the launcher forwards, and the env that points at it. */
function egressPlan(input: PlanInput) {
  const forwards = [{ port: GATEWAY_PORT, socketPath: GATEWAY_SOCKET }];
  if (input.policy.network !== "allowlist") return { forwards, proxyEnv: {}, proxyMounts: [] as Mount[] };
  forwards.push({ port: PROXY_PORT, socketPath: PROXY_SOCKET });
  const proxyUrl = `http://127.0.0.1:${PROXY_PORT}`;
  const proxyEnv: Record<string, string> = {
    HTTP_PROXY: proxyUrl,
    HTTPS_PROXY: proxyUrl,
    http_proxy: proxyUrl,
    https_proxy: proxyUrl,
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
    // Node (24) ignores HTTP(S)_PROXY for fetch and http unless told to honour them.
    NODE_USE_ENV_PROXY: "1",
  };
  const proxyMounts: Mount[] = [
    { hostPath: `${input.runDir}/proxy.sock`, containerPath: PROXY_SOCKET, readOnly: false, kind: "socket" },
  ];
  return { forwards, proxyEnv, proxyMounts };
}

/** What the launcher inside the image reads from SANDBOX_RUN_CONFIG (images/pi/launcher.mjs). */
function launcherConfigOf(
  input: PlanInput,
  {
    forwards,
    agentDir,
    copyMode,
  }: { forwards: Array<{ port: number; socketPath: string }>; agentDir: string; copyMode: boolean },
) {
  return {
    forwards,
    livenessSocket: GATEWAY_SOCKET,
    // Copy mode: wait for the relay's sockets; the controller answers the liveness request once
    // the workspace is copied in, and the launcher then stays up (Pi's exit would stop the
    // container) until the controller has read the workspace back and stops it.
    ...(copyMode
      ? {
          relayWaitMs: RELAY_WAIT_MS,
          holdAfterPi: true,
          // The relay runs in the launcher; the controller's bridge exec reaches it on this socket.
          relay: {
            bridgeSocket: RELAY_BRIDGE_SOCKET,
            socketDir: IMAGE_PATHS.socketDir,
            sockets: forwards.map((f) => ({ name: f.port === PROXY_PORT ? "proxy" : "gateway", path: f.socketPath })),
            windowBytes: DEFAULT_RELAY_LIMITS.windowBytes,
            maxSessionMemoryMb: DEFAULT_RELAY_LIMITS.maxSessionMemoryMb,
          },
        }
      : {}),
    // A lost controller, host or link cannot leave the sandbox running past this.
    deadlineMs: input.timeoutMs + LAUNCHER_DEADLINE_GRACE_MS,
    agentDir,
    modelsJson: input.containerModelsJson,
    piCli: IMAGE_PATHS.piCli,
    finalTool: input.schema
      ? {
          name: FINAL_TOOL_NAME,
          description: FINAL_TOOL_DESCRIPTION,
          parameters: input.schema,
          reminder: FINAL_TOOL_REMINDER,
        }
      : null,
  };
}

/**
 * Linux holds at most 128 KiB in one environment string (MAX_ARG_STRLEN): past it the container's
 * entrypoint fails to start ("argument list too long"), and a larger create request is refused by the
 * engine with HTTP 431, which read as "Docker unavailable" (review, session 31: a 130 KB schema).
 */
const MAX_ENV_STRING_BYTES = 128 * 1024;

function launcherConfigText(config: ReturnType<typeof launcherConfigOf>): string {
  const text = JSON.stringify(config);
  const bytes = Buffer.byteLength(`SANDBOX_RUN_CONFIG=${text}`) + 1;
  if (bytes <= MAX_ENV_STRING_BYTES) return text;
  const kib = (n: number) => `${Math.ceil(n / 1024)} KiB`;
  const schema = config.finalTool ? Buffer.byteLength(JSON.stringify(config.finalTool.parameters)) : 0;
  const models = Buffer.byteLength(JSON.stringify(config.modelsJson ?? null));
  throw usageError(
    `The sandbox's configuration is ${kib(bytes)}, over the ${kib(MAX_ENV_STRING_BYTES)} it is handed in (one environment variable): the schema takes ${kib(schema)} of it, the models file's providers ${kib(models)}.`,
    schema >= models
      ? "Give a smaller schema: shorter descriptions, fewer enum values, $defs for repeated parts."
      : "Give a models file with only the providers this run uses.",
  );
}

/**
 * The whole environment a sandbox starts with: every variable (the caller's `env` too) within the
 * 128 KiB one string may hold, and all of them within MAX_ENV_TOTAL_BYTES: past those the start
 * failed as an engine error (a raw HTTP 409, or 431 read as "Docker unavailable"; review, session 31).
 */
const MAX_ENV_TOTAL_BYTES = 1024 * 1024;

function refuseOversizeEnvironment(env: Record<string, string>): void {
  let total = 0;
  for (const [name, value] of Object.entries(env)) {
    const bytes = Buffer.byteLength(`${name}=${value}`) + 1;
    total += bytes;
    if (bytes > MAX_ENV_STRING_BYTES)
      throw usageError(
        `The variable ${name} is ${Math.ceil(bytes / 1024)} KiB, over the ${MAX_ENV_STRING_BYTES / 1024} KiB one environment variable may hold on Linux.`,
        "Pass a large value as a file in the workspace instead, and its path in the variable.",
      );
  }
  if (total > MAX_ENV_TOTAL_BYTES)
    throw usageError(
      `The sandbox's environment is ${Math.ceil(total / 1024)} KiB, over the ${MAX_ENV_TOTAL_BYTES / 1024} KiB it may hold.`,
      "Pass large values as files in the workspace instead, and their paths in the variables.",
    );
}

/** The caller's own GIT_CONFIG_* entries, which ours are appended after. */
function pickGitConfig(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => /^GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+)$/.test(name)),
  );
}
