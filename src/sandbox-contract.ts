// What every layer agrees on: the sandbox's fixed paths, ports and uid, the launcher's exit
// codes, the labels on containers and images, and the run plan's shape. A leaf module: it imports
// nothing of ours, so engine/, pi/, gateway/, proxy/, workspace/ and run/ can all depend on it
// without depending on each other.
import type { JsonSchema, SandboxMode } from "./agent.js";
import type { RunnerPlatform } from "./util/platform.js";

export const SANDBOX_MODES: readonly SandboxMode[] = Object.freeze([
  "read-only",
  "workspace-write",
  "danger-full-access",
]);

/** Paths inside the runner image (images/pi/Dockerfile puts them there). */
export const IMAGE_PATHS = {
  node: "/opt/sandbox-run/node/bin/node",
  launcher: "/opt/sandbox-run/launcher.mjs",
  /** Copy mode: the relay the controller execs (images/pi/relay.mjs). */
  relay: "/opt/sandbox-run/relay.mjs",
  tar: "/usr/bin/tar",
  /** Bind mode: installs the no-setuid filter before the launcher (run/plan/no-setuid-filter.ts). */
  perl: "/usr/bin/perl",
  finalToolExtension: "/opt/sandbox-run/final-tool.mjs",
  piCli: "/opt/sandbox-run/app/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js",
  home: "/home/sandbox",
  socketDir: "/run/sandbox-run",
  /** PATH of the image, and the one used under gVisor (busybox ls/stat first; see the Dockerfile). */
  path: "/opt/sandbox-run/node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/sandbox-run/busybox/bin",
  gvisorCompatBin: "/opt/sandbox-run/gvisor-compat/bin",
} as const;

/**
 * The image's Node with the flags every process of ours in the sandbox starts with. No inspector
 * on SIGUSR1: a process of the sandbox (the same uid) could otherwise open Node's debugger in the
 * launcher, which is Pi's process, and run code there (review, session 36: it took over Pi's
 * model requests).
 */
export const SANDBOX_NODE = [IMAGE_PATHS.node, "--disable-sigusr1"] as const;
/** The launcher's command line (the container's entrypoint, after bind mode's installer). */
export const LAUNCHER_COMMAND = [...SANDBOX_NODE, IMAGE_PATHS.launcher] as const;

/** The sandbox user when the caller is root (and always in copy mode): the sandbox never runs as uid 0. */
export const SANDBOX_UID = 65532;
/**
 * Copy mode: the owner of read-only trees inside the sandbox. Not the sandbox's uid, and the sandbox
 * has no capabilities, so their files cannot be written, chmod'ed, renamed or removed from inside.
 */
export const READ_ONLY_OWNER_UID = 65533;

/** Loopback ports inside the sandbox that the launcher forwards to the host's servers. */
export const GATEWAY_PORT = 18080;
export const PROXY_PORT = 18081;
/** Copy mode: where the launcher's relay takes the controller's bridge exec (once; then it is gone). */
export const RELAY_BRIDGE_SOCKET = `${IMAGE_PATHS.socketDir}/relay-bridge.sock`;
export const GATEWAY_SOCKET = `${IMAGE_PATHS.socketDir}/gateway.sock`;
export const PROXY_SOCKET = `${IMAGE_PATHS.socketDir}/proxy.sock`;

/** The host CA bundle a policy with trustHostCaBundle mounts (Debian/Ubuntu/Alpine location). */
export const HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
/** Where that bundle appears inside the sandbox: a fixed path no caller mount can shadow. */
export const SANDBOX_CA_BUNDLE = `${IMAGE_PATHS.socketDir}/host-ca-certificates.crt`;
/** With secrets: the host's or Node's roots plus the run's CA, here and over the image's system bundle. */
export const SANDBOX_TRUST_BUNDLE = `${IMAGE_PATHS.socketDir}/ca-certificates.crt`;
export const SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
/** Every variable common TLS clients read a CA bundle from (Node, OpenSSL, git, curl, Python requests/pip). */
export const CA_BUNDLE_ENV_NAMES = Object.freeze([
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "GIT_SSL_CAINFO",
  "CURL_CA_BUNDLE",
  "REQUESTS_CA_BUNDLE",
] as const);

/**
 * Exit codes of images/pi/launcher.mjs (plain JavaScript in the image, so it keeps its own copy
 * of these numbers; a unit test checks the two agree).
 */
export const LAUNCHER_EXIT = Object.freeze({
  setupFailed: 90,
  controllerGone: 91,
  deadlinePassed: 92,
  /** A warm sandbox no call claimed within its idle deadline. */
  idleDeadlinePassed: 93,
  /** Bind mode's init found a mount below a read-only tree writable, before the launcher started (no-setuid-filter.ts). */
  writableBelowReadOnly: 94,
});

/** How far past the run's timeout the launcher stops the sandbox by itself (a lost controller, host or link). */
export const LAUNCHER_DEADLINE_GRACE_MS = 30_000;

/**
 * The longest run, a day (the policy's timeoutSeconds, --timeout, timeoutMs): past 2^31 ms (24.8
 * days) Node's timers fire at once, and `--timeout 1e20` made no deadline date ("Invalid time value").
 */
export const MAX_TIMEOUT_SECONDS = 24 * 60 * 60;

// Every container we create carries these labels, so `gc` and start-up reaping can find what a
// dead controller left behind without any state file.
export const LABEL_MANAGED = "sandbox-run.managed";
export const LABEL_RUN_ID = "sandbox-run.run-id";
export const LABEL_OWNER_PID = "sandbox-run.owner-pid";
export const LABEL_OWNER_HOST = "sandbox-run.owner-host";
/**
 * The owner's PID namespace (`/proc/self/ns/pid`, e.g. "pid:[4026531836]"): its pid means that
 * process only there. Two controllers on one host name in PID namespaces of their own (containers
 * sharing an engine socket and the host's name) would otherwise judge each other's pids.
 */
export const LABEL_OWNER_PIDNS = "sandbox-run.owner-pidns";
export const LABEL_CREATED_AT = "sandbox-run.created-at";
export const LABEL_DEADLINE = "sandbox-run.deadline";
/** "uid:gid" the lent trees go back to when a root caller lent them to the sandbox uid. */
export const LABEL_HAND_BACK = "sandbox-run.hand-back";
/** JSON array of the host trees lent to the sandbox uid (workspace and writable roots, any mode). */
export const LABEL_LENT_ROOTS = "sandbox-run.lent-roots";
/** "true" on a warm sandbox: made before any call, for one claim (its run id label is the pool's `warm-...` id). */
export const LABEL_WARM = "sandbox-run.warm";
/** A warm sandbox: when it stops by itself if no call has claimed it (its launcher's idle deadline). */
export const LABEL_IDLE_DEADLINE = "sandbox-run.idle-deadline";
/**
 * A warm sandbox: a random token of the process that made it, so the helper that removes a
 * process's warm containers after its `process.exit()` finds only that process's (a pid is not
 * unique on a host where programs run in PID namespaces of their own).
 */
export const LABEL_OWNER_TOKEN = "sandbox-run.owner-token";

/**
 * Every label a container of ours carries. An image that declares one passes it to every container
 * made from it (the engine merges the image's labels under the create request's), so such an image
 * is refused, and `gc` leaves alone a container whose image declares LABEL_MANAGED: some other tool
 * made it from an image that imitates ours (review, session 34).
 */
export const CONTAINER_LABELS: readonly string[] = [
  LABEL_MANAGED,
  LABEL_RUN_ID,
  LABEL_OWNER_PID,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PIDNS,
  LABEL_CREATED_AT,
  LABEL_DEADLINE,
  LABEL_HAND_BACK,
  LABEL_LENT_ROOTS,
  LABEL_WARM,
  LABEL_IDLE_DEADLINE,
  LABEL_OWNER_TOKEN,
];

/**
 * Where a warm sandbox holds the workspace and the extra writable roots: mount points are fixed when
 * a container is created, before any call names its trees, so a warm call sees them here instead of
 * at their host paths (a cold call sees them at their host paths, or the workspace at workspacePath).
 */
export const WARM_PATHS = Object.freeze({
  workspace: "/workspace",
  /** The n-th extra writable root (0-based) is `${writableRoot}/<n>`. */
  writableRoot: "/writable",
});

export const IMAGE_LABEL_CONTENT_HASH = "sandbox-run.content-hash";
export const IMAGE_LABEL_PI_VERSION = "sandbox-run.pi-version";
export const IMAGE_LABEL_NODE_VERSION = "sandbox-run.node-version";
export const IMAGE_LABEL_BASE = "sandbox-run.base-image";
/** On images built with `image build --apt`: the Debian packages added to the runner image. */
export const IMAGE_LABEL_APT_PACKAGES = "sandbox-run.apt-packages";

interface ContainerOwner {
  runId: string;
  pid: number;
  host: string;
  /** The owner's PID namespace, where it can be read (util/own-pid-namespace.ts). */
  pidns?: string;
  createdAt: Date;
  /** When the container is overdue and any reaper may remove it. */
  deadline?: Date;
}

/** The labels that make a container ours and say who owns it. */
export function containerLabels(owner: ContainerOwner): Record<string, string> {
  return {
    [LABEL_MANAGED]: "true",
    [LABEL_RUN_ID]: owner.runId,
    [LABEL_OWNER_PID]: String(owner.pid),
    [LABEL_OWNER_HOST]: owner.host,
    ...(owner.pidns ? { [LABEL_OWNER_PIDNS]: owner.pidns } : {}),
    [LABEL_CREATED_AT]: owner.createdAt.toISOString(),
    ...(owner.deadline ? { [LABEL_DEADLINE]: owner.deadline.toISOString() } : {}),
  };
}

/** Token usage and cost of a run, as Pi reports it. */
export interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  /** usage.cost.total, in the provider's currency (USD for built-in models). */
  cost: number;
}

export interface Mount {
  hostPath: string;
  containerPath: string;
  readOnly: boolean;
  /** protected: an existing protectedPaths directory or file, read-only inside the read-write workspace;
   *  ca-bundle: the host's CA bundle, one file, read-only. */
  kind: "workspace" | "writable-root" | "read-only" | "socket" | "protected" | "ca-bundle";
  /** A read-only bind over a mount point below a read-only tree (build-run-plan.ts readOnlyCovers). */
  cover?: true;
}

/**
 * How the workspace reaches the container: bind mounts of host paths, or copied into tmpfs mounts
 * at the same paths and the changes copied back (no host path inside; what a remote engine needs).
 */
export type WorkspaceMode = "bind" | "copy";
export const WORKSPACE_MODES: readonly WorkspaceMode[] = Object.freeze(["bind", "copy"]);

/**
 * What becomes of a writable workspace's changes once they passed the checks: "apply" (written
 * into the working tree), "branch" (committed by the host's own git onto `sandbox-run/<run-id>`,
 * the working tree and `.git` untouched) or "patch" (only a patch file). branch and patch need
 * copy mode: the sandbox never holds the host's tree.
 */
export type HandBackMode = "apply" | "branch" | "patch";
export const HAND_BACK_MODES: readonly HandBackMode[] = Object.freeze(["apply", "branch", "patch"]);

/** Copy mode: one host tree (or file) copied into the container's tmpfs at the same path. */
export interface CopyRoot {
  hostPath: string;
  containerPath: string;
  kind: "workspace" | "writable-root" | "read-only" | "ca-bundle";
  /** Copied back out (checked, then applied) after the run; read-only copies belong to READ_ONLY_OWNER_UID. */
  writable: boolean;
}

export interface PlanLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  tmpMb: number;
  homeMb: number;
  timeoutSeconds: number;
  maxOutputMb: number;
  maxLineMb: number;
  diskMb: number;
  /** Files and folders the writable trees may gain. */
  maxEntries: number;
  /** The policy's turn budget (a call's maxTurns overrides it). */
  maxTurns: number;
  /** Output tokens one model response may use (the gateway's cap). */
  maxOutputTokens: number;
}

/**
 * Everything one call will do, as plain data: built by a pure function from resolved options
 * (run/run-plan.ts), printed by --dry-run, turned into a container by engine/.
 */
export interface RunPlan {
  runId: string;
  image: string;
  /**
   * The platform the sandbox runs on, passed to the engine at create. Set at plan time when the
   * caller chose one; otherwise the engine's own, filled in once the run's engine is known.
   */
  platform?: RunnerPlatform;
  runtime: "runc" | "runsc";
  policyName: string;
  model: string;
  /** "uid:gid" the sandbox runs as. */
  user: string;
  /** Set when the caller is root: files the sandbox creates are handed back to this owner. */
  handBackTo?: { uid: number; gid: number };
  workingDir: string;
  /** Arguments after the launcher: Pi's argv. */
  piArgs: string[];
  entrypoint: string[];
  env: Record<string, string>;
  /** How the workspace reaches the container; in copy mode `mounts` is empty. */
  workspaceMode: WorkspaceMode;
  mounts: Mount[];
  /** Copy mode: what is copied in (each a tmpfs in `tmpfs`, except the CA bundle's file). */
  copies: CopyRoot[];
  /** What becomes of the workspace's judged changes (not to be confused with `handBackTo`, an owner). */
  handBack: HandBackMode;
  tmpfs: Record<string, string>;
  network: "none" | "bridge";
  limits: PlanLimits;
  labels: Record<string, string>;
  finalToolName?: string;
  schema?: JsonSchema;
  /**
   * Planned for a warm sandbox: copy mode, the workspace and writable roots at WARM_PATHS. Whether a
   * warm sandbox actually served the call is the run's (`warm` in its details and record).
   */
  warmShaped?: boolean;
}
