// Helpers the request side of every codec shares: reading loosely typed JSON, image digests,
// header lists, and the refusal rules that are the same for every API.
import { createHash } from "node:crypto";
import { DEFAULT_JSON_SHAPE_LIMITS, jsonShape } from "../../util/json-shape.js";
import type {
  ConversationMessage,
  ConversationPart,
  ParsedRequest,
  RequestHeaders,
  RequestPolicy,
} from "./codec-types.js";

export type JsonRecord = Record<string, unknown>;

export function isRecord(value: unknown): value is JsonRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function stringOr(value: unknown, fallback = ""): string {
  return typeof value === "string" ? value : fallback;
}

/** A request the codec cannot read; parseRequest turns it into `{ ok: false, reason }`. */
class UnreadableRequest extends Error {}

export function unreadable(reason: string): never {
  throw new UnreadableRequest(reason);
}

/** Runs a parse that may throw UnreadableRequest (or overflow the stack on absurd nesting). */
export function parseSafely(parse: () => ParsedRequest): ParsedRequest {
  try {
    return parse();
  } catch (error) {
    if (error instanceof UnreadableRequest) return { ok: false, reason: error.message };
    if (error instanceof RangeError) return { ok: false, reason: "the request is nested too deeply to read" };
    throw error;
  }
}

export function requireRecord(value: unknown, what: string): JsonRecord {
  return isRecord(value) ? value : unreadable(`${what} is not a JSON object`);
}

export function arrayOrEmpty(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : unreadable(`${what} is not an array`);
}

/**
 * Tool-call arguments as they appear in a request: JSON text is parsed, anything else kept. The
 * body's shape check (request-inspection.ts) does not look inside strings, so the values of every
 * arguments text one request carries are counted against one budget before they are parsed: 30 MB
 * of `"[{},{},...]"` as one call's arguments once took ~1 GB and 8-10 s of the controller.
 */
export class ArgumentsParser {
  #left: number;

  constructor(maxValues = DEFAULT_JSON_SHAPE_LIMITS.maxValues) {
    this.#left = maxValues;
  }

  value(value: unknown): unknown {
    if (typeof value !== "string") return value ?? {};
    const shape = jsonShape(Buffer.from(value, "utf8"), { ...DEFAULT_JSON_SHAPE_LIMITS, maxValues: this.#left });
    if (shape.problem) unreadable(`the tool-call arguments: ${shape.problem}`);
    this.#left -= shape.values;
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
}

export function sha256Hex(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** An image part: inline base64 data or a data: URL is hashed decoded; any other reference as text. */
export function imagePart(source: string): ConversationPart {
  const dataUrl = /^data:[^,]*;base64,/i.exec(source);
  if (dataUrl) return { kind: "image", sha256: sha256Hex(Buffer.from(source.slice(dataUrl[0].length), "base64")) };
  return { kind: "image", sha256: sha256Hex(source) };
}

export function base64ImagePart(data: unknown): ConversationPart {
  return { kind: "image", sha256: sha256Hex(Buffer.from(stringOr(data), "base64")) };
}

export function isDataUrl(url: unknown): boolean {
  return typeof url === "string" && /^data:/i.test(url);
}

/**
 * Output limits and thinking budgets: Pi fits them to the room left in the context window on
 * every request (clampMaxTokensToContext, clampThinkingBudgetToAnswerRoom), so they shrink as a
 * conversation grows, and the gateway lowers output limits to the run's cap. Dropped at any depth.
 */
const PER_REQUEST_KEY = /budget|^max_(completion_|output_)?tokens$|^maxOutputTokens$/i;
/** The prompt-cache key (a session id) is dropped as well: Pi's, and never the model's business. */
const PROMPT_CACHE_KEY = "prompt_cache_key";

/**
 * A request's top-level fields other than `modelled` (the ones the neutral form reads: model,
 * messages, system, tools, stream), without those Pi changes between the requests of one
 * conversation (PER_REQUEST_KEY, prompt_cache_key). What is left must stay the same along Pi's
 * conversation (conversation-ledger.ts): tool_choice, sampling settings, logit_bias, stop, ...
 */
export function requestSettings(request: JsonRecord, modelled: readonly string[]): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    if (modelled.includes(key) || key === PROMPT_CACHE_KEY || PER_REQUEST_KEY.test(key)) continue;
    // defineProperty: a "__proto__" key stays an own property.
    Object.defineProperty(settings, key, { value: withoutPerRequest(value), enumerable: true, writable: true });
  }
  return settings;
}

function withoutPerRequest(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutPerRequest);
  if (!isRecord(value)) return value;
  const kept: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (PER_REQUEST_KEY.test(key)) continue;
    Object.defineProperty(kept, key, { value: withoutPerRequest(inner), enumerable: true, writable: true });
  }
  return kept;
}

/** Appends parts to the last message when it has `role`, or starts a new message. */
export function appendParts(
  messages: ConversationMessage[],
  role: ConversationMessage["role"],
  parts: ConversationPart[],
) {
  const last = messages[messages.length - 1];
  if (last?.role === role && role !== "tool") last.parts.push(...parts);
  else messages.push({ role, parts });
}

/** Every value of a header, split on commas, trimmed, empty ones dropped. */
export function headerList(headers: RequestHeaders, name: string): string[] {
  const values: string[] = [];
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      if (typeof item !== "string") continue;
      for (const part of item.split(",")) if (part.trim()) values.push(part.trim());
    }
  }
  return values;
}

// ---- refusals -------------------------------------------------------------------------

export function bodyRefusal(body: unknown): string | undefined {
  return isRecord(body) ? undefined : "the request body is not a JSON object";
}

export function modelRefusal(model: unknown, policy: RequestPolicy, where = "model"): string | undefined {
  if (model === policy.model) return undefined;
  if (typeof model !== "string") return `the request names no model (${where}); this run uses "${policy.model}"`;
  return `the request asks for model "${short(model)}" (${where}); this run uses "${policy.model}"`;
}

function featureAllowed(policy: RequestPolicy, feature: string): boolean {
  return policy.allowServerTools?.includes(feature) === true;
}

/** A refusal for a provider-side feature, unless the policy names it. */
export function serverFeatureRefusal(policy: RequestPolicy, feature: string, what: string): string | undefined {
  if (featureAllowed(policy, feature)) return undefined;
  return `${what} ("${short(feature)}") runs on the provider's side and the policy does not allow it`;
}

/**
 * The first tool the provider would run itself, refused unless the policy allows its type. A tool
 * whose `type` passes `runsInSandbox` is one Pi executes; a tool that is not an object is refused.
 */
export function serverToolRefusal(
  tools: readonly unknown[],
  policy: RequestPolicy,
  runsInSandbox: (type: unknown) => boolean,
): string | undefined {
  for (const tool of tools) {
    if (isRecord(tool) && runsInSandbox(tool.type)) continue;
    const reason = serverFeatureRefusal(policy, isRecord(tool) ? String(tool.type) : "not an object", "a server tool");
    if (reason) return reason;
  }
  return undefined;
}

/** A refusal for beta flags outside Pi's own and the policy's. */
export function betaRefusal(
  values: readonly string[],
  piBetas: readonly string[],
  policy: RequestPolicy,
  header: string,
): string | undefined {
  const unknown = values.filter((beta) => !piBetas.includes(beta) && !policy.allowBetas?.includes(beta));
  if (unknown.length === 0) return undefined;
  return `${header} ${unknown.map((beta) => `"${short(beta)}"`).join(", ")} is not on the allow-list`;
}

/** The first refusal of several checks, in order. */
export function firstRefusal(...checks: Array<() => string | undefined>): string | undefined {
  for (const check of checks) {
    const reason = check();
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/** A value from the request, shortened for a message. */
export function short(value: string, max = 80): string {
  // Control characters (C0, DEL, C1) would reach logs and terminals; show them as "?".
  const printable = Array.from(value, (char) => {
    const code = char.codePointAt(0) ?? 0;
    return code < 0x20 || (code >= 0x7f && code <= 0x9f) ? "?" : char;
  }).join("");
  return printable.length > max ? `${printable.slice(0, max)}...` : printable;
}
