// What one generation request may cost, per Pi `api`: one response (the turn budget counts
// requests, so `n: 128` or `candidateCount: 8` would be 128 or 8 responses for one turn) of at most
// the run's output cap. Pi always asks for one response and for the model's whole output limit
// (`max_tokens: model.maxTokens`, 16k-262k for its built-in models), so a larger output limit is
// lowered to the cap rather than refused: refusing would fail every run on such a model, while a
// lowered limit only cuts an overlong reply short (Pi then sees stopReason "length", as it would at
// the model's own limit). A request that names no output limit gets the cap written in.
//
// The fields, as Pi 1.6.0 writes them (api/*.js) and the providers read them:
//   openai-completions     max_completion_tokens (or max_tokens, per compat), n
//   mistral-conversations  max_tokens, n
//   openai-responses       max_output_tokens (no n)
//   anthropic-messages     max_tokens (no n); thinking.budget_tokens must stay below max_tokens
//   google-generative-ai   generationConfig.maxOutputTokens, generationConfig.candidateCount
import { isRecord, type JsonRecord } from "./codec-support.js";

interface OutputLimitFields {
  /** Where the output limit may be: every one present is capped; the first is written when none is. */
  outputLimit: ReadonlyArray<readonly string[]>;
  /** Where a number of responses may be asked for. */
  responses: ReadonlyArray<readonly string[]>;
}

const FIELDS: Record<string, OutputLimitFields> = {
  "openai-completions": { outputLimit: [["max_completion_tokens"], ["max_tokens"]], responses: [["n"]] },
  "mistral-conversations": { outputLimit: [["max_tokens"]], responses: [["n"]] },
  "openai-responses": { outputLimit: [["max_output_tokens"]], responses: [] },
  "anthropic-messages": { outputLimit: [["max_tokens"]], responses: [] },
  "google-generative-ai": {
    outputLimit: [["generationConfig", "maxOutputTokens"]],
    responses: [["generationConfig", "candidateCount"]],
  },
};

/** Room Pi itself leaves for the answer when thinking shares the output limit (MIN_ANSWER_TOKENS). */
const ANSWER_ROOM_TOKENS = 1024;

type GenerationCap =
  /** `asked`: the largest output limit the request named (absent: none); `sent`: what goes upstream (with a cap). */
  { ok: true; asked?: number; sent?: number } | { ok: false; reason: string };

/**
 * Checks one generation request's body and lowers an output limit over `maxOutputTokens`, in
 * place (the gateway forwards the body it checked, re-serialised); without a cap it only checks.
 * Refuses more than one response per request and output limits that are not positive whole numbers.
 */
export function capGeneration(api: string, body: JsonRecord, maxOutputTokens: number | undefined): GenerationCap {
  const fields = Object.hasOwn(FIELDS, api) ? FIELDS[api] : undefined;
  if (!fields) return { ok: false, reason: `the gateway cannot bound generation requests of ${api}` };
  for (const path of fields.responses) {
    const value = read(body, path);
    if (value === undefined || value === null || value === 1) continue;
    return {
      ok: false,
      reason: `the request asks for ${describe(value)} responses (${path.join(".")}); the gateway forwards one response per request, so that each counts against the turn budget`,
    };
  }
  const present = fields.outputLimit.filter((path) => read(body, path) !== undefined && read(body, path) !== null);
  let asked: number | undefined;
  for (const path of present) {
    const value = read(body, path);
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1)
      return {
        ok: false,
        reason: `the output limit ${path.join(".")} is ${describe(value)}, not a positive whole number`,
      };
    asked = Math.max(asked ?? 0, value);
  }
  const named = asked !== undefined ? { asked } : {};
  if (maxOutputTokens === undefined) return { ok: true, ...named };
  const sent = Math.min(asked ?? maxOutputTokens, maxOutputTokens);
  // Every limit present above the cap is lowered (a smaller one stays); none present: the cap is written in.
  for (const path of present.length > 0 ? present : fields.outputLimit.slice(0, 1)) {
    const value = read(body, path) as number | undefined;
    if (value !== undefined && value <= maxOutputTokens) continue;
    if (!write(body, path, maxOutputTokens))
      return { ok: false, reason: `${path.slice(0, -1).join(".")} is not a JSON object` };
  }
  if (api === "anthropic-messages") fitThinkingBudget(body, sent);
  return { ok: true, ...named, sent };
}

/** Anthropic refuses a thinking budget at or above max_tokens: keep Pi's answer room below the cap. */
function fitThinkingBudget(body: JsonRecord, maxTokens: number): void {
  const thinking = body.thinking;
  if (!isRecord(thinking) || typeof thinking.budget_tokens !== "number") return;
  if (thinking.budget_tokens < maxTokens) return;
  thinking.budget_tokens = Math.max(ANSWER_ROOM_TOKENS, maxTokens - ANSWER_ROOM_TOKENS);
}

function read(body: JsonRecord, path: readonly string[]): unknown {
  let node: unknown = body;
  for (const key of path) {
    if (!isRecord(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

/** Sets `path` to `value`, creating missing objects on the way; false when a step is not an object. */
function write(body: JsonRecord, path: readonly string[], value: number): boolean {
  let node: JsonRecord = body;
  for (const key of path.slice(0, -1)) {
    const next = Object.hasOwn(node, key) ? node[key] : undefined;
    if (next === undefined || next === null) node[key] = {};
    else if (!isRecord(next)) return false;
    node = node[key] as JsonRecord;
  }
  node[path[path.length - 1]!] = value;
  return true;
}

function describe(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : String(JSON.stringify(value) ?? value);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}
