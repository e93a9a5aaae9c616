// The one place a call becomes a run plan, for real runs, --dry-run and --record alike: options are
// resolved (resolve-options.ts), the host facts the pure builder needs are gathered (caller ids,
// protected paths that exist, the CA bundle), credential variables are dropped from what the
// sandbox receives, and the plan is built once. No side effect beyond reading files.
import crypto from "node:crypto";
import os from "node:os";
import { usageError } from "../../errors.js";
import { hostCaBundleFile } from "../../proxy/host-ca-bundle.js";
import { newPlaceholder } from "../../proxy/secret-bindings.js";
import type { ReplayCall } from "../../replay/replay-source.js";
import type { RunPlan, WorkspaceMode } from "../../sandbox-contract.js";
import { controllerContainer } from "../../util/controller-container.js";
import { mountPointsInside, readMountTable } from "../../util/mount-table.js";
import { pidnsField } from "../../util/own-pid-namespace.js";
import {
  type PerUserLimits,
  raiseLimitsCommand,
  readPerUserLimits,
  sharedUidProblem,
} from "../../util/per-user-limits.js";
import { hostPlatform, normalizePlatform } from "../../util/platform.js";
import { scanGitConfig } from "../../workspace/git-config-scan.js";
import { protectedMountPaths, staleProtectedMounts } from "../../workspace/protected-paths.js";
import { runDirPath } from "../run-dirs.js";
import { buildRunPlan, readOnlyCovers } from "./build-run-plan.js";
import { refuseGitCredentials } from "./git-credentials.js";
import type { ResolvedRun } from "./resolve-options.js";

export interface PlannedRun {
  run: ResolvedRun;
  plan: RunPlan;
  /** Host folder of the run's sockets (made when the run starts). */
  runDir: string;
  /** Names of the variables the caller set for the sandbox (their values are in the plan's env). */
  callerEnvNames: string[];
  /** Per-run placeholders of the policy's secrets, by name: in the sandbox's env, swapped by the egress proxy. */
  secretPlaceholders: Record<string, string>;
  /** Set when the model is answered from a recording instead of the provider. */
  replay?: ReplayCall;
  /** The agent keeps warm sandboxes, but this call starts cold: why (its `warm.miss` event says so). */
  warmMiss?: string;
  /** Why the call runs in copy mode where it would have been bind mode (its `workspace.copy-mode` event). */
  copyModeReason?: string;
}

function newRunId(): string {
  return crypto.randomBytes(6).toString("hex");
}

export interface PlanPlace {
  image: string;
  runId?: string;
  now?: Date;
  /** Whether the engine sees this host's paths (bind mounts work); default true. */
  sharesHostFilesystem?: boolean;
  /** Its name, for the message when bind mode is asked of an engine that cannot do it. */
  engineName?: string;
  /** Why it cannot (default: it does not share this host's filesystem). */
  engineReason?: string;
  /** Plan the call for a warm sandbox (copy mode, the trees at WARM_PATHS; see buildRunPlan). */
  warm?: boolean;
  /**
   * What shows this controller runs in a container (util/controller-container.ts; default: read
   * from /proc; tests give their own, "" for none).
   */
  controllerContainer?: string;
  /** This host's per-uid kernel limits (default: read from /proc; tests give their own). */
  perUserLimits?: PerUserLimits;
}

/**
 * The read-only covers (build-run-plan.ts readOnlyCovers) from the mount table as it is now, once
 * the run holds its trees: another run over the same trees, which this one waited for, may have
 * moved a mount point (`mv cache cache2`) or put a link where one was, and covers from the table at
 * the plan then covered an empty folder, or had the engine follow the link to a host folder outside
 * every tree (review, session 33). A cover whose path is no longer the real path of a visible mount
 * point is left out; bind mode's init refuses what is still writable (no-setuid-filter.ts).
 */
export function refreshReadOnlyCovers(planned: PlannedRun): PlannedRun {
  const { plan } = planned;
  if (plan.workspaceMode !== "bind" || plan.mounts.length === 0) return planned;
  const base = plan.mounts.filter((m) => !m.cover);
  const table = readMountTable() ?? "";
  const covers = readOnlyCovers(base, (hostPath) => mountPointsInside(hostPath, table));
  return { ...planned, plan: { ...plan, mounts: [...base, ...covers] } };
}

/**
 * After the run waited for the trees it holds: every protected read-only mount is still a real
 * directory or file inside the workspace. Another run over the same workspace may have swapped one
 * for a symlink (its own rules may allow that), and the engine would mount what the link leads to.
 */
export function recheckProtectedMounts(planned: PlannedRun): void {
  const mounts = planned.plan.mounts.filter((m) => m.kind === "protected" && !m.cover).map((m) => m.hostPath);
  const stale = staleProtectedMounts(planned.run.cwd, mounts);
  if (stale.length > 0)
    throw usageError(
      `The protected ${stale.length === 1 ? "path" : "paths"} ${stale.join(", ")} changed while this run waited for another run on the same workspace: no longer a real folder or file inside it (a symlink now?).`,
      "Check what the earlier run left there (a protected path replaced by a link is not mounted), then run this one again.",
    );
}

export function preparePlan(run: ResolvedRun, place: PlanPlace): PlannedRun {
  const gitConfig = scanGitConfig(run.cwd);
  refuseGitCredentials(run.cwd, gitConfig);
  for (const root of run.writableRoots) refuseGitCredentials(root, scanGitConfig(root));
  const runId = place.runId ?? newRunId();
  const runDir = runDirPath(runId);
  const sandboxEnv = { ...run.sandboxEnv };
  for (const name of run.routing.credentialEnvNames) delete sandboxEnv[name];
  // A policy secret's value is read on the host (from its variable, by default the one named like
  // the secret): passed in `env` too, it would reach the sandbox as it is. With an allow-list the
  // secret's own name is given its placeholder below.
  for (const [name, secret] of Object.entries(run.policy.secrets ?? {})) {
    delete sandboxEnv[name];
    if (secret.from && "env" in secret.from) delete sandboxEnv[secret.from.env];
  }
  const secretNames = run.policy.network === "allowlist" ? Object.keys(run.policy.secrets ?? {}) : [];
  const secretPlaceholders = Object.fromEntries(secretNames.map((name) => [name, newPlaceholder(name)]));
  const caller = { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 };
  const mode = place.warm ? { mode: "copy" as const } : workspaceModeOf(run, place, caller.uid);
  let mountTable: string | undefined;
  const plan = buildRunPlan({
    runId,
    image: place.image,
    runDir,
    now: place.now ?? new Date(),
    policy: run.policy,
    model: run.model,
    schema: run.schema,
    cwd: run.cwd,
    ...(run.workspacePath ? { sandboxCwd: run.workspacePath } : {}),
    writableRoots: run.writableRoots,
    readOnlyMounts: run.readOnlyMounts,
    protectedMounts: protectedMountPaths(run.cwd, run.policy.protectedPaths),
    mountsInside: (hostPath) => mountPointsInside(hostPath, (mountTable ??= readMountTable() ?? "")),
    hostCaBundle: run.policy.trustHostCaBundle ? hostCaBundleFile() : undefined,
    secretPlaceholders,
    gitDrivers: gitConfig.drivers,
    caller,
    sandboxEnv,
    containerModelsJson: run.routing.containerModelsJson,
    extraArgs: run.extraArgs,
    timeoutMs: run.timeoutMs,
    owner: { pid: process.pid, host: os.hostname(), ...pidnsField() },
    workspaceMode: mode.mode,
    handBack: run.handBack,
    ...(place.warm ? { warm: true } : {}),
  });
  return {
    run,
    plan,
    runDir,
    callerEnvNames: Object.keys(sandboxEnv),
    secretPlaceholders,
    ...(mode.copyModeReason ? { copyModeReason: mode.copyModeReason } : {}),
  };
}

/**
 * Bind mode needs an engine that sees this host's paths; copy mode works everywhere. And a bind-mode
 * sandbox runs as a non-root caller's own uid (its files must be the caller's): where this host's
 * per-uid kernel limits let it use up what the controller needs, it runs in copy mode instead, as
 * another uid (per-user-limits.ts), or, asked for bind mode by name, not at all.
 */
function workspaceModeOf(
  run: ResolvedRun,
  place: PlanPlace,
  callerUid: number,
): { mode: WorkspaceMode; copyModeReason?: string } {
  const asked = run.workspaceMode;
  const shares = place.sharesHostFilesystem ?? true;
  if (asked === "bind" && !shares) {
    throw usageError(
      `The engine${place.engineName ? ` "${place.engineName}"` : ""} ${place.engineReason ?? "does not share this host's filesystem"}, so the workspace cannot be bind-mounted.`,
      "Use --workspace copy (the default on such engines), or run on a local engine.",
    );
  }
  // Under emulation (another platform than this host's, through the engine's qemu) bind mode's init,
  // and with it the no-setuid filter, cannot run (qemu-user does not implement seccomp): a setuid
  // copy of a binary in the workspace ran as the sandbox's uid for any local user while the run
  // went on, and a default ACL outlived it (review, session 33). Copy mode keeps neither.
  const emulated = emulatedPlatform(run.policy.platform);
  if (emulated && asked === "bind")
    throw usageError(
      `Bind mode cannot run under emulation (${emulated}): its no-setuid filter cannot be installed there, so the sandbox could leave setuid files and ACLs in the mounted workspace.`,
      "Use copy mode, the default under emulation (drop --workspace bind or SANDBOX_RUN_WORKSPACE=bind), or run on an engine of that platform.",
    );
  if (emulated)
    return {
      mode: "copy",
      copyModeReason: `the workspace is copied in and out (copy mode) instead of mounted: the run is emulated (${emulated}), where bind mode's no-setuid filter cannot be installed`,
    };
  // A controller in a container that reaches a local engine through a mounted socket: the engine
  // resolves mount sources on its own host (review, session 34: the sandbox got the host's unrelated
  // folder of the same name, and the run said it succeeded). Copy mode unless bind is asked for.
  const inContainer = shares && asked === undefined ? (place.controllerContainer ?? controllerContainer()) : undefined;
  if (inContainer)
    return {
      mode: "copy",
      copyModeReason: `the workspace is copied in and out (copy mode) instead of mounted: sandbox-run runs in a container (${inContainer}), and an engine reached through a mounted socket mounts the folders of its own host at these paths, which may not be these (pass --workspace bind where the workspace and TMPDIR are mounted at the same paths on both sides)`,
    };
  const mode = asked ?? (shares ? "bind" : "copy");
  // A local engine that cannot take the mount says why (a remote one is copy mode's plain case).
  if (!shares && asked === undefined && place.engineReason)
    return {
      mode,
      copyModeReason: `the workspace is copied in and out (copy mode) instead of mounted: the engine${place.engineName ? ` "${place.engineName}"` : ""} ${place.engineReason}`,
    };
  if (mode !== "bind" || callerUid === 0 || run.policy.runtime === "runsc") return { mode };
  const problem = sharedUidProblem(place.perUserLimits ?? readPerUserLimits());
  if (!problem) return { mode };
  if (asked === "bind")
    throw usageError(
      `Bind mode runs the sandbox as your own uid, and ${problem}.`,
      `Raise the limits once (${raiseLimitsCommand()}), or use copy mode (drop --workspace bind or SANDBOX_RUN_WORKSPACE=bind: the sandbox then runs as another uid), or --runtime runsc.`,
    );
  return {
    mode: "copy",
    copyModeReason: `the workspace is copied in and out (copy mode) instead of mounted: bind mode would run the sandbox as your own uid, and ${problem}. Raise the limits once to get bind mode back: ${raiseLimitsCommand()}`,
  };
}

/** "linux/arm64 on this linux/amd64 host" when `platform` is another than this host's, else undefined. */
function emulatedPlatform(platform: string | undefined): string | undefined {
  if (platform === undefined) return undefined;
  const wanted = normalizePlatform(platform);
  const host = hostPlatform();
  return wanted && wanted !== host ? `${wanted} on this ${host} host` : undefined;
}
