// A plain-HTTP proxy request (`GET http://host/path`), after its checks passed: forwarded to
// the address the proxy checked, without hop-by-hop and proxy headers, the answer streamed back.
import http from "node:http";
import type net from "node:net";
import { connectionTokens, HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { framedRequestHeaders, http1RequestHasBody, sendRequestBody } from "../http/request-framing.js";
import { refuseResponse } from "./http-refusal.js";

interface PlainRequestTarget {
  url: URL;
  host: string;
  port: number;
  address: string;
  connectTimeoutMs: number;
  track(socket: net.Socket): void;
  onUpstreamError(reason: string): void;
}

/** Resolves once the upstream request and its socket are closed (the connection's next request waits for it). */
export function forwardPlainRequest(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  target: PlainRequestTarget,
): Promise<void> {
  const { url, port } = target;
  const hasBody = http1RequestHasBody(req.headers);
  const headers = framedRequestHeaders(withoutHopByHop(req.headers, { host: url.host }), hasBody);
  const upstream = http.request({
    host: target.address,
    port,
    method: req.method,
    path: `${url.pathname}${url.search}`,
    headers,
    setHost: false,
    agent: false,
    timeout: target.connectTimeoutMs,
  });
  upstream.once("socket", (s: net.Socket) => target.track(s));
  upstream.once("timeout", () => upstream.destroy(new Error("connect timeout")));
  upstream.on("response", (upstreamRes) => {
    // The answer is the upstream's (a server the sandbox may pick under an allowed wildcard): a
    // status or header Node's client takes and writeHead refuses (000, control bytes) would throw
    // out of this listener and end the controller, every run in it. No reason phrase is relayed.
    const status = upstreamRes.statusCode ?? 0;
    const unrelayable = (why: string) => {
      upstreamRes.resume();
      upstream.destroy();
      const reason = `${target.host}:${port} answered with ${why}, which the proxy does not relay`;
      target.onUpstreamError(reason);
      refuseResponse(res, 502, reason);
    };
    if (status < 200 || status > 599) return unrelayable(`status ${status}`);
    try {
      res.writeHead(status, withoutHopByHop(upstreamRes.headers));
    } catch (error) {
      return unrelayable(`a header HTTP cannot carry (${(error as NodeJS.ErrnoException).code ?? "invalid"})`);
    }
    upstream.setTimeout(0);
    upstreamRes.pipe(res);
    upstreamRes.on("error", () => res.destroy());
  });
  upstream.on("error", (error: NodeJS.ErrnoException) => {
    if (res.headersSent) return res.destroy();
    const reason = `could not reach ${target.host}:${port} (${error.code ?? error.message})`;
    target.onUpstreamError(reason);
    refuseResponse(res, 502, reason);
  });
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  sendRequestBody(req, upstream, headers, hasBody);
  return new Promise((resolve) =>
    upstream.once("close", () => {
      // The request closes before its socket does (without an agent the socket is ended after it).
      const socket = upstream.socket;
      if (!socket || socket.destroyed) resolve();
      else socket.once("close", () => resolve());
    }),
  );
}

/** Headers minus hop-by-hop ones and those the Connection header names; `set` replaces entries. */
function withoutHopByHop(
  incoming: http.IncomingHttpHeaders,
  set: Record<string, string> = {},
): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP_HEADERS.has(name) || dropped.has(name) || name in set) continue;
    out[name] = value;
  }
  return { ...out, ...set };
}
