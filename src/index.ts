// Public API of sandbox-run.
import { bindAgent } from "./agent.js";
import { ContainerPiAgent } from "./container-pi-agent.js";

export { bindAgent } from "./agent.js";
export type { Agent, AgentFunction, AgentOptions, JsonSchema, SandboxMode } from "./agent.js";
export { ContainerPiAgent } from "./container-pi-agent.js";
export type {
  ContainerPiAgentConfig,
  PlannedRun,
  RunCallOptions,
  RunPlannedOptions,
  RunStream,
  WarmOptions,
  WarmPoolChange,
  WarmPoolStats,
} from "./container-pi-agent.js";
// Replay sources are made by replayRecord() in sandbox-run/testing.
export type { ReplayOptions, ReplaySource } from "./replay/replay-source.js";
export type { ReplaySummary } from "./replay/replay-summary.js";
export { SandboxRunError, isSandboxRunError } from "./errors.js";
export type { SandboxRunErrorCode } from "./errors.js";
export type { RunDetails } from "./run/execute-run.js";
export type { RunEvent, RunEventListener } from "./run/run-events.js";
export type { RunOptions, SandboxOptions } from "./run/resolve-options.js";
export type { RunPlan } from "./sandbox-contract.js";
export { DockerEngine } from "./engine/docker-engine.js";
export type { DockerEngineOptions } from "./engine/docker-engine.js";
export type { Engine } from "./engine/engine.js";
export type { EngineEndpoint } from "./engine/engine-endpoint.js";
export { EnginePool } from "./engine/engine-pool.js";
export type { PoolMember } from "./engine/engine-pool.js";
export { redactPlan } from "./run/redact-plan.js";
export type { Policy, Limits } from "./policy/policy-schema.js";
export type { ChangedFiles } from "./workspace/workspace-snapshot.js";
export { loadPolicy, BUILT_IN_POLICIES } from "./policy/load-policy.js";
export { buildRunnerImage } from "./image/build-runner-image.js";
export { runnerImageSpec } from "./image/runner-image.js";

let defaultAgent: ContainerPiAgent | undefined;

/** run() on a shared default ContainerPiAgent, created on first use. */
export const agent = bindAgent({
  run: (prompt, options) => (defaultAgent ??= new ContainerPiAgent()).run(prompt, options),
});
