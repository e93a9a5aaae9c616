// sandbox-run/testing: test your agent workflows without a model provider, in your own vitest or
// jest suites. Everything else stays real: a fresh sandbox per call, real Pi, the real gateway.
//
//   scriptedModel([...steps])   a model that does exactly what the test says (a local server
//                               speaking a provider's wire format); pass `model.options` to an agent
//   replayRecord(dir)           a model that answers from recorded runs (--record / recordTo)

import type { ModelRequest } from "./gateway/apis/api-codec.js";
import { FINAL_TOOL_NAME } from "./pi/pi-args.js";
import { SCRIPTED_APIS, type ScriptedApi, startScriptedModelServer } from "./scripted-model/scripted-model-server.js";

export type { ConversationMessage, ConversationPart, ModelRequest } from "./gateway/apis/api-codec.js";
export type { Divergence, ReplayMode, ReplaySpeed } from "./replay/replay-server.js";
export type { ReplayCall, ReplayOptions, ReplaySource } from "./replay/replay-source.js";
export { replayRecord } from "./replay/replay-source.js";
export type { ReplaySummary } from "./replay/replay-summary.js";
export type { ScriptedApi } from "./scripted-model/scripted-model-server.js";
export { SCRIPTED_APIS } from "./scripted-model/scripted-model-server.js";

/** One reply of a scripted model. */
export type ScriptedStep =
  /** Answer with text and end the turn. */
  | { text: string }
  /** Call tools, e.g. `{ toolCalls: [{ name: "bash", arguments: { command: "npm test" } }] }`. */
  | { toolCalls: Array<{ name: string; arguments: unknown }> }
  /** In a run with a schema: give the final result (a call of sandbox-run's final tool). */
  | { final: unknown }
  /** Fail the request with this HTTP status (the provider is down); `body` is the error message. */
  | { httpStatus: number; body?: string };

/**
 * The script: the n-th reply of a conversation is step n (past the end the model says "Done."),
 * or a function of the turn (0 for the first reply) and the conversation so far.
 */
export type Script = readonly ScriptedStep[] | ((turn: number, conversation: ModelRequest) => ScriptedStep);

export interface ScriptedModelOptions {
  /** The provider API the model speaks (default openai-completions). */
  api?: ScriptedApi;
  /** The model id (default "model"); the run's model is `scripted/<id>`. */
  id?: string;
}

export interface ScriptedRequest {
  /** The request's conversation in neutral form: system prompt, messages (with tool results), tools. */
  conversation: ModelRequest | undefined;
  /** The request body as the provider received it. */
  body: unknown;
}

export interface ScriptedModel {
  /** The model to run: `scripted/<id>`. */
  readonly model: string;
  /** The Pi models.json that routes it (no key needed); pass as `models`. */
  readonly models: Record<string, unknown>;
  /** `{ model, models }`, to spread into ContainerPiAgent or run options. */
  readonly options: { model: string; models: Record<string, unknown> };
  /** Every generation request the model received, oldest first (each run starts its own conversation). */
  readonly requests: readonly ScriptedRequest[];
  /** Stops the model's server; rejects when the script threw (each such request was answered with a 400 naming it). */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts a model that replies as the script says, for tests: real Pi in a real sandbox talks to it
 * through sandbox-run's gateway, as it would to a provider. Every run starts at step 0 (the step
 * is the number of model replies already in the conversation), so one scripted model can serve
 * many runs, one after another or at once.
 *
 * ```ts
 * const model = await scriptedModel([
 *   { toolCalls: [{ name: "bash", arguments: { command: "cat package.json" } }] },
 *   { final: { verdict: "approve" } },
 * ]);
 * const agent = new ContainerPiAgent({ ...model.options });
 * expect(await agent.run("Review", { cwd, schema })).toEqual({ verdict: "approve" });
 * await model.close();
 * ```
 */
export async function scriptedModel(script: Script, options: ScriptedModelOptions = {}): Promise<ScriptedModel> {
  const api = options.api ?? "openai-completions";
  if (!SCRIPTED_APIS.includes(api))
    throw new TypeError(`scriptedModel: api must be one of ${SCRIPTED_APIS.join(", ")}`);
  const id = options.id ?? "model";
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id))
    throw new TypeError(`scriptedModel: id ${JSON.stringify(id)} is not a model id`);
  const checked = (step: ScriptedStep, where: string): ScriptedStep => {
    const problem = stepProblem(step);
    if (problem) throw new TypeError(`scriptedModel: ${where} ${problem}`);
    return step;
  };
  // Checked now: a typo in a step fails here, not as a run waiting on its model.
  const steps = typeof script === "function" ? undefined : script.map((step, index) => checked(step, `step ${index}`));
  const stepFor = (turn: number, conversation: ModelRequest): ScriptedStep =>
    typeof script === "function"
      ? checked(script(turn, conversation), `the step for turn ${turn}`)
      : (steps?.[turn] ?? { text: "Done." });
  const server = await startScriptedModelServer({
    scripts: {
      [id]: (_request, turn, context) => {
        const step = stepFor(turn, context.conversation);
        if (!("final" in step)) return step;
        // A run without a schema has no final tool: the call would fail in Pi, the script's
        // next step (or "Done.") would become the run's text, and the test would check the wrong thing.
        if (!context.conversation.tools.some((tool) => tool.name === FINAL_TOOL_NAME))
          throw new Error(
            `the step for turn ${turn} is a { final } result, but this run has no schema: give the run a schema, or answer with { text }`,
          );
        return { toolCalls: [{ name: FINAL_TOOL_NAME, arguments: step.final }] };
      },
    },
  });
  const model = `scripted/${id}`;
  const models = {
    providers: {
      scripted: {
        baseUrl: server.baseUrlFor(api),
        api,
        // Pi wants a key for a custom provider; this one is a plain value the server ignores.
        apiKey: "scripted-model-no-key",
        models: [{ id, contextWindow: 128000, maxTokens: 16384 }],
      },
    },
  };
  // What the script threw (a failed expect() inside it) is each request's 400, and the test's
  // failure here: the run only sees a model error.
  const close = async () => {
    await server.close();
    const [first, ...more] = server.scriptErrors;
    if (first)
      throw new Error(
        `scriptedModel: the script failed${more.length ? ` (and ${more.length} more time${more.length > 1 ? "s" : ""})` : ""}: ${first.message}`,
        { cause: first },
      );
  };
  return {
    model,
    models,
    options: { model, models },
    get requests() {
      return server.requests.map((request) => ({ conversation: request.conversation, body: request.body }));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Why a value is not a step a script may give, or undefined. */
function stepProblem(step: unknown): string | undefined {
  if (!step || typeof step !== "object") return `is ${step === null ? "null" : typeof step}, not a step`;
  const value = step as Record<string, unknown>;
  if (typeof value.text === "string") return undefined;
  if (Array.isArray(value.toolCalls)) return undefined;
  if ("final" in value) return undefined;
  if (typeof value.httpStatus === "number") return undefined;
  return `has none of text (a string), toolCalls (an array), final or httpStatus (a number): ${JSON.stringify(step).slice(0, 120)}`;
}
