// Watches one generation's response as it is relayed: feeds the api codec's reply parser (so
// the host knows what the model said, in bounded memory) and, when asked, keeps the chunks with
// their timing for a record. It reads what the sandbox receives (scrubbed of the route's
// credentials, forward-request.ts) and never changes it.
import type http from "node:http";
import { performance } from "node:perf_hooks";
import type { ApiCodec, ModelReply, ReplyParser } from "./apis/api-codec.js";
import type { ResponseTap } from "./forward-request.js";
import type { ExchangeRecording, RecordLimits } from "./gateway-records.js";
import { downstreamResponseHeaders } from "./relay-headers.js";

const DEFAULT_MAX_RECORDED_RESPONSE_BYTES = 16 * 1024 * 1024;

export class ExchangeTap implements ResponseTap {
  #parser: ReplyParser | undefined;
  #problem: string | undefined;
  #response: ExchangeRecording["response"];
  #recordedBytes = 0;
  readonly #started = performance.now();

  constructor(
    private readonly codec: ApiCodec,
    private readonly record?: RecordLimits,
  ) {}

  onHeaders(status: number, headers: http.IncomingHttpHeaders): void {
    const encoding = String(headers["content-encoding"] ?? "identity").toLowerCase();
    if (encoding !== "identity") {
      // The gateway asks for identity; an upstream that compresses anyway cannot be read here.
      this.#problem = `the upstream sent a ${encoding}-encoded body`;
    } else {
      const contentType = headers["content-type"];
      this.#parser = this.codec.replyParser(Array.isArray(contentType) ? contentType[0] : contentType);
    }
    if (this.record) {
      this.#response = {
        status,
        headers: downstreamResponseHeaders(headers) as Record<string, string | string[]>,
        chunks: [],
        bodyTruncated: false,
      };
    }
  }

  onChunk(chunk: Buffer): void {
    if (this.#parser) {
      try {
        this.#parser.push(chunk);
      } catch (error) {
        this.#fail(error);
      }
    }
    const response = this.#response;
    if (!response || response.bodyTruncated) return;
    const cap = this.record?.maxResponseBytes ?? DEFAULT_MAX_RECORDED_RESPONSE_BYTES;
    if (this.#recordedBytes + chunk.length > cap) {
      response.bodyTruncated = true;
      return;
    }
    this.#recordedBytes += chunk.length;
    response.chunks.push({ atMs: Math.round((performance.now() - this.#started) * 10) / 10, data: Buffer.from(chunk) });
  }

  /** What the model said (call once, after the relay ended) and the recorded response. */
  finish(): { reply?: ModelReply; replyProblem?: string; response?: ExchangeRecording["response"] } {
    let reply: ModelReply | undefined;
    if (this.#parser) {
      try {
        reply = this.#parser.end();
      } catch (error) {
        this.#fail(error);
      }
    }
    this.#parser = undefined;
    const problem = reply ? undefined : (this.#problem ?? "no response body arrived");
    return {
      ...(reply ? { reply } : {}),
      ...(problem ? { replyProblem: problem } : {}),
      ...(this.#response ? { response: this.#response } : {}),
    };
  }

  #fail(error: unknown): void {
    // A parser bug must not break the relay; the exchange just has no reply.
    this.#parser = undefined;
    this.#problem = `the reply parser failed: ${error instanceof Error ? error.message : String(error)}`;
  }
}
