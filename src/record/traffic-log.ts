// exchanges.jsonl: every generation the gateway relayed, with its bytes, written as each exchange
// ends (streamed, never held for the whole run). Bounded: each exchange's request and response are
// cut at the gateway's caps, and past the total cap exchanges are listed without their bytes (the
// record says so, and replay stops there). No credential is ever written: the gateway's records
// carry none, and as a second line of defence every credential value the gateway adds is searched
// for in the bytes (an upstream error may echo a key) and replaced.
import type fs from "node:fs";
import type { GatewayExchange, RecordLimits } from "../gateway/model-gateway.js";
import { escapeUnsafeInJson } from "../util/unsafe-chars.js";
import { CredentialScrubber } from "./credential-scrubber.js";
import { type RecordedExchange, type StoredBytes, storeBytes } from "./record-format.js";

export interface TrafficLimits {
  /** Request body bytes kept per exchange (default 8 MiB). */
  maxRequestBytes: number;
  /** Response body bytes kept per exchange (default 16 MiB). */
  maxResponseBytes: number;
  /** All exchanges together (default 128 MiB); past it, exchanges are listed without their bytes. */
  maxTotalBytes: number;
}

export const DEFAULT_TRAFFIC_LIMITS: TrafficLimits = Object.freeze({
  maxRequestBytes: 8 * 1024 * 1024,
  maxResponseBytes: 16 * 1024 * 1024,
  maxTotalBytes: 128 * 1024 * 1024,
});

interface TrafficSummary {
  exchanges: number;
  /** Exchanges listed without their bytes (over the total cap, or not kept by the gateway). */
  omitted: number;
  /** Exchanges whose request or response was cut at the per-exchange cap. */
  truncated: number;
  /** Exchanges in which a credential value was found and replaced. */
  scrubbed: number;
  bytes: number;
}

export class TrafficLog {
  readonly #stream: fs.WriteStream;
  readonly #summary: TrafficSummary = { exchanges: 0, omitted: 0, truncated: 0, scrubbed: 0, bytes: 0 };
  #error: string | undefined;

  constructor(
    /** A stream on a new file the caller created (exclusively, without following links: HostDir.newWriteStream). */
    stream: fs.WriteStream,
    readonly limits: TrafficLimits = DEFAULT_TRAFFIC_LIMITS,
    /** The record's credential values (see forbid); shared with the rest of the record. */
    readonly scrubber: CredentialScrubber = new CredentialScrubber(),
  ) {
    this.#stream = stream;
    this.#stream.on("error", (error) => {
      this.#error ??= error.message;
    });
  }

  /** The caps the gateway applies while it keeps an exchange's bytes. */
  get gatewayLimits(): RecordLimits {
    return { maxRequestBytes: this.limits.maxRequestBytes, maxResponseBytes: this.limits.maxResponseBytes };
  }

  /** Values that must never be written (the credentials the gateway adds); call before the first exchange. */
  forbid(values: readonly string[]): void {
    this.scrubber.forbid(values);
  }

  add(exchange: GatewayExchange): void {
    const summary = this.#summary;
    summary.exchanges++;
    // Escaped as the events are (run-recorder.ts): a line reader keeps each exchange one line.
    let line = escapeUnsafeInJson(this.#line(this.#recorded(exchange), exchange));
    if (summary.bytes + Buffer.byteLength(line) + 1 > this.limits.maxTotalBytes) {
      const omitted = `over the record's cap of ${this.limits.maxTotalBytes} bytes of model traffic`;
      line = escapeUnsafeInJson(this.#line({ ...outline(exchange), omitted }, exchange));
    }
    const kept = JSON.parse(line) as RecordedExchange;
    if (kept.omitted) summary.omitted++;
    else if (kept.request?.bodyTruncated || kept.response?.bodyTruncated) summary.truncated++;
    if (kept.scrubbed) summary.scrubbed++;
    summary.bytes += Buffer.byteLength(line) + 1;
    this.#stream.write(`${line}\n`);
  }

  /** Ends the file; returns what was written and, when writing failed, why. */
  async end(): Promise<{ summary: TrafficSummary; error?: string }> {
    await new Promise<void>((resolve) => this.#stream.end(resolve));
    return { summary: { ...this.#summary }, ...(this.#error ? { error: this.#error } : {}) };
  }

  #recorded(exchange: GatewayExchange): RecordedExchange {
    const recording = exchange.recording;
    if (!recording) return { ...outline(exchange), omitted: "the gateway kept no bytes of this exchange" };
    let scrubbed = false;
    const scrub = (bytes: Buffer): Buffer => {
      const clean = this.#scrubBytes(bytes);
      if (clean !== bytes) scrubbed = true;
      return clean;
    };
    const body = scrub(recording.request.body);
    const target = this.#scrubText(recording.request.target);
    if (target !== recording.request.target) scrubbed = true;
    let response: RecordedExchange["response"];
    if (recording.response) {
      const { chunks } = recording.response;
      const joined = Buffer.concat(chunks.map((c) => c.data));
      const clean = scrub(joined);
      // A value split across chunks is only visible in the whole body: then it is stored as one chunk.
      const stored: Array<{ atMs: number } & StoredBytes> =
        clean === joined
          ? chunks.map((c) => ({ atMs: c.atMs, ...storeBytes(c.data) }))
          : [{ atMs: chunks.at(-1)?.atMs ?? 0, ...storeBytes(clean) }];
      response = {
        status: recording.response.status,
        headers: recording.response.headers,
        chunks: stored,
        bodyTruncated: recording.response.bodyTruncated,
      };
    }
    return {
      ...outline(exchange),
      request: {
        method: recording.request.method,
        target,
        headers: recording.request.headers,
        body: storeBytes(body),
        bodyTruncated: recording.request.bodyTruncated,
      },
      ...(response ? { response } : {}),
      ...(scrubbed ? { scrubbed: true as const } : {}),
    };
  }

  /** The entry as one JSON line, with every credential value replaced (and then marked). */
  #line(entry: RecordedExchange, exchange: GatewayExchange): string {
    const raw = JSON.stringify(entry);
    const clean = this.#scrubText(raw);
    if (clean === raw) return raw;
    try {
      return JSON.stringify({ ...(JSON.parse(clean) as RecordedExchange), scrubbed: true });
    } catch {
      // The value spanned JSON syntax: keep nothing of the exchange but its place.
      return JSON.stringify({
        seq: exchange.seq,
        routeId: exchange.routeId,
        api: exchange.api,
        path: "",
        status: exchange.status,
        relay: exchange.relay,
        startedMs: exchange.startedMs,
        durationMs: exchange.durationMs,
        omitted: "a credential value was found in it",
        scrubbed: true,
      } satisfies RecordedExchange);
    }
  }

  #scrubBytes(bytes: Buffer): Buffer {
    return this.scrubber.bytes(bytes);
  }

  #scrubText(text: string): string {
    return this.scrubber.text(text);
  }
}

/** Everything of an exchange but its bytes. */
function outline(exchange: GatewayExchange): RecordedExchange {
  const reply = exchange.reply;
  return {
    seq: exchange.seq,
    routeId: exchange.routeId,
    api: exchange.api,
    path: exchange.path,
    status: exchange.status,
    relay: exchange.relay,
    startedMs: exchange.startedMs,
    ...(exchange.headersMs !== undefined ? { headersMs: exchange.headersMs } : {}),
    durationMs: exchange.durationMs,
    ...(reply
      ? {
          reply: {
            text: reply.text,
            toolCalls: reply.toolCalls.map(({ id, name, argumentsJson }) => ({ id, name, argumentsJson })),
            ...(reply.stopReason !== undefined ? { stopReason: reply.stopReason } : {}),
            ...(reply.error !== undefined ? { error: reply.error } : {}),
            complete: reply.complete,
          },
        }
      : {}),
  };
}
