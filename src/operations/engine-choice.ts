// The engines an operation works on: an engines file (the CLI's --engines), else the one
// SANDBOX_RUN_ENGINES names, else the one engine DOCKER_HOST (or the local socket) names.
import type { AnswerLimits } from "../engine/answer-limits.js";
import { DockerEngine } from "../engine/docker-engine.js";
import type { Engine } from "../engine/engine.js";
import { endpointFromEnv } from "../engine/engine-endpoint.js";
import { EnginePool } from "../engine/engine-pool.js";
import { SandboxRunError } from "../errors.js";

/** How long gc and doctor wait for an engine's ping: one that accepts and never answers must not hang them. */
export const PING_TIMEOUT_MS = 10_000;

/** engine.ping(), given up after `ms` with an error that names the engine and what to check. */
export async function pingWithin(engine: Engine, ms = PING_TIMEOUT_MS): Promise<void> {
  const signal = AbortSignal.timeout(ms);
  try {
    await engine.ping(signal);
  } catch (error) {
    if (!signal.aborted) throw error;
    throw new SandboxRunError(
      "docker-unavailable",
      `Engine "${engine.name}"${engine.address ? ` at ${engine.address}` : ""} did not answer its ping within ${ms / 1000} s.`,
      { hint: "Check that the engine runs and answers (`docker version`), then run the command again." },
    );
  }
}

/** `answers`: what each engine request may take (default: 16 MiB, 30 s; tests make it short). */
export function chosenEnginePool(
  file: string | undefined,
  env: Record<string, string | undefined>,
  answers?: AnswerLimits,
): EnginePool {
  const chosen = file || env.SANDBOX_RUN_ENGINES;
  return chosen
    ? EnginePool.fromFile(chosen, answers)
    : EnginePool.of(new DockerEngine({ endpoint: endpointFromEnv(env), ...(answers ? { answers } : {}) }));
}
