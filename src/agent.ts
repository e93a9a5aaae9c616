// The seam every runtime keeps: run(prompt, options) -> text or a schema-validated object.
// Nothing here knows about Docker or Pi; ContainerPiAgent implements it.
import type { FromSchema } from "./util/from-schema.js";

export type { FromSchema } from "./util/from-schema.js";

export type SandboxMode = "read-only" | "workspace-write" | "danger-full-access";

/** A JSON Schema object, as the caller wrote it. */
export type JsonSchema = Record<string, unknown>;

export interface AgentOptions {
  /** Workspace directory; mounted at the same absolute path inside the sandbox. */
  cwd?: string | undefined;
  /** Model as `provider/id`. */
  model?: string | undefined;
  /** When set, the result is an object validated against this schema (by Pi and again on the host). */
  schema?: JsonSchema | undefined;
  sandbox?: SandboxMode | undefined;
  /** Extra directories the agent may write, mounted read-write at the same absolute path. */
  additionalWritableDirectories?: string[] | undefined;
  /** Variables for the sandbox; `undefined` removes a variable set by an earlier layer. */
  env?: Record<string, string | undefined>;
  /** Stops the run; it then rejects with a SandboxRunError whose code is "aborted" (the reason is its cause). */
  signal?: AbortSignal | undefined;
}

/**
 * A run with a schema resolves to the schema's type when the schema is written as a literal
 * (inline or `as const`: see FromSchema); otherwise pass the type: `run<Review>(prompt, { schema })`.
 * A run without a schema resolves to the agent's text.
 */
export interface Agent<Options extends AgentOptions = AgentOptions> {
  run<const S extends JsonSchema>(prompt: string, options: Options & { schema: S }): Promise<FromSchema<S>>;
  run<TOutput = string>(prompt: string, options?: Options): Promise<TOutput>;
}

/** The seam as a function: `(prompt, options) => Promise<result>`, typed like Agent.run. */
export interface AgentFunction<Options extends AgentOptions = AgentOptions> {
  <const S extends JsonSchema>(prompt: string, options: Options & { schema: S }): Promise<FromSchema<S>>;
  <TOutput = string>(prompt: string, options?: Options): Promise<TOutput>;
}

/** Any runtime with a `run(prompt, options)`; its options type carries over to the function. */
export interface AgentRuntime<Options extends AgentOptions = AgentOptions> {
  run(prompt: string, options?: Options): Promise<unknown>;
}

export function bindAgent<Options extends AgentOptions = AgentOptions>(
  runtime: AgentRuntime<Options>,
): AgentFunction<Options> {
  return ((prompt: string, options?: Options) => runtime.run(prompt, options)) as AgentFunction<Options>;
}
