// One call's plan from its option layers and the engines it may go to: what ContainerPiAgent.plan()
// makes and what the CLI's --dry-run prints (the CLI plans through this without loading the agent,
// its engines or its servers). Reads files (policy, models, schema), runs nothing.
import { type PlannedRun, type PlanPlace, preparePlan } from "./prepare-plan.js";
import { type Env, type ResolvedRun, type RunOptions, resolveRun } from "./resolve-options.js";

interface CallLayers {
  /** The agent's own options (a ContainerPiAgent's config). */
  config: RunOptions;
  /** This call's options. */
  run: RunOptions;
  /** The host environment the layers start from. */
  env: Env;
}

/** Where a resolved run would go, as far as the engines are known (run/engine-facts.ts): bind or copy mode, the image. */
interface PlanPlacer {
  placeFor(run: ResolvedRun): PlanPlace;
}

export function planCall(prompt: string, layers: CallLayers, engines: PlanPlacer): PlannedRun {
  const run = resolveRun(prompt, layers.config, layers.run, layers.env);
  return preparePlan(run, engines.placeFor(run));
}
