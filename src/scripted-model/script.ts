// What a scripted model answers: a list of steps, or a function of the request. The same steps
// work for every API the server speaks; each API's wire module turns a step into that
// provider's own reply format.
import type { ModelRequest } from "../gateway/apis/api-codec.js";

/** The Pi `api` names the scripted server speaks, each at its own base URL. */
export const SCRIPTED_APIS = [
  "openai-completions",
  "openai-responses",
  "anthropic-messages",
  "google-generative-ai",
  "mistral-conversations",
] as const;
export type ScriptedApi = (typeof SCRIPTED_APIS)[number];

/** Call one or more tools (in one reply). `arguments` is sent as JSON, or as is when a string. */
export interface ToolCallStep {
  /** `id`: the call's id where the test needs to know it (openai-completions); default call_<seq>_<i>. */
  toolCalls: Array<{ name: string; arguments: unknown; id?: string }>;
  /** Text the reply carries before its calls ("Let me run the tests."); openai-completions only. */
  preamble?: string;
}
/** Answer with text and end the turn. */
export interface TextStep {
  text: string;
}
/** Fail the request with an HTTP status (the provider is "down"); `body` is the error message. */
interface ErrorStep {
  httpStatus: number;
  body?: string;
}
/** Stream text forever (a model that never stops talking). */
export interface EndlessStep {
  endless: true;
}
export type ScriptStep = ToolCallStep | TextStep | ErrorStep | EndlessStep;

/** The parsed body of an openai-completions request (other APIs' bodies have their own shapes). */
interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string;
}
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: Array<{ function?: { name?: string } }>;
  stream?: boolean;
  [field: string]: unknown;
}

export interface ScriptContext {
  api: ScriptedApi;
  /** The request in provider-neutral form (system prompt, messages, tools). */
  conversation: ModelRequest;
}

/**
 * A script: a fixed list of steps (the n-th reply of a conversation is step n; past the end the
 * model says "Done."), or a function of the request body, the turn (how many assistant
 * replies the conversation already holds) and the neutral view of the request.
 */
export type Script = ScriptStep[] | ((request: ChatRequest, turn: number, context: ScriptContext) => ScriptStep);

export function pickStep(script: Script, request: ChatRequest, turn: number, context: ScriptContext): ScriptStep {
  if (typeof script === "function") return script(request, turn, context);
  return script[turn] ?? { text: "Done." };
}

/** A tool call's arguments as the JSON text a provider sends. */
export function argumentsText(args: unknown): string {
  return typeof args === "string" ? args : JSON.stringify(args);
}

/** Two pieces of a text (by code point), so replies arrive as several deltas like real ones. */
export function inTwo(text: string): string[] {
  const chars = Array.from(text);
  if (chars.length < 2) return [text];
  const half = Math.ceil(chars.length / 2);
  return [chars.slice(0, half).join(""), chars.slice(half).join("")];
}
