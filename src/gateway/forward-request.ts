// Forwarding and relay: one admitted, inspected request goes to the route's upstream with the
// real credentials, and the response streams back to the sandbox chunk by chunk, as it arrives,
// while a tap (reply parser, recorder) sees the upstream's own chunks. What goes to the sandbox is
// scrubbed of every credential value the route added (an upstream that quotes the key in an error,
// or echoes the request's headers, must not hand it over): headers and the streamed body, a
// compressed body decoded first. The tap reads the upstream's real bytes on the host side: the
// reply parser and the recorder (which scrubs what it writes) see what the upstream said.
import http from "node:http";
import https from "node:https";
import { performance } from "node:perf_hooks";
import type { Transform } from "node:stream";
import { codings, decoderFor, MAX_CODING_LAYERS } from "../util/content-codings.js";
import { ScrubStream, TextScrubber } from "../util/scrubber.js";
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
  /** When the gateway answered 502 itself: what it told the client (its own words, never the sandbox's). */
  gatewayError?: string;
}

/** What one exchange has seen so far. */
interface RelayState {
  status: number;
  headersMs?: number;
  responseBytes: number;
  upstreamEnded: boolean;
  failure?: "upstream-aborted" | "upstream-unreachable";
  /** The message of a 502 the gateway sent itself. */
  gatewayError?: string;
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
    relayResponse(upstreamRes, res, state, input.tap, route);
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
    state.gatewayError = message;
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
        ...(state.gatewayError !== undefined ? { gatewayError: state.gatewayError } : {}),
      });
    });
  });
}

/**
 * Streams the upstream's response to the client as it arrives, scrubbed of the route's credential
 * values; the tap sees what the sandbox gets.
 */
function relayResponse(
  upstreamRes: http.IncomingMessage,
  res: http.ServerResponse,
  state: RelayState,
  tap: ResponseTap | undefined,
  route: CompiledRoute,
): void {
  // The upstream is the caller's provider or a replay server reading a record: a status or header
  // writeHead refuses is answered 502 rather than thrown out of this listener (which would end the
  // controller), and its reason phrase, which could quote anything, is not relayed.
  const answerItself = (message: string) => {
    state.failure ??= "upstream-aborted";
    state.status = 502;
    upstreamRes.on("error", () => {});
    upstreamRes.destroy();
    state.gatewayError = message;
    sendJson(res, 502, errorBody(message));
  };
  const unrelayable = (why: string) =>
    answerItself(`sandbox-run model gateway: the upstream of route ${route.id} answered with ${why}`);
  const upstreamStatus = upstreamRes.statusCode ?? 0;
  if (upstreamStatus < 200 || upstreamStatus > 599) {
    state.settle({ unreachable: `status ${upstreamStatus}` });
    unrelayable(`status ${upstreamStatus}`);
    return;
  }
  state.status = upstreamStatus;
  state.settle({ answered: state.status });
  upstreamRes.on("data", (chunk: Buffer) => {
    state.responseBytes += chunk.length;
  });
  upstreamRes.on("end", () => {
    state.upstreamEnded = true;
  });
  // The gateway asks for identity; a body compressed anyway is decoded, so it can be scrubbed.
  const transfer = codings(upstreamRes.headers["transfer-encoding"]).filter((c) => c !== "chunked");
  const content = codings(upstreamRes.headers["content-encoding"]);
  const layers = [...transfer, ...content];
  const decoders = layers.length > MAX_CODING_LAYERS ? [null] : layers.reverse().map(decoderFor);
  if (decoders.includes(null) && (route.scrub.length > 0 || layers.length > MAX_CODING_LAYERS)) {
    // A coding nothing here can undo could hide the key: the sandbox gets none of it.
    tap?.onHeaders(state.status, upstreamRes.headers);
    answerItself(
      `sandbox-run model gateway: the upstream of route ${route.id} answered in a coding (${[...transfer, ...content].join(", ").slice(0, 80)}) that cannot be checked for credentials`,
    );
    return;
  }
  const broke = () => {
    state.failure ??= "upstream-aborted";
    res.destroy();
  };
  upstreamRes.on("error", broke);
  upstreamRes.on("aborted", broke);
  const headers = downstreamResponseHeaders(upstreamRes.headers);
  const writeHead = () => {
    try {
      res.writeHead(state.status, headers);
      return true;
    } catch (error) {
      unrelayable(`a header HTTP cannot carry (${(error as NodeJS.ErrnoException).code ?? "invalid"})`);
      return false;
    }
  };
  // The tap (the reply parser the result is confirmed from, and a record's copy) reads exactly
  // what the sandbox gets: scrubbed, Pi's next request echoes the scrubbed reply.
  if (route.scrub.length === 0) {
    tap?.onHeaders(state.status, upstreamRes.headers);
    upstreamRes.on("data", (chunk: Buffer) => tap?.onChunk(chunk));
    if (!writeHead()) return;
    res.flushHeaders();
    upstreamRes.pipe(res);
    return;
  }
  const scrubber = new TextScrubber(route.scrub);
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === "string") headers[name] = scrubber.latin1(value);
    else if (Array.isArray(value)) headers[name] = value.map((v) => scrubber.latin1(v));
  }
  // Scrubbing may change the length: the framing is left to HTTP (chunked).
  delete headers["content-length"];
  if (content.length > 0) delete headers["content-encoding"];
  if (!writeHead()) return;
  res.flushHeaders();
  let body: NodeJS.ReadableStream = upstreamRes;
  for (const decoder of decoders as Array<Transform | undefined>) {
    if (!decoder) continue;
    decoder.on("error", broke);
    body = body.pipe(decoder);
  }
  const scrubbed = body.pipe(new ScrubStream(route.scrub));
  tap?.onHeaders(state.status, headers as http.IncomingHttpHeaders);
  scrubbed.on("data", (chunk: Buffer) => tap?.onChunk(chunk));
  scrubbed.pipe(res);
}

export function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
