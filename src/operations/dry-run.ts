// Planning a call without an agent: what `--dry-run` prints. The plan is made as
// ContainerPiAgent.plan() makes it, against what is known of the engines without asking them
// (whether they see this host's paths), and loads neither the agent nor an engine client nor any
// server (tests/unit/cli-start-up.test.ts checks what it loads).
import type { Engine } from "../engine/engine.js";
import { endpointFromEnv, sharesHostFilesystemByDefault } from "../engine/engine-endpoint.js";
import { EngineFacts } from "../run/engine-facts.js";
import { refuseNestedGitCredentials, sandboxTrees } from "../run/plan/git-credentials.js";
import { refuseReachableSockets } from "../run/plan/lent-sockets.js";
import { planCall as planFromLayers } from "../run/plan/plan-call.js";
import type { PlannedRun } from "../run/plan/prepare-plan.js";
import { redactPlan } from "../run/plan/redact-plan.js";
import { type Env, loadSchemaCompiler, type RunOptions } from "../run/plan/resolve-options.js";

export interface PlanCallOptions {
  /** This call's options. */
  options: RunOptions;
  /** The agent's own options under them (a ContainerPiAgent's configuration), if any. */
  config?: RunOptions;
  /** The host environment the layers start from (default process.env). */
  env?: Env;
  /**
   * An engines file (default: SANDBOX_RUN_ENGINES, else the engine DOCKER_HOST names): whether
   * those engines see this host's paths decides bind or copy mode.
   */
  engines?: string;
}

export async function planCall(prompt: string, call: PlanCallOptions): Promise<PlannedRun> {
  const env = call.env ?? process.env;
  const engines = new EngineFacts(await enginesForPlan(call.engines, env));
  // The schema's compiler (Ajv and the checks around it) loads for a call that has one: most plans have none.
  if (call.options.schema !== undefined || call.config?.schema !== undefined) await loadSchemaCompiler();
  // The engines file is configuration too: one inside the workspace is warned about or refused (E5).
  const enginesFile = call.engines || env.SANDBOX_RUN_ENGINES;
  const config = enginesFile
    ? { ...call.config, configFiles: { ...call.config?.configFiles, engines: enginesFile } }
    : (call.config ?? {});
  return planFromLayers(prompt, { config, run: call.options, env }, engines);
}

/** The plan as it may be shown or stored (credentials redacted), once Pi is known to take its schema. */
export async function dryRunView(planned: PlannedRun): Promise<Record<string, unknown>> {
  if (planned.run.schema) await (await import("../run/result-validator.js")).checkPiAcceptsSchema(planned.run.schema);
  const onWalked = refuseReachableSockets(planned);
  await refuseNestedGitCredentials(sandboxTrees(planned.run), undefined, onWalked ? { onWalked } : {});
  return redactPlan(planned);
}

/**
 * The engines a run could go to, as ContainerPiAgent would pick them: all a plan needs of them is
 * whether they see this host's paths (an engines file is read, its engines not asked).
 */
async function enginesForPlan(
  file: string | undefined,
  env: Env,
): Promise<Array<Pick<Engine, "name" | "sharesHostFilesystem">>> {
  const chosen = file || env.SANDBOX_RUN_ENGINES;
  if (!chosen) return [{ name: "local", sharesHostFilesystem: sharesHostFilesystemByDefault(endpointFromEnv(env)) }];
  const { EnginePool } = await import("../engine/engine-pool.js");
  const pool = EnginePool.fromFile(chosen);
  pool.close();
  return pool.engines;
}
