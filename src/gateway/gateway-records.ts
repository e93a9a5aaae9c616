// What the gateway reports. Every request (forwarded or refused) is a GatewayRequestRecord; every
// forwarded generation request is also a GatewayExchange: the conversation as the model saw it
// and the reply as the model gave it, parsed on the host from the bytes the gateway relayed.
// That is the evidence a run's result is taken from (never Pi's stdout), and what --record
// stores for replay. No record ever holds a credential the gateway added.
import type { ModelReply, ModelRequest } from "./apis/api-codec.js";
import type { RelayEnd } from "./forward-request.js";
import type { RefusalCode } from "./gateway-refusal.js";

export interface GatewayRequestRecord {
  routeId?: string;
  method: string;
  /** The request path without the query string. */
  path: string;
  /** The upstream URL without the query string. */
  upstreamUrl?: string;
  status: number;
  requestBytes: number;
  responseBytes: number;
  durationMs: number;
  /** Why the gateway refused the request (it never reached an upstream), in words. */
  refused?: string;
  /** The refusal's stable code: what to aggregate or rate-limit on. */
  reason?: RefusalCode;
  /**
   * A generation whose output limit the gateway changed: what it asked for (absent: none) and what
   * was forwarded (the policy's limits.maxOutputTokens).
   */
  outputTokens?: { asked?: number; sent?: number };
}

export interface GatewayExchange {
  /** 1, 2, ...: the order in which the gateway forwarded generation requests. */
  seq: number;
  routeId: string;
  api: string;
  /** The request path (route included) without the query string. */
  path: string;
  /** The request in neutral form, exactly as forwarded. */
  request: ModelRequest;
  /** The status the client got: the upstream's, 502 (unreachable) or 499 (client left before any). */
  status: number;
  /** What the response body said (also for error statuses); absent when no body could be read. */
  reply?: ModelReply;
  /** Why there is no reply, when there is none. */
  replyProblem?: string;
  relay: RelayEnd;
  /** When the gateway answered 502 itself (unreachable, unrelayable): what it told the client. */
  gatewayError?: string;
  /** Milliseconds since the gateway started (monotonic) when the request was forwarded. */
  startedMs: number;
  headersMs?: number;
  durationMs: number;
  /** Only with the gateway's `recordExchanges` option: the bytes, bounded. */
  recording?: ExchangeRecording;
}

export interface ExchangeRecording {
  request: {
    method: string;
    /** Path and query string as the sandbox sent them. */
    target: string;
    /** The sandbox's headers that were relayed (no credential header, no hop-by-hop one). */
    headers: Record<string, string | string[]>;
    /** The body as forwarded (re-serialised JSON), cut at the cap. */
    body: Buffer;
    bodyTruncated: boolean;
  };
  response?: {
    status: number;
    /** The headers the sandbox got. */
    headers: Record<string, string | string[]>;
    /** The body as it streamed, each chunk with its time since the request was forwarded. */
    chunks: Array<{ atMs: number; data: Buffer }>;
    bodyTruncated: boolean;
  };
}

export interface RecordLimits {
  /** Request body bytes kept per exchange (default 8 MiB). */
  maxRequestBytes?: number;
  /** Response body bytes kept per exchange (default 16 MiB). */
  maxResponseBytes?: number;
}
