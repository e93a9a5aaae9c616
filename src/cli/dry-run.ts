// --dry-run: the plan a run would follow, printed as JSON, with nothing started. Values of
// the caller's variables are hidden; only their names are shown.
import os from "node:os";
import { runnerImageSpec } from "../image/runner-image.js";
import { resolveRun, type RunOptions } from "../run/resolve-options.js";
import { buildRunPlan, GATEWAY_PORT } from "../run/run-plan.js";
import { protectedMountPaths } from "../workspace/protected-paths.js";
import type { CliIo } from "./cli-io.js";

export async function printDryRun(prompt: string, options: RunOptions, io: CliIo): Promise<void> {
  const run = resolveRun(prompt, {}, options, io.env);
  const routing = run.routing;
  const sandboxEnv = { ...run.sandboxEnv };
  for (const name of routing.credentialEnvNames) delete sandboxEnv[name];
  const plan = buildRunPlan({
    runId: "dry-run",
    image: runnerImageSpec().tag,
    policy: run.policy,
    model: run.model,
    schema: run.schema,
    cwd: run.cwd,
    writableRoots: run.writableRoots,
    readOnlyMounts: run.readOnlyMounts,
    runDir: `${os.tmpdir()}/sandbox-run-<random>`,
    protectedMounts: protectedMountPaths(run.cwd, run.policy.protectedPaths),
    caller: { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 },
    sandboxEnv,
    containerModelsJson: routing.containerModelsJson,
    extraArgs: run.extraArgs,
    timeoutMs: run.timeoutMs,
    owner: { pid: process.pid, host: os.hostname() },
    now: new Date(),
  });
  const shown = {
    ...plan,
    env: Object.fromEntries(
      Object.entries(plan.env).map(([k, v]) => [k, k in sandboxEnv ? "<set by caller>" : k === "SANDBOX_RUN_CONFIG" ? JSON.parse(v) : v]),
    ),
    gatewayRoutes: routing.routes.map((r) => ({ id: r.id, upstream: r.upstreamBaseUrl, api: r.api, credentialHeaders: Object.keys(r.headers) })),
    prompt: { bytes: Buffer.byteLength(prompt) },
  };
  io.stdout(`${JSON.stringify(shown, null, 2)}\n`);
}
