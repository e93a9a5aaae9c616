// A server-sent-events frame parser for model replies the gateway relays, in bounded memory.
//
// It follows the WHATWG rules that the provider SDKs inside Pi follow (openai's and Pi's own
// Anthropic reader): lines end at LF, CR or CRLF (a CR at the end of one chunk and an LF at the
// start of the next are one line break), `data:` lines of one event are joined with "\n", a
// blank line dispatches, `:` starts a comment, one space after the colon is dropped. Lines are
// cut from bytes before they are decoded, so a UTF-8 character split across chunks is whole.
// Like those SDKs, an unterminated last line and a last event without its blank line are
// still delivered at end().
//
// The upstream is trusted to be the provider, but its bytes also flow from a model the sandbox
// can steer, so a line or event larger than its cap stops the parser (truncated) rather than
// growing without limit.
//
// Why by hand: the reply read here is the evidence a result is checked against, so it must be read
// as the SDKs inside Pi read it. The usual library (eventsource-parser 3, which has a buffer cap)
// follows the spec and drops a last event that has no blank line after it ("data: x" then EOF),
// where Pi's readers deliver it: a stream that parses one way here and another way in Pi is how a
// forged reply would get past the check.

export interface SseEvent {
  /** The `event:` field, or null when the event had none. */
  event: string | null;
  /** The `data:` lines, joined with "\n". */
  data: string;
}

interface SseParserOptions {
  /** Largest line, in bytes. */
  maxLineBytes: number;
  /** Largest event (the sum of its data lines), in bytes. */
  maxEventBytes: number;
}

const DEFAULT_SSE_LIMITS: SseParserOptions = { maxLineBytes: 16 * 1024 * 1024, maxEventBytes: 16 * 1024 * 1024 };

const LF = 0x0a;
const CR = 0x0d;

export class SseParser {
  readonly #onEvent: (event: SseEvent) => void;
  readonly #limits: SseParserOptions;
  readonly #decoder = new TextDecoder("utf-8");
  #line: Buffer[] = [];
  #lineBytes = 0;
  #skipLeadingLf = false;
  #firstLine = true;
  #event: string | null = null;
  #data: string[] = [];
  #dataBytes = 0;
  #truncated: string | undefined;

  constructor(onEvent: (event: SseEvent) => void, limits: Partial<SseParserOptions> = {}) {
    this.#onEvent = onEvent;
    this.#limits = { ...DEFAULT_SSE_LIMITS, ...limits };
  }

  /** Why the parser stopped early (a cap was hit), or undefined. */
  get truncated(): string | undefined {
    return this.#truncated;
  }

  push(chunk: Buffer): void {
    let start = 0;
    if (this.#skipLeadingLf && chunk.length > 0) {
      this.#skipLeadingLf = false;
      if (chunk[0] === LF) start = 1;
    }
    for (let i = start; i < chunk.length && this.#truncated === undefined; i++) {
      const byte = chunk[i];
      if (byte !== LF && byte !== CR) continue;
      this.#appendToLine(chunk.subarray(start, i));
      this.#endLine();
      if (byte === CR) {
        if (i + 1 < chunk.length) {
          if (chunk[i + 1] === LF) i++;
        } else {
          this.#skipLeadingLf = true;
        }
      }
      start = i + 1;
    }
    if (this.#truncated === undefined && start < chunk.length) this.#appendToLine(chunk.subarray(start));
  }

  /** The body ended: delivers an unterminated last line and a pending event. */
  end(): void {
    if (this.#truncated !== undefined) return;
    if (this.#lineBytes > 0) this.#endLine();
    this.#dispatch();
  }

  #appendToLine(bytes: Buffer): void {
    if (bytes.length === 0 || this.#truncated !== undefined) return;
    if (this.#lineBytes + bytes.length > this.#limits.maxLineBytes) {
      this.#stop(`an event-stream line exceeded ${this.#limits.maxLineBytes} bytes`);
      return;
    }
    // Copy: the caller may reuse its buffer after push() returns.
    this.#line.push(Buffer.from(bytes));
    this.#lineBytes += bytes.length;
  }

  #endLine(): void {
    if (this.#truncated !== undefined) return;
    let line = this.#decoder.decode(Buffer.concat(this.#line, this.#lineBytes));
    this.#line = [];
    this.#lineBytes = 0;
    if (this.#firstLine) {
      this.#firstLine = false;
      if (line.startsWith("\uFEFF")) line = line.slice(1);
    }
    this.#handleLine(line);
  }

  #handleLine(line: string): void {
    if (line === "") {
      this.#dispatch();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") {
      this.#event = value;
    } else if (field === "data") {
      this.#dataBytes += Buffer.byteLength(value) + 1;
      if (this.#dataBytes > this.#limits.maxEventBytes) {
        this.#stop(`an event-stream event exceeded ${this.#limits.maxEventBytes} bytes`);
        return;
      }
      this.#data.push(value);
    }
  }

  #dispatch(): void {
    if (this.#event === null && this.#data.length === 0) return;
    const event: SseEvent = { event: this.#event, data: this.#data.join("\n") };
    this.#event = null;
    this.#data = [];
    this.#dataBytes = 0;
    this.#onEvent(event);
  }

  #stop(reason: string): void {
    this.#truncated = reason;
    this.#line = [];
    this.#lineBytes = 0;
    this.#data = [];
    this.#event = null;
  }
}
