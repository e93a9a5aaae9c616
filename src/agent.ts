// The seam every runtime keeps: run(prompt, options) -> text or a schema-validated object.
// Nothing here knows about Docker or Pi; ContainerPiAgent implements it.

export type SandboxMode = "read-only" | "workspace-write" | "danger-full-access";

/** A JSON Schema object, as the caller wrote it. */
export type JsonSchema = Record<string, unknown>;

export interface AgentOptions {
  /** Workspace directory; mounted at the same absolute path inside the sandbox. */
  cwd?: string;
  /** Model as `provider/id`. */
  model?: string;
  /** When set, the result is an object validated against this schema (by Pi and again on the host). */
  schema?: JsonSchema;
  sandbox?: SandboxMode;
  /** Extra directories the agent may write, mounted read-write at the same absolute path. */
  additionalWritableDirectories?: string[];
  /** Variables for the sandbox; `undefined` removes a variable set by an earlier layer. */
  env?: Record<string, string | undefined>;
  signal?: AbortSignal;
}

export interface Agent {
  run<TOutput = string>(prompt: string, options?: AgentOptions): Promise<TOutput>;
}

export type AgentFunction = <TOutput = string>(prompt: string, options?: AgentOptions) => Promise<TOutput>;

export function bindAgent(runtime: Agent): AgentFunction {
  return (prompt, options) => runtime.run(prompt, options);
}
