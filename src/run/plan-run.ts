// The one place resolved options become a run plan, for real runs and for --dry-run alike:
// it gathers what the pure plan builder needs from the host (caller ids, protected paths that
// exist, the CA bundle) and drops credential variables from what the sandbox receives.
import os from "node:os";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import { protectedMountPaths } from "../workspace/protected-paths.js";
import type { ResolvedRun } from "./resolve-options.js";
import { buildRunPlan, type RunPlan } from "./run-plan.js";

export interface PlanPlace {
  runId: string;
  image: string;
  /** Host folder of the run's sockets. */
  runDir: string;
  now: Date;
  /** The placeholders of the policy's secrets (from the run's egress proxy). */
  secretPlaceholders?: Record<string, string>;
}

export function planRun(run: ResolvedRun, place: PlanPlace): { plan: RunPlan; sandboxEnv: Record<string, string> } {
  const sandboxEnv = { ...run.sandboxEnv };
  for (const name of run.routing.credentialEnvNames) delete sandboxEnv[name];
  const plan = buildRunPlan({
    ...place,
    policy: run.policy,
    model: run.model,
    schema: run.schema,
    cwd: run.cwd,
    writableRoots: run.writableRoots,
    readOnlyMounts: run.readOnlyMounts,
    protectedMounts: protectedMountPaths(run.cwd, run.policy.protectedPaths),
    hostCaBundle: run.policy.trustHostCaBundle ? hostCaBundleFile() : undefined,
    caller: { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 },
    sandboxEnv,
    containerModelsJson: run.routing.containerModelsJson,
    extraArgs: run.extraArgs,
    timeoutMs: run.timeoutMs,
    owner: { pid: process.pid, host: os.hostname() },
  });
  return { plan, sandboxEnv };
}
