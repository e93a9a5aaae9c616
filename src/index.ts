// Public API of sandbox-run.
import { type AgentFunction, bindAgent } from "./agent.js";
import { ContainerPiAgent, type RunCallOptions } from "./container-pi-agent.js";

export type {
  Agent,
  AgentFunction,
  AgentOptions,
  AgentRuntime,
  FromSchema,
  JsonSchema,
  SandboxMode,
} from "./agent.js";
export { bindAgent } from "./agent.js";
export type {
  ContainerPiAgentConfig,
  PlannedRun,
  RunCallOptions,
  RunCallOptionsWithSchema,
  RunPlannedOptions,
  RunStream,
  WarmOptions,
  WarmPoolChange,
  WarmPoolStats,
} from "./container-pi-agent.js";
export { ContainerPiAgent } from "./container-pi-agent.js";
export type { DockerEngineOptions } from "./engine/docker-engine.js";
export { DockerEngine } from "./engine/docker-engine.js";
export type { Engine } from "./engine/engine.js";
export type { EngineEndpoint } from "./engine/engine-endpoint.js";
export type { PoolMember } from "./engine/engine-pool.js";
export { EnginePool } from "./engine/engine-pool.js";
export type { ReportedErrorCode, SandboxRunErrorCode } from "./errors.js";
export { isSandboxRunError, SandboxRunError } from "./errors.js";
export type { BranchHandBack, HandBackReport, PatchHandBack } from "./hand-back/hand-back-report.js";
export { buildRunnerImage } from "./image/build-runner-image.js";
// The operations behind the sandbox-run command: doctor, gc, images, plans and dry runs, records, replay, show, demo.
export * from "./operations.js";
export { loadPolicy } from "./policy/load-policy.js";
export type { Limits, Policy } from "./policy/policy-schema.js";
export type { RecordFinish } from "./record/run-recorder.js";
export type { ReplayMode, ReplaySpeed } from "./replay/replay-server.js";
// Replay sources are made by replayRecord() in sandbox-run/testing.
export type { ReplayOptions, ReplaySource } from "./replay/replay-source.js";
export type { ReplaySummary } from "./replay/replay-summary.js";
export type { RunDetails } from "./run/execute-run.js";
export { redactPlan } from "./run/plan/redact-plan.js";
export type { RunOptions, SandboxOptions } from "./run/plan/resolve-options.js";
export type { RunEvent, RunEventListener } from "./run/run-events.js";
export type { HandBackMode, RunPlan } from "./sandbox-contract.js";
export { BUILT_IN_POLICIES } from "./util/policy-names.js";
export type { HostRunChange } from "./workspace/workspace-rules.js";
export type { ChangedFiles } from "./workspace/workspace-snapshot.js";

let defaultAgent: ContainerPiAgent | undefined;

/**
 * run() on a shared default ContainerPiAgent, created on first use: every per-run option of
 * ContainerPiAgent.run() (models, policy, timeoutMs, onEvent, ...), and the same typed results.
 */
export const agent: AgentFunction<RunCallOptions> = bindAgent<RunCallOptions>({
  // async: what the constructor refuses (a Node older than package.json's engines) is a rejection.
  run: async (prompt, options) => (defaultAgent ??= new ContainerPiAgent()).run(prompt, options),
});
