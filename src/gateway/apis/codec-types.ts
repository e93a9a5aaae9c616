// The provider-neutral shapes of requests and replies every codec produces (see api-codec.ts). Types
// only, so the codec modules and the registry can share them without depending on each other.
export type ConversationPart =
  | { kind: "text"; text: string }
  /** `arguments`: the parsed JSON, or the raw string when it is not JSON. */
  | { kind: "tool-call"; id: string; name: string; arguments: unknown }
  /** `name`: the tool's name where the wire format carries it (Google, Mistral). */
  | { kind: "tool-result"; callId: string; name?: string; text: string; isError?: boolean }
  /** sha256 (hex) of the decoded image bytes, or of the reference when it is not inline data. */
  | { kind: "image"; sha256: string };

export interface ConversationMessage {
  role: "user" | "assistant" | "tool";
  parts: ConversationPart[];
}

export interface ModelTool {
  name: string;
  description: string;
  parameters: unknown;
}

/**
 * A request in neutral form. Volatile fields (cache markers, prompt-cache keys, session ids,
 * message item ids, reasoning and thinking blocks) are dropped.
 */
export interface ModelRequest {
  api: string;
  model: string;
  stream: boolean;
  /** Every system/developer instruction, joined with a blank line. */
  system: string;
  messages: ConversationMessage[];
  tools: ModelTool[];
  /**
   * Every other top-level field of the body, as sent (sampling settings, tool_choice, logit_bias,
   * response_format, stop, reasoning, ...), without the ones Pi changes from one request of a
   * conversation to the next (see requestSettings in codec-support.ts). Keys in the body's order.
   */
  settings: Record<string, unknown>;
}

/** What Pi records as the assistant message's `stopReason` for a reply. */
export type PiStopReason = "stop" | "length" | "toolUse" | "error";

export interface ModelReplyToolCall {
  /**
   * The id Pi gives the call (for openai-responses `call_id|item_id`, as Pi writes it). Empty
   * when Pi makes one up itself (Google, when the model sends none: Pi uses the clock).
   */
  id: string;
  name: string;
  /**
   * The arguments text Pi parses (see prepareToolArguments in src/pi/tool-arguments.ts): the
   * streamed pieces joined (Google: its `args` object written out). For grammar-constrained
   * (custom) tools, which Pi only uses with compat flags, `{"input": <the raw input text>}`.
   */
  argumentsJson: string;
}

/** Thinking that Pi may send back as plain text in the next request (see ModelReply.thinkingAsText). */
export interface ModelReplyThinking {
  /** The thinking text, as the model streamed it. */
  text: string;
  /** How many of the reply's text blocks (`textBlocks`, empty ones included) Pi sends back before it. */
  at: number;
}

export interface ModelReply {
  /** The reply's text blocks joined with "\n", as Pi prints its final text. */
  text: string;
  /** The text blocks as Pi splits them into content blocks (empty ones included). */
  textBlocks: string[];
  toolCalls: ModelReplyToolCall[];
  /**
   * The reply's non-blank thinking that Pi sends back as text when the model's compat settings
   * say so (conversation-ledger.ts): anthropic-messages thinking blocks without a signature (as
   * text blocks in place, unless allowEmptySignature), openai-completions reasoning fields (one
   * text part first, with requiresThinkingAsText). Absent when there is none.
   */
  thinkingAsText?: ModelReplyThinking[];
  /** The provider's own stop/finish reason (for openai-responses the status, `incomplete.<reason>`). */
  stopReason?: string;
  /** The stop reason Pi would record for this reply, when the reply says. */
  piStopReason?: PiStopReason;
  /** An error event inside an otherwise 2xx reply (or a reply Pi would fail on). */
  error?: string;
  /** The reply reached its proper end (e.g. [DONE], message_stop, a finish reason). */
  complete: boolean;
  /** The parser hit a size cap and stopped reading (see `truncation` for which). */
  truncated?: boolean;
  /** Which cap was hit, in words. */
  truncation?: string;
}

export interface RequestPolicy {
  /** The run's model id, as the provider sees it. */
  model: string;
  /**
   * Provider-side features the policy allows by name: a server tool's type or key
   * (`web_search_20250305`, `web_search`, `googleSearch`, ...) or a request field
   * (`mcp_servers`, `previous_response_id`, ...), as the refusal message names it.
   */
  allowServerTools?: readonly string[];
  /** Beta flags allowed on top of the ones Pi itself sends (`anthropic-beta`, `openai-beta`). */
  allowBetas?: readonly string[];
}

export type RequestHeaders = Record<string, string | string[] | undefined>;

export interface ReplyLimits {
  /** Largest SSE line or event, in bytes. */
  maxEventBytes: number;
  /** Largest non-streamed (JSON) reply, in bytes. */
  maxJsonBytes: number;
  /** Largest sum of text and tool-call argument characters kept. */
  maxContentChars: number;
}

export interface ReplyParser {
  /** Feeds the next piece of the (decoded, not gzip'd) response body. */
  push(chunk: Buffer): void;
  /** The body ended normally; returns what the model said. Call once. */
  end(): ModelReply;
}

export type ParsedRequest = { ok: true; request: ModelRequest } | { ok: false; reason: string };

export interface ApiCodec {
  readonly api: string;
  /** `pathname` is relative to the provider's base URL, without the query string. */
  parseRequest(pathname: string, body: unknown): ParsedRequest;
  /**
   * Why the gateway must refuse the request, or undefined: a model other than the run's,
   * provider-side server tools (MCP connectors, web fetch/search, code execution, file APIs,
   * computer use, content the provider would fetch from a URL, stored server-side state),
   * beta flags not on the allow-list.
   */
  refusal(pathname: string, body: unknown, headers: RequestHeaders, policy: RequestPolicy): string | undefined;
  /** Parses the upstream's response body as it streams (SSE or JSON by content type), in bounded memory. */
  replyParser(contentType: string | undefined, limits?: Partial<ReplyLimits>): ReplyParser;
}
