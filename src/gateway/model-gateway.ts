// The host-side model gateway. The sandbox has no network; its only way out is this HTTP
// server on a unix socket that is bind-mounted into the container (an in-container launcher
// forwards 127.0.0.1:18080 to it). Pi inside talks to `http://127.0.0.1:18080/<routeId>/...`
// with a placeholder key. Each request passes, in order:
//   admission   the route, the method and the path (admission.ts);
//   body        read whole, up to a cap (request-body.ts);
//   inspection  the api codec's view: the run's model only, no provider-side tools, no unknown
//               beta flags; a generation must read as a conversation (request-inspection.ts);
//   budget      a generation counts when it is forwarded (generation-budget.ts);
//   forwarding  real credentials added on the host, the response relayed chunk by chunk while
//               the codec's reply parser reads along (forward-request.ts, exchange-tap.ts).
// Every request becomes a GatewayRequestRecord (refusals with a stable code), every forwarded
// generation a GatewayExchange (gateway-records.ts).
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { usageError } from "../errors.js";
import { listenOnUnixSocket, unixSocketCloser } from "../http/unix-socket-server.js";
import { admitRequest } from "./admission.js";
import { ExchangeTap } from "./exchange-tap.js";
import { elapsed, forwardRequest } from "./forward-request.js";
import { type BudgetTicket, GenerationBudget } from "./generation-budget.js";
import type { GatewayExchange, GatewayRequestRecord, RecordLimits } from "./gateway-records.js";
import { type Refusal, errorBody, refusal, safePath, sendJson } from "./gateway-refusal.js";
import { type GatewayRoute, compileRoutes } from "./gateway-routes.js";
import { GATEWAY_LIVENESS_PATH, holdLiveness } from "./liveness.js";
import { relayableRequestHeaders } from "./relay-headers.js";
import { DEFAULT_MAX_REQUEST_BYTES, readRequestBody } from "./request-body.js";
import { type ProviderFeatures, inspectRequest } from "./request-inspection.js";

export type { GatewayExchange, GatewayRequestRecord, RecordLimits } from "./gateway-records.js";
export type { GatewayRoute } from "./gateway-routes.js";
export type { RefusalCode } from "./gateway-refusal.js";
export { GATEWAY_LIVENESS_PATH } from "./liveness.js";
export { CREDENTIAL_HEADER_NAMES } from "./credential-headers.js";

export interface ModelGatewayOptions {
  socketPath: string;
  /** The run's routes (one per model the run may use; today one). */
  routes: GatewayRoute[];
  /** Provider-side features the policy allows by name; everything else of the kind is refused. */
  providerFeatures?: ProviderFeatures;
  /** Largest request body in bytes (default 32 MiB); a larger one is answered 413 and refused. */
  maxRequestBytes?: number;
  /** Every request, forwarded or refused; never contains secrets. */
  onRequest?(record: GatewayRequestRecord): void;
  /** Every forwarded generation request, once its response has ended. */
  onExchange?(exchange: GatewayExchange): void;
  /** Keep each exchange's bytes (bounded) in `GatewayExchange.recording`, for run records and replay. */
  recordExchanges?: RecordLimits;
  /**
   * At most this many model responses for the run. A generation request counts when it is
   * forwarded and is given back only when the upstream answers with a non-2xx status or cannot be
   * reached; one past the budget is refused with 429 before it reaches the upstream, and
   * onBudgetExceeded is called. Counted here, on the host, so code in the sandbox that calls the
   * gateway directly (not through Pi) cannot spend past a turn budget.
   */
  maxGenerations?: number;
  onBudgetExceeded?(attempted: number): void;
}

export interface ModelGateway {
  readonly socketPath: string;
  close(): Promise<void>;
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
  const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  const budget = new GenerationBudget(options.maxGenerations);
  const gatewayStarted = performance.now();
  const sockets = new Set<Socket>();
  // Default TLS settings: the system CA store plus NODE_EXTRA_CA_CERTS; verification stays on.
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  let closing = false;
  let generations = 0;

  const observe = <T>(callback: ((value: T) => void) | undefined, value: T) => {
    try {
      callback?.(value);
    } catch {
      // A throwing observer must not take the gateway down.
    }
  };
  const report = (record: GatewayRequestRecord) => observe(options.onRequest, record);

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const started = performance.now();
    const method = req.method ?? "";
    const rawUrl = req.url ?? "";
    let requestBytes = 0;
    req.on("data", (chunk: Buffer) => {
      requestBytes += chunk.length;
    });
    const refuse = (r: Refusal, routeId?: string) => {
      // Drain what is left of the body (so the answer can be read), but not without end.
      const close = drainBounded(req, maxRequestBytes);
      res.once("close", () =>
        report({
          ...(routeId !== undefined ? { routeId } : {}),
          method,
          path: safePath(rawUrl),
          status: r.status,
          requestBytes,
          responseBytes: 0,
          durationMs: elapsed(started),
          refused: r.detail,
          reason: r.code,
        }),
      );
      sendJson(
        res,
        r.status,
        errorBody(`sandbox-run model gateway refused ${method} ${safePath(rawUrl)}: ${r.detail}`),
        close,
      );
    };

    if (safePath(rawUrl) === GATEWAY_LIVENESS_PATH) {
      if (method !== "GET") return refuse(refusal(403, "liveness-method", "the liveness endpoint only answers GET"));
      if (closing) return refuse(refusal(503, "closing", "the gateway is closing"));
      holdLiveness(req, res, () =>
        report({
          method,
          path: GATEWAY_LIVENESS_PATH,
          status: 200,
          requestBytes,
          responseBytes: 0,
          durationMs: elapsed(started),
        }),
      );
      return;
    }

    const admission = admitRequest(routes, method, rawUrl);
    if (!admission.ok) return refuse(admission, admission.routeId);
    const { route } = admission;
    const read = await readRequestBody(req, maxRequestBytes);
    if (!read.ok && read.problem === "too-large") {
      return refuse(refusal(413, "body-too-large", `the body is larger than ${maxRequestBytes} bytes`), route.id);
    }
    if (!read.ok) {
      res.destroy();
      return report({
        routeId: route.id,
        method,
        path: safePath(rawUrl),
        status: 499,
        requestBytes,
        responseBytes: 0,
        durationMs: elapsed(started),
      });
    }
    const inspection = inspectRequest(admission, method, read.body, req.headers, options.providerFeatures);
    if (!inspection.ok) return refuse(inspection, route.id);

    let ticket: BudgetTicket | undefined;
    if (admission.generation) {
      ticket = budget.take();
      if (!ticket) {
        observe(options.onBudgetExceeded, budget.spent + 1);
        return refuse(
          refusal(429, "turn-budget", `the run's budget of ${budget.limit} model responses is spent`),
          route.id,
        );
      }
    }
    const exchange =
      admission.generation && options.onExchange && inspection.request
        ? { seq: ++generations, request: inspection.request }
        : undefined;
    const tap = exchange ? new ExchangeTap(route.codec, options.recordExchanges) : undefined;
    const relayable = relayableRequestHeaders(req.headers);
    const startedMs = elapsed(gatewayStarted);
    const result = await forwardRequest({
      res,
      route,
      target: admission.target,
      method,
      relayable,
      body: inspection.body,
      agents,
      tap,
      onUpstreamSettled: (settlement) => {
        // No output was produced: the upstream turned the request down or never got it.
        const turnedDown = "answered" in settlement && (settlement.answered < 200 || settlement.answered > 299);
        if (turnedDown || "unreachable" in settlement) ticket?.refund();
      },
    });
    report({
      routeId: route.id,
      method,
      path: safePath(rawUrl),
      upstreamUrl: result.upstreamUrl,
      status: result.status,
      requestBytes,
      responseBytes: result.responseBytes,
      durationMs: elapsed(started),
    });
    if (!exchange || !tap) return;
    const seen = tap.finish();
    const record = options.recordExchanges;
    observe(options.onExchange, {
      seq: exchange.seq,
      routeId: route.id,
      api: route.api,
      path: safePath(rawUrl),
      request: exchange.request,
      status: result.status,
      ...(seen.reply ? { reply: seen.reply } : {}),
      ...(seen.replyProblem ? { replyProblem: seen.replyProblem } : {}),
      relay: result.relay,
      startedMs,
      ...(result.headersMs !== undefined ? { headersMs: result.headersMs } : {}),
      durationMs: result.durationMs,
      ...(record
        ? {
            recording: {
              request: {
                method,
                target: rawUrl,
                headers: relayable,
                body: inspection.body.subarray(0, record.maxRequestBytes ?? DEFAULT_MAX_RECORDED_REQUEST_BYTES),
                bodyTruncated: inspection.body.length > (record.maxRequestBytes ?? DEFAULT_MAX_RECORDED_REQUEST_BYTES),
              },
              ...(seen.response ? { response: seen.response } : {}),
            },
          }
        : {}),
    });
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
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
      reason: "tunnel",
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
      agents.http.destroy();
      agents.https.destroy();
    }),
  };
}

const DEFAULT_MAX_RECORDED_REQUEST_BYTES = 8 * 1024 * 1024;

/**
 * Reads and drops the rest of a refused request's body; past `limit` more bytes the connection
 * is cut. Returns whether the connection should close after the answer (the body was not read to
 * its end, so it cannot carry another request).
 */
function drainBounded(req: http.IncomingMessage, limit: number): boolean {
  if (req.complete) return false;
  let drained = 0;
  req.on("data", (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > limit) req.socket.destroy();
  });
  req.resume();
  return true;
}
