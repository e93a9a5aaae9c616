// --dry-run: the plan a run would follow, printed as JSON, with nothing started. Values of
// the caller's variables are hidden; only their names are shown.
import os from "node:os";
import { runnerImageSpec } from "../image/runner-image.js";
import { resolveRun, type RunOptions } from "../run/resolve-options.js";
import { summarizeSecrets } from "../proxy/secret-bindings.js";
import { planRun } from "../run/plan-run.js";
import type { CliIo } from "./cli-io.js";

export async function printDryRun(prompt: string, options: RunOptions, io: CliIo): Promise<void> {
  const run = resolveRun(prompt, {}, options, io.env);
  const routing = run.routing;
  const { plan, sandboxEnv } = planRun(run, {
    runId: "dry-run",
    image: run.image ?? runnerImageSpec().tag,
    runDir: `${os.tmpdir()}/sandbox-run-<random>`,
    now: new Date(),
  });
  const shown = {
    ...plan,
    env: Object.fromEntries(
      Object.entries(plan.env).map(([k, v]) => [
        k,
        k in sandboxEnv ? "<set by caller>" : k === "SANDBOX_RUN_CONFIG" ? JSON.parse(v as string) : v,
      ]),
    ),
    gatewayRoutes: routing.routes.map((r) => ({
      id: r.id,
      upstream: r.upstreamBaseUrl,
      api: r.api,
      credentialHeaders: Object.keys(r.headers),
    })),
    // Which credentials the run would get, by name, host and source; never a value.
    secrets: summarizeSecrets(run.policy.secrets, run.hostEnv).map(({ problem, ...s }) => ({
      ...s,
      available: problem === undefined,
    })),
    prompt: { bytes: Buffer.byteLength(prompt) },
  };
  io.stdout(`${JSON.stringify(shown, null, 2)}\n`);
}
