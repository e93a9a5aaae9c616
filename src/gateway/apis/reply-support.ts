// Pieces every codec's reply parser shares: the body reader that tells SSE from JSON and keeps
// memory bounded, and an accumulator for text blocks and tool calls with a total size cap.
import type { ModelReply, ModelReplyThinking, PiStopReason, ReplyLimits, ReplyParser } from "./codec-types.js";
import { type SseEvent, SseParser } from "./sse-parser.js";

const DEFAULT_REPLY_LIMITS: ReplyLimits = {
  maxEventBytes: 16 * 1024 * 1024,
  maxJsonBytes: 64 * 1024 * 1024,
  maxContentChars: 32 * 1024 * 1024,
};

interface ReplyHandlers {
  /** One server-sent event. */
  onEvent(event: SseEvent): void;
  /** The whole body of a non-streamed (JSON) reply, parsed. */
  onJson(value: unknown): void;
  /** The body ended (after the last event or onJson); returns the reply. */
  finish(): ModelReply;
}

/**
 * A reply parser over `handlers`: SSE when the content type says event-stream, JSON when it
 * says json, otherwise by the first non-blank byte (`{` or `[` is JSON).
 */
export function createReplyParser(
  contentType: string | undefined,
  limits: Partial<ReplyLimits> | undefined,
  makeHandlers: (accumulator: ReplyAccumulator) => ReplyHandlers,
): ReplyParser {
  const caps = { ...DEFAULT_REPLY_LIMITS, ...limits };
  const accumulator = new ReplyAccumulator(caps.maxContentChars);
  const handlers = makeHandlers(accumulator);
  const declared = kindOf(contentType);
  let kind: "sse" | "json" | undefined = declared;
  let sse: SseParser | undefined;
  const json: Buffer[] = [];
  let jsonBytes = 0;
  let ended = false;

  const onEvent = (event: SseEvent) => {
    // Handlers may throw on input Pi would fail on; that ends the reply with an error.
    if (accumulator.stopped) return;
    try {
      handlers.onEvent(event);
    } catch (error) {
      accumulator.fail(error instanceof Error ? error.message : String(error));
    }
  };

  const push = (chunk: Buffer) => {
    if (ended || accumulator.stopped || chunk.length === 0) return;
    if (kind === undefined) {
      const first = chunk.find((byte) => byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d);
      if (first === undefined) return;
      kind = first === 0x7b || first === 0x5b ? "json" : "sse";
    }
    if (kind === "sse") {
      sse ??= new SseParser(onEvent, { maxLineBytes: caps.maxEventBytes, maxEventBytes: caps.maxEventBytes });
      sse.push(chunk);
      if (sse.truncated) accumulator.truncate(sse.truncated);
      return;
    }
    jsonBytes += chunk.length;
    if (jsonBytes > caps.maxJsonBytes) {
      json.length = 0;
      accumulator.truncate(`the JSON reply exceeded ${caps.maxJsonBytes} bytes`);
      return;
    }
    json.push(Buffer.from(chunk));
  };

  return {
    push,
    end() {
      if (ended) throw new Error("ReplyParser.end() called twice");
      ended = true;
      if (!accumulator.stopped) {
        if (sse) {
          sse.end();
        } else if (kind === "json") {
          let value: unknown;
          try {
            value = JSON.parse(Buffer.concat(json).toString("utf8"));
          } catch (error) {
            accumulator.fail(`the JSON reply is malformed: ${error instanceof Error ? error.message : String(error)}`);
          }
          if (!accumulator.stopped) {
            try {
              handlers.onJson(value);
            } catch (error) {
              accumulator.fail(error instanceof Error ? error.message : String(error));
            }
          }
        }
      }
      return handlers.finish();
    },
  };
}

function kindOf(contentType: string | undefined): "sse" | "json" | undefined {
  const type = contentType?.split(";")[0]?.trim().toLowerCase();
  if (type === "text/event-stream") return "sse";
  if (type === "application/json" || type?.endsWith("+json")) return "json";
  return undefined;
}

/** JSON.parse of one event's data; throws a message Pi-like readers would fail with. */
export function parseEventJson(data: string, what: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new Error(`malformed ${what} JSON in the event stream`);
  }
}

interface ToolCallState {
  id: string;
  name: string;
  args: string;
}

interface ThinkingState {
  text: string;
  /** Text blocks Pi sends back before it (see ModelReplyThinking.at). */
  at: number;
  /** A non-blank signature was seen: Pi sends it back as thinking, never as text. */
  signed: boolean;
}

/**
 * Text blocks and tool calls of one reply, in Pi's content order, with a cap on the characters
 * kept. Past the cap (or after an error) everything else is ignored and the reply is incomplete.
 */
export class ReplyAccumulator {
  readonly #maxChars: number;
  #chars = 0;
  readonly #order: Array<{ kind: "text"; index: number } | { kind: "tool"; index: number }> = [];
  readonly #texts: string[] = [];
  readonly #tools: ToolCallState[] = [];
  readonly #thinking: ThinkingState[] = [];
  #truncated: string | undefined;
  #error: string | undefined;
  #fatal = false;
  stopReason: string | undefined;
  piStopReason: PiStopReason | undefined;
  complete = false;

  constructor(maxChars: number) {
    this.#maxChars = maxChars;
  }

  /** Past a cap or an error: nothing more is read. */
  get stopped(): boolean {
    return this.#truncated !== undefined || this.#fatal;
  }

  get error(): string | undefined {
    return this.#error;
  }

  /** Opens a new text block; returns its handle. */
  openText(initial = ""): number {
    this.#texts.push("");
    const index = this.#texts.length - 1;
    this.#order.push({ kind: "text", index });
    this.appendText(index, initial);
    return index;
  }

  appendText(index: number, text: string): void {
    if (this.#spend(text.length)) this.#texts[index] += text;
  }

  setText(index: number, text: string): void {
    const previous = this.#texts[index]?.length ?? 0;
    if (this.#spend(text.length - previous)) this.#texts[index] = text;
  }

  textOf(index: number): string {
    return this.#texts[index] ?? "";
  }

  /**
   * Opens a thinking block that Pi may send back as text; returns its handle. `at`: how many text
   * blocks Pi sends back before it (default: the text blocks opened so far, i.e. in place).
   */
  openThinking(at = this.#texts.length): number {
    this.#thinking.push({ text: "", at, signed: false });
    return this.#thinking.length - 1;
  }

  appendThinking(index: number, text: string): void {
    const block = this.#thinking[index];
    if (block && this.#spend(text.length)) block.text += text;
  }

  /** A piece of the block's signature: once the signature is not blank, Pi sends the block back as thinking. */
  appendSignature(index: number, signature: string): void {
    const block = this.#thinking[index];
    // The pieces joined are blank only when every piece is.
    if (block && signature.trim() !== "") block.signed = true;
  }

  /** Opens a tool call; returns its handle. */
  openToolCall(id: string, name: string, args = ""): number {
    this.#tools.push({ id, name, args: "" });
    const index = this.#tools.length - 1;
    this.#order.push({ kind: "tool", index });
    this.appendArgs(index, args);
    return index;
  }

  get toolCallCount(): number {
    return this.#tools.length;
  }

  toolCall(index: number): Readonly<ToolCallState> | undefined {
    return this.#tools[index];
  }

  setToolId(index: number, id: string): void {
    const call = this.#tools[index];
    if (call) call.id = id;
  }

  setToolName(index: number, name: string): void {
    const call = this.#tools[index];
    if (call) call.name = name;
  }

  appendArgs(index: number, text: string): void {
    const call = this.#tools[index];
    if (call && this.#spend(text.length)) call.args += text;
  }

  setArgs(index: number, text: string): void {
    const call = this.#tools[index];
    if (call && this.#spend(text.length - call.args.length)) call.args = text;
  }

  truncate(reason: string): void {
    this.#truncated ??= reason;
    this.complete = false;
  }

  /**
   * Records the error Pi would report. Fatal (the default): an error event or unreadable data,
   * after which nothing more is read. Not fatal: a stop reason Pi treats as an error.
   */
  fail(message: string, fatal = true): void {
    this.#error ??= message;
    if (!fatal) return;
    this.#fatal = true;
    this.complete = false;
  }

  finish(): ModelReply {
    const textBlocks: string[] = [];
    for (const entry of this.#order) if (entry.kind === "text") textBlocks.push(this.#texts[entry.index] ?? "");
    const reply: ModelReply = {
      text: textBlocks.join("\n"),
      textBlocks,
      toolCalls: this.#tools.map((call) => ({ id: call.id, name: call.name, argumentsJson: call.args })),
      complete: this.complete && !this.stopped,
    };
    const thinkingAsText: ModelReplyThinking[] = this.#thinking
      .filter((block) => block.text.trim() !== "" && !block.signed)
      .map(({ text, at }) => ({ text, at }));
    if (thinkingAsText.length > 0) reply.thinkingAsText = thinkingAsText;
    if (this.stopReason !== undefined) reply.stopReason = this.stopReason;
    if (this.piStopReason !== undefined) reply.piStopReason = this.piStopReason;
    if (this.#error !== undefined) reply.error = this.#error;
    if (this.#truncated !== undefined) {
      reply.truncated = true;
      reply.truncation = this.#truncated;
    }
    return reply;
  }

  #spend(chars: number): boolean {
    if (this.stopped) return false;
    if (this.#chars + chars > this.#maxChars) {
      this.truncate(`the reply's text and tool arguments exceeded ${this.#maxChars} characters`);
      return false;
    }
    this.#chars += chars;
    return true;
  }
}

/** Pi's `sanitizeSurrogates`: drops unpaired UTF-16 surrogates (Pi applies it to Mistral's text). */
export function sanitizeSurrogates(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "");
}
