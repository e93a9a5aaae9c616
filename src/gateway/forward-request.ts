// Forwarding and relay: one admitted, inspected request goes to the route's upstream with the
// real credentials, and the response streams back to the sandbox chunk by chunk, as it arrives,
// while a tap (reply parser, recorder) sees the same chunks.
import http from "node:http";
import https from "node:https";
import { performance } from "node:perf_hooks";
import { errorBody, sendJson } from "./gateway-refusal.js";
import type { CompiledRoute } from "./gateway-routes.js";
import { downstreamResponseHeaders, upstreamRequestHeaders } from "./relay-headers.js";

export interface ResponseTap {
  onHeaders(status: number, headers: http.IncomingHttpHeaders): void;
  onChunk(chunk: Buffer): void;
}

/** How the upstream side ended, as far as a budget cares: it answered, it could not, or the client left first. */
export type UpstreamSettlement = { answered: number } | { unreachable: string } | { clientLeft: true };

interface ForwardInput {
  res: http.ServerResponse;
  route: CompiledRoute;
  target: URL;
  method: string;
  /** The sandbox's headers that may be relayed (see relay-headers.ts). */
  relayable: Record<string, string | string[]>;
  body: Buffer;
  agents: { http: http.Agent; https: https.Agent };
  tap?: ResponseTap;
  /** Called once, as soon as it is known. */
  onUpstreamSettled?(settlement: UpstreamSettlement): void;
}

export type RelayEnd =
  /** The upstream's whole response reached the client. */
  | "complete"
  /** The client went away first. */
  | "client-gone"
  /** The upstream's response broke off. */
  | "upstream-aborted"
  /** No response from the upstream (the client got a 502). */
  | "upstream-unreachable";

export interface ForwardResult {
  /** What the client got: the upstream's status, 502 (unreachable) or 499 (the client left before any). */
  status: number;
  relay: RelayEnd;
  /** Milliseconds from forwarding to the upstream's response headers. */
  headersMs?: number;
  durationMs: number;
  responseBytes: number;
  /** The upstream URL without the query string. */
  upstreamUrl: string;
}

/** What one exchange has seen so far. */
interface RelayState {
  status: number;
  headersMs?: number;
  responseBytes: number;
  upstreamEnded: boolean;
  failure?: "upstream-aborted" | "upstream-unreachable";
  clientLeft: boolean;
  settle(settlement: UpstreamSettlement): void;
}

/** Forwards and relays; resolves once the exchange is over (the client's response closed). */
export function forwardRequest(input: ForwardInput): Promise<ForwardResult> {
  const { res, route, target, method, body } = input;
  const started = performance.now();
  const upstreamUrl = `${target.origin}${target.pathname}`;
  let settled = false;
  const state: RelayState = {
    status: 0,
    responseBytes: 0,
    upstreamEnded: false,
    clientLeft: false,
    settle: (settlement) => {
      if (settled) return;
      settled = true;
      input.onUpstreamSettled?.(settlement);
    },
  };

  const isHttps = target.protocol === "https:";
  const upstreamReq = (isHttps ? https : http).request({
    protocol: target.protocol,
    hostname: target.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: target.port || (isHttps ? 443 : 80),
    path: `${target.pathname}${target.search}`,
    method,
    headers: upstreamRequestHeaders(input.relayable, target.host, route.headerEntries, body.length),
    agent: isHttps ? input.agents.https : input.agents.http,
  });
  upstreamReq.on("response", (upstreamRes) => {
    state.headersMs = elapsed(started);
    relayResponse(upstreamRes, res, state, input.tap);
  });
  upstreamReq.on("error", (error: NodeJS.ErrnoException) => {
    if (state.clientLeft) return; // our own abort
    const reason = error.code ?? error.message;
    state.settle({ unreachable: reason });
    if (res.headersSent) {
      state.failure ??= "upstream-aborted";
      res.destroy();
      return;
    }
    state.failure ??= "upstream-unreachable";
    state.status = 502;
    const message = `sandbox-run model gateway could not reach the upstream for route ${route.id} (${upstreamUrl}): ${reason}`;
    sendJson(res, 502, errorBody(message));
  });
  upstreamReq.end(body);

  return new Promise((resolve) => {
    res.once("close", () => {
      if (!res.writableFinished) {
        state.clientLeft = !state.failure;
        if (state.clientLeft) state.settle({ clientLeft: true });
        upstreamReq.destroy();
      }
      const relay: RelayEnd =
        state.failure ?? (state.upstreamEnded && res.writableFinished ? "complete" : "client-gone");
      resolve({
        // 499: the client went away before the upstream answered.
        status: state.status || (res.headersSent ? res.statusCode : 499),
        relay,
        ...(state.headersMs !== undefined ? { headersMs: state.headersMs } : {}),
        durationMs: elapsed(started),
        responseBytes: state.responseBytes,
        upstreamUrl,
      });
    });
  });
}

/** Streams the upstream's response to the client as it arrives; the tap sees the same chunks. */
function relayResponse(
  upstreamRes: http.IncomingMessage,
  res: http.ServerResponse,
  state: RelayState,
  tap: ResponseTap | undefined,
): void {
  state.status = upstreamRes.statusCode ?? 502;
  state.settle({ answered: state.status });
  tap?.onHeaders(state.status, upstreamRes.headers);
  upstreamRes.on("data", (chunk: Buffer) => {
    state.responseBytes += chunk.length;
    tap?.onChunk(chunk);
  });
  upstreamRes.on("end", () => {
    state.upstreamEnded = true;
  });
  const broke = () => {
    state.failure ??= "upstream-aborted";
    res.destroy();
  };
  upstreamRes.on("error", broke);
  upstreamRes.on("aborted", broke);
  res.writeHead(state.status, upstreamRes.statusMessage, downstreamResponseHeaders(upstreamRes.headers));
  res.flushHeaders();
  upstreamRes.pipe(res);
}

export function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
