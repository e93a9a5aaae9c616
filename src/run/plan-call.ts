// One call's plan from its option layers and the engines it may go to: what ContainerPiAgent.plan()
// makes and what the CLI's --dry-run prints (the CLI plans through this without loading the agent,
// its engines or its servers). Reads files (policy, models, schema), runs nothing.
import type { Engine } from "../engine/engine.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { type PlannedRun, preparePlan } from "./prepare-plan.js";
import { type Env, resolveRun, type RunOptions } from "./resolve-options.js";

export interface CallLayers {
  /** The agent's own options (a ContainerPiAgent's config). */
  config: RunOptions;
  /** This call's options. */
  run: RunOptions;
  /** The host environment the layers start from. */
  env: Env;
}

export function planCall(
  prompt: string,
  layers: CallLayers,
  engines: ReadonlyArray<Pick<Engine, "name" | "sharesHostFilesystem">>,
): PlannedRun {
  const run = resolveRun(prompt, layers.config, layers.run, layers.env);
  // Bind mode only where every engine a run may go to sees this host's paths; copy mode elsewhere.
  const remote = engines.find((e) => !e.sharesHostFilesystem);
  return preparePlan(run, {
    image: run.image ?? runnerImageSpec().tag,
    sharesHostFilesystem: !remote,
    engineName: remote?.name,
  });
}
