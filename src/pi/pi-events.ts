// Pi's JSON-mode records (docs/json.md in @earendil-works/pi-coding-agent 1.6.0).
// Every record is kept as a plain object so unknown event types and fields reach logs and
// `lastEvents` untouched; only the events the host acts on get a schema, and those are
// loose objects so a newer Pi adding fields does not break parsing.
import { type JsonShapeLimits, jsonShapeProblem } from "../util/json-shape.js";
import { lazily, z } from "../util/zod.js";

export type PiEvent = { type: string; [key: string]: unknown };

type ParsedPiRecord = { ok: true; event: PiEvent } | { ok: false; error: string; tooLarge?: true };

/**
 * The most structure one line may hold: the sandbox can write Pi-shaped lines (up to the policy's
 * maxLineMb), and JSON.parse of 16 MiB of `[{},{},...]` took ~5 s and ~400 MB of the controller
 * that every concurrent run shares. Pi's own lines are far inside it (its largest, `agent_end`,
 * carries the conversation: some tens of values a message).
 */
export const PI_RECORD_SHAPE: JsonShapeLimits = Object.freeze({ maxValues: 200_000, maxDepth: 128 });
/** `bytes`: the line undecoded, when the reader has them (counting then copies nothing). */
export function parsePiRecord(line: string, bytes: Uint8Array = Buffer.from(line, "utf8")): ParsedPiRecord {
  // Every line, short ones too: 9 KB of nesting parses, and then breaks whatever walks it recursively.
  const problem = jsonShapeProblem(bytes, PI_RECORD_SHAPE);
  if (problem) return { ok: false, error: `too large a structure: ${problem}`, tooLarge: true };
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    return { ok: false, error: `not JSON: ${(error as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: "record is not a JSON object" };
  }
  if (typeof (value as { type?: unknown }).type !== "string") {
    return { ok: false, error: 'record has no string "type"' };
  }
  return { ok: true, event: value as PiEvent };
}

/** The event schemas, built on first use: importing the library loads no zod (session 27). */
function buildSchemas() {
  const contentBlock = z.looseObject({ type: z.string() });

  const usageSchema = z.looseObject({
    input: z.number(),
    output: z.number(),
    cacheRead: z.number(),
    cacheWrite: z.number(),
    totalTokens: z.number(),
    cost: z.looseObject({ total: z.number() }),
  });

  // stopReason stays a string rather than an enum: a value added by a later Pi must not make
  // the whole message unreadable.
  const assistantMessageSchema = z.looseObject({
    role: z.literal("assistant"),
    content: z.array(contentBlock),
    stopReason: z.string(),
    errorMessage: z.string().optional(),
    usage: usageSchema,
    provider: z.string(),
    model: z.string(),
  });

  const toolExecutionStartSchema = z.looseObject({
    type: z.literal("tool_execution_start"),
    toolCallId: z.string(),
    toolName: z.string(),
    args: z.unknown(),
  });

  const toolExecutionEndSchema = z.looseObject({
    type: z.literal("tool_execution_end"),
    toolCallId: z.string(),
    toolName: z.string(),
    // Pi tool results are { content, details }; bash adds structuredContent and has no details.
    result: z.looseObject({ content: z.array(contentBlock).optional(), details: z.unknown().optional() }),
    isError: z.boolean(),
    durationMs: z.number().optional(),
  });

  /** Only assistant messages match; user, system and tool-result message_end records do not. */
  const assistantMessageEndSchema = z.looseObject({
    type: z.literal("message_end"),
    message: assistantMessageSchema,
  });

  const turnStartSchema = z.looseObject({ type: z.literal("turn_start") });

  const turnEndSchema = z.looseObject({
    type: z.literal("turn_end"),
    message: z.unknown(),
    toolResults: z.array(z.unknown()),
  });

  const agentEndSchema = z.looseObject({
    type: z.literal("agent_end"),
    messages: z.array(z.unknown()),
    willRetry: z.boolean().optional(),
  });

  const agentSettledSchema = z.looseObject({
    type: z.literal("agent_settled"),
    aborted: z.boolean(),
  });

  const autoRetryStartSchema = z.looseObject({
    type: z.literal("auto_retry_start"),
    attempt: z.number(),
    maxAttempts: z.number(),
    delayMs: z.number(),
    errorMessage: z.string().optional(),
  });

  const autoRetryEndSchema = z.looseObject({
    type: z.literal("auto_retry_end"),
    success: z.boolean(),
    attempt: z.number().optional(),
    finalError: z.string().optional(),
  });
  return {
    toolExecutionStartSchema,
    toolExecutionEndSchema,
    assistantMessageEndSchema,
    turnStartSchema,
    turnEndSchema,
    agentEndSchema,
    agentSettledSchema,
    autoRetryStartSchema,
    autoRetryEndSchema,
  };
}
const schemas = lazily(buildSchemas);
type Schemas = ReturnType<typeof buildSchemas>;

type AssistantMessageEnd = z.infer<Schemas["assistantMessageEndSchema"]>;
export type AssistantMessage = AssistantMessageEnd["message"];

// The type check comes first so the hot path (message_update, thousands per run) never
// reaches zod.
function accessor<K extends keyof Schemas>(type: string, key: K) {
  return (event: PiEvent): z.infer<Schemas[K]> | undefined => {
    if (event.type !== type) return undefined;
    const parsed = schemas()[key].safeParse(event);
    return parsed.success ? (parsed.data as z.infer<Schemas[K]>) : undefined;
  };
}

export const asToolExecutionStart = accessor("tool_execution_start", "toolExecutionStartSchema");
export const asToolExecutionEnd = accessor("tool_execution_end", "toolExecutionEndSchema");
export const asAssistantMessageEnd = accessor("message_end", "assistantMessageEndSchema");
export const asTurnStart = accessor("turn_start", "turnStartSchema");
export const asTurnEnd = accessor("turn_end", "turnEndSchema");
export const asAgentEnd = accessor("agent_end", "agentEndSchema");
export const asAgentSettled = accessor("agent_settled", "agentSettledSchema");
export const asAutoRetryStart = accessor("auto_retry_start", "autoRetryStartSchema");
export const asAutoRetryEnd = accessor("auto_retry_end", "autoRetryEndSchema");

/** The text blocks of a message, in order (thinking and tool calls are not part of the answer). */
export function textBlocksOf(content: ReadonlyArray<{ type: string; [key: string]: unknown }>): string[] {
  const texts: string[] = [];
  for (const block of content) {
    if (block.type === "text" && typeof block.text === "string") texts.push(block.text);
  }
  return texts;
}
