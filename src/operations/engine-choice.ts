// The engines an operation works on: an engines file (the CLI's --engines), else the one
// SANDBOX_RUN_ENGINES names, else the one engine DOCKER_HOST (or the local socket) names.
import { DockerEngine } from "../engine/docker-engine.js";
import { EnginePool } from "../engine/engine-pool.js";

export function chosenEnginePool(file: string | undefined, env: Record<string, string | undefined>): EnginePool {
  const chosen = file || env.SANDBOX_RUN_ENGINES;
  return chosen ? EnginePool.fromFile(chosen) : EnginePool.of(new DockerEngine());
}
