// What a warm sandbox is made of before any call names its task: the parts of a run plan that are
// fixed when a container is created (image, runtime, user, limits, tmpfs mounts and their sizes,
// network, working directory, which trees are copied in where, the environment Pi starts with).
// A call whose plan has the same shape can be served by a warm sandbox; everything else of the
// plan (the trees' content, the model's route, the schema, the environment of the tools, Pi's
// argv) reaches the sandbox at its claim. All pure: plans in, data out.
import type { ContainerSpec } from "../../engine/engine.js";
import { DEFAULT_RELAY_LIMITS } from "../../relay/relay-protocol.js";
import {
  type CopyRoot,
  containerLabels,
  IMAGE_PATHS,
  LABEL_IDLE_DEADLINE,
  LABEL_OWNER_TOKEN,
  LABEL_WARM,
  LAUNCHER_COMMAND,
  LAUNCHER_DEADLINE_GRACE_MS,
  RELAY_BRIDGE_SOCKET,
  type RunPlan,
  WARM_PATHS,
} from "../../sandbox-contract.js";
import type { RunnerPlatform } from "../../util/platform.js";
import { containerSpecOf } from "./container-spec.js";

/** Variables Pi's process needs from its start (the launcher adds the run's own at the claim). */
const START_ENV = [
  "HOME",
  "TMPDIR",
  "LANG",
  "PATH",
  "PI_CODING_AGENT_DIR",
  "PI_OFFLINE",
  "PI_SKIP_VERSION_CHECK",
  "PI_TELEMETRY",
] as const;

/** Variables Node reads once, when it starts: a warm sandbox's Node has started before the call. */
const NODE_START_ENV = /^(NODE_|UV_)/;

export interface WarmShape {
  image: string;
  /** The platform the sandbox runs as (another than the engine's: under its emulator); absent: the engine's own. */
  platform?: RunnerPlatform;
  runtime: string;
  user: string;
  workingDir: string;
  network: "none" | "bridge";
  limits: ContainerSpec["limits"];
  tmpfs: Record<string, string>;
  /** The trees copied in at the claim, by where they go (never a host path). */
  copies: Array<{ containerPath: string; kind: CopyRoot["kind"]; writable: boolean }>;
  /** The environment the sandbox starts with. */
  env: Record<string, string>;
}

/** The shape of a planned call: what a warm sandbox must have been made with to serve it. */
export function warmShapeOf(plan: RunPlan): WarmShape {
  const spec = containerSpecOf(plan);
  const env: Record<string, string> = {};
  for (const name of START_ENV) if (plan.env[name] !== undefined) env[name] = plan.env[name];
  return {
    image: spec.image,
    ...(spec.platform ? { platform: spec.platform } : {}),
    runtime: spec.runtime,
    user: spec.user,
    workingDir: plan.workingDir,
    network: spec.network,
    limits: spec.limits,
    tmpfs: spec.tmpfs,
    copies: plan.copies.map(({ containerPath, kind, writable }) => ({ containerPath, kind, writable })),
    env,
  };
}

/** One string per shape: equal keys, equal shapes. */
export function warmShapeKey(shape: WarmShape): string {
  return stableJson(shape);
}

/** JSON with every object's keys in order, so equal data gives equal text. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

/**
 * Why a warm sandbox can never serve this plan whatever its shape, or undefined when one can. The
 * plan must be warm-shaped (planned with `warm`); `callerEnvNames` are the variables the caller set.
 */
export function warmIneligible(plan: RunPlan, callerEnvNames: readonly string[]): string | undefined {
  if (!plan.warmShaped || plan.workspaceMode !== "copy") return "the call was not planned for a warm sandbox";
  if (plan.network !== "none")
    return "its policy's network is open: a warm sandbox has no network before its claim, and a container's network is fixed when it is made";
  const startEnv = callerEnvNames.filter((name) => NODE_START_ENV.test(name));
  if (startEnv.length > 0)
    return `it sets ${startEnv.join(", ")}, which Node reads when it starts: a warm sandbox's Node has started already`;
  const mountPoints = Object.keys(plan.tmpfs);
  const unplaced = plan.copies.find(
    (c) =>
      !mountPoints.includes(c.kind === "ca-bundle" ? parentOf(c.containerPath) : c.containerPath) &&
      !(c.kind === "ca-bundle" && parentOf(c.containerPath) === IMAGE_PATHS.socketDir),
  );
  if (unplaced) return `${unplaced.containerPath} is not on a mount a warm sandbox can fill`;
  const fixed = [WARM_PATHS.workspace, WARM_PATHS.writableRoot];
  const clash = plan.copies.find(
    (c) => c.kind === "read-only" && fixed.some((p) => c.containerPath === p || c.containerPath.startsWith(`${p}/`)),
  );
  if (clash) return `the read-only mount ${clash.containerPath} is where a warm sandbox keeps the workspace`;
  // The warm layout puts writable roots at /writable/<n>: a workspace path there (the caller's, or
  // a replayed record's) would share a place with one, and each host tree would get the other's
  // files back (review). Trees that meet are never served warm; the cold plan keeps them apart.
  const trees = plan.copies.filter((c) => c.kind !== "ca-bundle").map((c) => c.containerPath);
  for (const [i, a] of trees.entries()) {
    const other = trees.find((b, j) => j !== i && (a === b || b.startsWith(`${a}/`)));
    if (other !== undefined) return `its trees ${a} and ${other} would meet in a warm sandbox's layout`;
  }
  return undefined;
}

/** How `shape` differs from the pool's `pool` shape, in words (undefined when they are equal). */
export function warmShapeDifference(shape: WarmShape, pool: WarmShape): string | undefined {
  const differences: string[] = [];
  const scalar = (field: "image" | "platform" | "runtime" | "user" | "workingDir" | "network", label: string) => {
    if (shape[field] !== pool[field])
      differences.push(`${label} ${shape[field] ?? "the engine's"} (the pool's: ${pool[field] ?? "the engine's"})`);
  };
  scalar("image", "image");
  scalar("platform", "platform");
  scalar("runtime", "runtime");
  scalar("user", "user");
  scalar("workingDir", "workspace path");
  scalar("network", "network");
  for (const [name, value] of Object.entries(shape.limits)) {
    const theirs = (pool.limits as Record<string, unknown>)[name];
    if (value !== theirs) differences.push(`limit ${name} ${value} (the pool's: ${theirs ?? "none"})`);
  }
  const trees = (s: WarmShape) =>
    s.copies.map((c) => `${c.containerPath}${c.writable ? "" : " (read-only)"}`).join(", ") || "none";
  if (stableJson(shape.copies) !== stableJson(pool.copies))
    differences.push(`trees ${trees(shape)} (the pool's: ${trees(pool)})`);
  if (stableJson(shape.tmpfs) !== stableJson(pool.tmpfs)) differences.push("tmpfs mounts or sizes");
  if (stableJson(shape.env) !== stableJson(pool.env)) differences.push("the environment Pi starts with");
  return differences.length > 0 ? differences.join("; ") : undefined;
}

export interface WarmSandboxIdentity {
  /** The sandbox's own id (`warm-...`): its container's run-id label and name until a call claims it. */
  warmId: string;
  /** `token`: random per process (LABEL_OWNER_TOKEN). */
  owner: { pid: number; host: string; token: string; pidns?: string };
  now: Date;
  /** Unclaimed for this long, it stops by itself. */
  idleMs: number;
  /** The longest run a claim may bring (its timeout): with idleMs, the container's overall deadline. */
  maxRunMs: number;
  /** Pi's provider APIs to load before the claim (e.g. "openai-completions"): the calls' likely ones. */
  preloadApis?: string[];
}

/**
 * The container of a warm sandbox of `shape`: the launcher in its waiting state, the relay's bridge
 * socket, no run configuration at all. Its labels make it ours (gc, start-up reaping) and give the
 * deadline past which any reaper may remove it: the idle deadline plus the longest run it may serve.
 */
export function warmContainerSpec(shape: WarmShape, identity: WarmSandboxIdentity): ContainerSpec {
  const { now, idleMs } = identity;
  const launcher = {
    warm: {
      idleMs,
      piCli: IMAGE_PATHS.piCli,
      preload: identity.preloadApis ?? [],
      relay: {
        bridgeSocket: RELAY_BRIDGE_SOCKET,
        socketDir: IMAGE_PATHS.socketDir,
        sockets: [],
        claim: true,
        windowBytes: DEFAULT_RELAY_LIMITS.windowBytes,
        maxSessionMemoryMb: DEFAULT_RELAY_LIMITS.maxSessionMemoryMb,
      },
    },
  };
  const deadline = new Date(now.getTime() + idleMs + identity.maxRunMs + LAUNCHER_DEADLINE_GRACE_MS);
  return {
    name: `sandbox-run-${identity.warmId}`,
    image: shape.image,
    // The engine checks the image is of it (and runs it under its emulator), as for a cold call.
    ...(shape.platform ? { platform: shape.platform } : {}),
    entrypoint: [...LAUNCHER_COMMAND],
    cmd: [],
    env: { ...shape.env, SANDBOX_RUN_CONFIG: JSON.stringify(launcher) },
    user: shape.user,
    workingDir: shape.workingDir,
    labels: {
      ...containerLabels({
        runId: identity.warmId,
        pid: identity.owner.pid,
        host: identity.owner.host,
        ...(identity.owner.pidns ? { pidns: identity.owner.pidns } : {}),
        createdAt: now,
        deadline,
      }),
      [LABEL_WARM]: "true",
      [LABEL_OWNER_TOKEN]: identity.owner.token,
      [LABEL_IDLE_DEADLINE]: new Date(now.getTime() + idleMs).toISOString(),
    },
    runtime: shape.runtime,
    network: shape.network,
    mounts: [],
    tmpfs: shape.tmpfs,
    limits: shape.limits,
    openStdin: true,
    init: true,
  };
}

/** What the claim hands the launcher: the run's part of its configuration (images/pi/launcher.mjs). */
interface ClaimedRunConfig {
  argv: string[];
  cwd: string;
  /** The run's environment (its tools inherit it), without the launcher's configuration. */
  env: Record<string, string>;
  forwards: Array<{ port: number; socketPath: string }>;
  agentDir: string;
  modelsJson: unknown;
  finalTool: unknown;
  /** From the claim: the run's timeout plus the launcher's grace. */
  deadlineMs: number;
}

/** The in-container sockets the relay listens on for this run (the gateway's, the proxy's). */
interface ClaimedSockets {
  sockets: Array<{ name: string; path: string }>;
}

/** The claim's configuration, read from the plan's own launcher configuration (built by buildRunPlan). */
export function claimedRunOf(plan: RunPlan): ClaimedRunConfig & ClaimedSockets {
  const { SANDBOX_RUN_CONFIG: raw, ...env } = plan.env;
  const launcher = JSON.parse(raw ?? "{}") as {
    forwards: ClaimedRunConfig["forwards"];
    agentDir: string;
    modelsJson: unknown;
    finalTool: unknown;
    deadlineMs: number;
    relay?: { sockets: ClaimedSockets["sockets"] };
  };
  return {
    argv: plan.piArgs,
    cwd: plan.workingDir,
    env,
    forwards: launcher.forwards,
    agentDir: launcher.agentDir,
    modelsJson: launcher.modelsJson,
    finalTool: launcher.finalTool,
    deadlineMs: launcher.deadlineMs,
    sockets: launcher.relay?.sockets ?? [],
  };
}

function parentOf(containerPath: string): string {
  return containerPath.slice(0, containerPath.lastIndexOf("/")) || "/";
}
