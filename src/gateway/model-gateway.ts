// The host-side model gateway. The sandbox has no network; its only way out is this HTTP
// server on a unix socket that is bind-mounted into the container (an in-container launcher
// forwards 127.0.0.1:18080 to it). Pi inside talks to `http://127.0.0.1:18080/<routeId>/...`
// with a placeholder key; the gateway checks that the request is a model API call for that
// route, strips every credential the container sent, adds the real ones and streams the
// exchange to the upstream provider and back, chunk by chunk.
//
// `GET /__sandbox-run/alive` is a liveness channel: the launcher holds it open for the whole
// run, so the host notices the container going away (onLivenessClosed) and the container
// notices the host going away (EOF).
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { listenOnUnixSocket, unixSocketCloser } from "../http/unix-socket-server.js";
import { usageError } from "../errors.js";
import {
  SUPPORTED_GATEWAY_APIS,
  describeAllowedRequests,
  isGenerationRequest,
  isAllowedModelRequest,
  isSupportedGatewayApi,
} from "./api-paths.js";

export interface GatewayRoute {
  /** First path segment, [a-z0-9_-]+. */
  id: string;
  /** e.g. "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1". */
  upstreamBaseUrl: string;
  /** Pi api name: "openai-completions" | "openai-responses" | "anthropic-messages" | ... */
  api: string;
  /** Real credential headers, added on the host. */
  headers: Record<string, string>;
}

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
  /** Why the gateway refused the request (it never reached an upstream). */
  refused?: string;
}

export interface ModelGatewayOptions {
  socketPath: string;
  routes: GatewayRoute[];
  /** Every request, forwarded or refused; never contains secrets. */
  onRequest?(record: GatewayRequestRecord): void;
  onLivenessClosed?(): void;
  /**
   * At most this many model responses for the run (requests that ask the model for output and
   * get a 2xx; failed ones may be retried). One more is refused with 429 before it reaches the
   * upstream, and onBudgetExceeded is called. Counted here, on the host, so code in the sandbox
   * that calls the gateway directly (not through Pi) cannot spend past a turn budget.
   */
  maxGenerations?: number;
  onBudgetExceeded?(attempted: number): void;
}

export interface ModelGateway {
  readonly socketPath: string;
  close(): Promise<void>;
}

/** The path the in-container launcher holds open for the whole run. */
export const GATEWAY_LIVENESS_PATH = "/__sandbox-run/alive";
const RESERVED_ROUTE_ID = "__sandbox-run";
const ROUTE_ID_RE = /^[a-z0-9_-]+$/;

/** Headers that carry credentials; whatever the container sends under these names is dropped. */
export const CREDENTIAL_HEADER_NAMES: readonly string[] = Object.freeze([
  "authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "cf-aig-authorization",
  "cookie",
]);

// Never forwarded: hop-by-hop headers, and "expect" (Node's server already answered any
// "100-continue"; the body is streamed right away).
const HOP_BY_HOP = new Set([...HOP_BY_HOP_HEADERS, "expect"]);

interface CompiledRoute extends GatewayRoute {
  base: URL;
  /** Base URL without trailing slashes, for concatenation. */
  baseText: string;
  /** Lower-cased credential header names to set. */
  headerEntries: Array<[string, string]>;
}

export async function startModelGateway(options: ModelGatewayOptions): Promise<ModelGateway> {
  const socketPath = options.socketPath;
  if (!socketPath || !path.isAbsolute(socketPath)) {
    throw usageError(
      `Model gateway socket path must be absolute, got ${JSON.stringify(socketPath)}`,
      "Pass a path inside a private directory created with fs.mkdtemp.",
    );
  }
  const routes = compileRoutes(options.routes);

  const sockets = new Set<Socket>();
  const httpAgent = new http.Agent({ keepAlive: true });
  // Default TLS settings: the system CA store plus NODE_EXTRA_CA_CERTS; verification stays on.
  const httpsAgent = new https.Agent({ keepAlive: true });
  let closing = false;
  // Generation requests that got a 2xx, and those still waiting for the upstream's answer.
  let generated = 0;
  let generating = 0;

  const report = (record: GatewayRequestRecord) => {
    try {
      options.onRequest?.(record);
    } catch {
      // A throwing observer must not take the gateway down.
    }
  };

  const server = http.createServer((req, res) => {
    const started = performance.now();
    const method = req.method ?? "";
    const rawUrl = req.url ?? "";
    const queryIndex = rawUrl.indexOf("?");
    const pathname = queryIndex < 0 ? rawUrl : rawUrl.slice(0, queryIndex);
    const query = queryIndex < 0 ? "" : rawUrl.slice(queryIndex);
    let requestBytes = 0;
    req.on("data", (chunk: Buffer) => {
      requestBytes += chunk.length;
    });

    const refuse = (status: number, reason: string, routeId?: string) => {
      req.resume(); // drain any body so the connection stays usable
      const body = errorBody(`sandbox-run model gateway refused ${method} ${safePath(pathname)}: ${reason}`);
      res.once("close", () =>
        report({
          ...(routeId !== undefined ? { routeId } : {}),
          method,
          path: safePath(pathname),
          status,
          requestBytes,
          responseBytes: 0,
          durationMs: elapsed(started),
          refused: reason,
        }),
      );
      sendJson(res, status, body);
    };

    if (pathname === GATEWAY_LIVENESS_PATH) {
      if (method !== "GET") return refuse(403, "the liveness endpoint only answers GET");
      if (closing) return refuse(503, "the gateway is closing");
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
      res.flushHeaders();
      req.socket.setTimeout(0);
      res.once("close", () => {
        report({
          method,
          path: GATEWAY_LIVENESS_PATH,
          status: 200,
          requestBytes,
          responseBytes: 0,
          durationMs: elapsed(started),
        });
        if (!closing) {
          try {
            options.onLivenessClosed?.();
          } catch {
            // ignore observer errors
          }
        }
      });
      return;
    }

    if (!rawUrl.startsWith("/") || rawUrl.startsWith("//")) {
      return refuse(403, "only origin-form request targets (/<route>/<path>) are accepted, not absolute URIs");
    }
    const secondSlash = pathname.indexOf("/", 1);
    const routeId = secondSlash < 0 ? pathname.slice(1) : pathname.slice(1, secondSlash);
    const rest = secondSlash < 0 ? "" : pathname.slice(secondSlash);
    const route = Object.hasOwn(routes, routeId) ? routes[routeId] : undefined;
    if (!route) {
      return refuse(403, `unknown route ${JSON.stringify(routeId.slice(0, 64))}`);
    }
    if (!isAllowedModelRequest(route.api, method, rest)) {
      return refuse(
        403,
        `not a model API request for ${route.api} (allowed: ${describeAllowedRequests(route.api)})`,
        route.id,
      );
    }

    const target = new URL(`${route.baseText}${rest}${query}`);
    if (target.origin !== route.base.origin) {
      return refuse(403, "the request would leave the route's upstream origin", route.id);
    }
    const generation = isGenerationRequest(route.api, method, rest);
    const budget = options.maxGenerations;
    if (generation && budget !== undefined && generated + generating >= budget) {
      try {
        options.onBudgetExceeded?.(generated + generating + 1);
      } catch {
        // ignore observer errors
      }
      return refuse(429, `the run's budget of ${budget} model responses is spent`, route.id);
    }
    // Settled once: when the upstream's status is known, or when the request fails without one.
    let counting = generation;
    if (counting) generating++;
    const settle = (ok: boolean) => {
      if (!counting) return;
      counting = false;
      generating--;
      if (ok) generated++;
    };
    const upstreamUrl = `${target.origin}${target.pathname}`;
    let responseBytes = 0;
    let status = 0;
    res.once("close", () =>
      report({
        routeId: route.id,
        method,
        path: pathname,
        upstreamUrl,
        // 499: the client went away before the upstream answered.
        status: status || (res.headersSent ? res.statusCode : 499),
        requestBytes,
        responseBytes,
        durationMs: elapsed(started),
      }),
    );

    const isHttps = target.protocol === "https:";
    const upstreamReq = (isHttps ? https : http).request({
      protocol: target.protocol,
      hostname: target.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: target.port || (isHttps ? 443 : 80),
      path: `${target.pathname}${target.search}`,
      method,
      headers: upstreamRequestHeaders(req.headers, target.host, route.headerEntries),
      agent: isHttps ? httpsAgent : httpAgent,
    });

    upstreamReq.on("response", (upstreamRes) => {
      status = upstreamRes.statusCode ?? 502;
      settle(status >= 200 && status < 300);
      upstreamRes.on("data", (chunk: Buffer) => {
        responseBytes += chunk.length;
      });
      upstreamRes.on("error", () => res.destroy());
      upstreamRes.on("aborted", () => res.destroy());
      res.writeHead(status, upstreamRes.statusMessage, downstreamResponseHeaders(upstreamRes.headers));
      res.flushHeaders();
      upstreamRes.pipe(res);
    });
    upstreamReq.on("error", (error: NodeJS.ErrnoException) => {
      settle(false);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      status = 502;
      const reason = error.code ? `${error.code}` : error.message;
      sendJson(
        res,
        502,
        errorBody(
          `sandbox-run model gateway could not reach the upstream for route ${route.id} (${upstreamUrl}): ${reason}`,
        ),
      );
    });
    // A request destroyed before any answer (the client left) emits no "error": settle here.
    upstreamReq.on("close", () => settle(false));
    req.on("error", () => upstreamReq.destroy());
    res.on("close", () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.pipe(upstreamReq);
  });

  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  // CONNECT tunnels and protocol upgrades are never model API calls.
  const refuseRaw = (req: http.IncomingMessage, socket: Socket, reason: string) => {
    const body = errorBody(`sandbox-run model gateway refused ${req.method ?? ""}: ${reason}`);
    socket.on("error", () => {});
    socket.end(
      `HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
    report({
      method: req.method ?? "",
      path: safePath(req.url ?? ""),
      status: 403,
      requestBytes: 0,
      responseBytes: 0,
      durationMs: 0,
      refused: reason,
    });
  };
  server.on("connect", (req: http.IncomingMessage, socket: Socket) =>
    refuseRaw(req, socket, "CONNECT tunnels are not allowed"),
  );
  server.on("upgrade", (req: http.IncomingMessage, socket: Socket) =>
    refuseRaw(req, socket, "protocol upgrades are not allowed"),
  );

  await listenOnUnixSocket(server, socketPath, "model gateway");

  return {
    socketPath,
    close: unixSocketCloser(server, sockets, socketPath, () => {
      closing = true;
      httpAgent.destroy();
      httpsAgent.destroy();
    }),
  };
}

function compileRoutes(routes: GatewayRoute[]): Record<string, CompiledRoute> {
  const compiled: Record<string, CompiledRoute> = Object.create(null) as Record<string, CompiledRoute>;
  for (const route of routes) {
    if (!ROUTE_ID_RE.test(route.id) || route.id === RESERVED_ROUTE_ID) {
      throw usageError(
        `Invalid gateway route id ${JSON.stringify(route.id)}`,
        `Use lower-case letters, digits, "-" and "_" only (and not ${RESERVED_ROUTE_ID}).`,
      );
    }
    if (Object.hasOwn(compiled, route.id)) {
      throw usageError(`Duplicate gateway route id ${JSON.stringify(route.id)}`, "Give every route a distinct id.");
    }
    let base: URL;
    try {
      base = new URL(route.upstreamBaseUrl);
    } catch {
      throw usageError(
        `Gateway route ${route.id}: upstreamBaseUrl ${JSON.stringify(route.upstreamBaseUrl)} is not a URL`,
        'Use an absolute http(s) URL such as "https://api.openai.com/v1".',
      );
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw usageError(
        `Gateway route ${route.id}: upstreamBaseUrl must be http or https, got ${base.protocol}`,
        'Use an absolute http(s) URL such as "https://api.openai.com/v1".',
      );
    }
    if (base.username || base.password || base.search || base.hash) {
      throw usageError(
        `Gateway route ${route.id}: upstreamBaseUrl must not contain credentials, a query or a fragment`,
        "Put credentials in the route's headers instead.",
      );
    }
    if (!isSupportedGatewayApi(route.api)) {
      throw usageError(
        `Gateway route ${route.id}: unsupported api ${JSON.stringify(route.api)}`,
        `Use one of: ${SUPPORTED_GATEWAY_APIS.join(", ")}.`,
      );
    }
    const headerEntries: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(route.headers)) {
      const lower = name.toLowerCase();
      if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(lower) || HOP_BY_HOP.has(lower) || lower === "host") {
        throw usageError(
          `Gateway route ${route.id}: header name ${JSON.stringify(name)} cannot be set`,
          "Remove that header.",
        );
      }
      if (/[\r\n\0]/.test(value)) {
        throw usageError(
          `Gateway route ${route.id}: header ${name} contains a line break`,
          "Check the credential value.",
        );
      }
      headerEntries.push([lower, value]);
    }
    compiled[route.id] = {
      ...route,
      base,
      baseText: route.upstreamBaseUrl.replace(/\/+$/, ""),
      headerEntries,
    };
  }
  return compiled;
}

function connectionTokens(headers: http.IncomingHttpHeaders): Set<string> {
  const tokens = new Set<string>();
  const connection = headers.connection;
  for (const value of Array.isArray(connection) ? connection : connection ? [connection] : []) {
    for (const token of value.split(",")) {
      const trimmed = token.trim().toLowerCase();
      if (trimmed) tokens.add(trimmed);
    }
  }
  return tokens;
}

function upstreamRequestHeaders(
  incoming: http.IncomingHttpHeaders,
  host: string,
  credentials: Array<[string, string]>,
): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const credentialNames = new Set(credentials.map(([name]) => name));
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    if (HOP_BY_HOP.has(name) || dropped.has(name) || name === "host") continue;
    if (CREDENTIAL_HEADER_NAMES.includes(name) || credentialNames.has(name)) continue;
    out[name] = value;
  }
  out.host = host;
  for (const [name, value] of credentials) out[name] = value;
  return out;
}

function downstreamResponseHeaders(incoming: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    if (HOP_BY_HOP.has(name) || dropped.has(name) || name === "set-cookie") continue;
    out[name] = value;
  }
  return out;
}

/** An error body both the OpenAI and Anthropic SDKs surface (`error.message`). */
function errorBody(message: string): string {
  return JSON.stringify({ type: "error", error: { type: "sandbox_run_gateway_error", message } });
}

function sendJson(res: http.ServerResponse, status: number, body: string): void {
  if (res.destroyed || res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

/** Request targets are reported without their query string (it could carry a key). */
function safePath(target: string): string {
  const queryIndex = target.indexOf("?");
  const withoutQuery = queryIndex < 0 ? target : target.slice(0, queryIndex);
  return withoutQuery.length > 512 ? `${withoutQuery.slice(0, 512)}…` : withoutQuery;
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
