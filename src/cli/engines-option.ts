// --engines <file> (or SANDBOX_RUN_ENGINES): the engines a command works on. Without either, the
// one engine DOCKER_HOST (or the local socket) names.
import { DockerEngine } from "../engine/docker-engine.js";
import { EnginePool } from "../engine/engine-pool.js";

export function enginePoolFor(file: string | undefined, env: Record<string, string | undefined>): EnginePool {
  const chosen = file || env.SANDBOX_RUN_ENGINES;
  return chosen ? EnginePool.fromFile(chosen) : EnginePool.of(new DockerEngine());
}
