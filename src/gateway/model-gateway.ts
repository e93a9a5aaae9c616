// The host-side model gateway. The sandbox has no network; its only way out is this HTTP
// server on a unix socket that is bind-mounted into the container (an in-container launcher
// forwards 127.0.0.1:18080 to it). Pi inside talks to `http://127.0.0.1:18080/<routeId>/...`
// with a placeholder key. Each request passes, in order:
//   admission   the route, the method and the path (request-admission.ts);
//   body        read whole, up to a cap, into the run's byte pool (request-body.ts);
//   inspection  the JSON's shape, then the api codec's view: the run's model only, no provider-side
//               tools, no unknown beta flags; a generation asks for one response of at most the
//               output cap and must read as a conversation (request-inspection.ts);
//   budget      a generation counts when it is forwarded (generation-budget.ts);
//   forwarding  real credentials added on the host, the response relayed chunk by chunk while
//               the codec's reply parser reads along (forward-request.ts, exchange-tap.ts).
// request-handler.ts runs those steps for one request; this file owns the server.
// Every request becomes a GatewayRequestRecord (refusals with a stable code), every forwarded
// generation a GatewayExchange (gateway-records.ts). What the gateway holds at once (connections,
// requests in flight, liveness requests, body bytes) is bounded per run (gateway-capacity.ts).
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { usageError } from "../errors.js";
import { listenOnUnixSocket, unixSocketCloser } from "../http/unix-socket-server.js";
import { DEFAULT_JSON_SHAPE_LIMITS, type JsonShapeLimits } from "../util/json-shape.js";
import { DEFAULT_GATEWAY_CAPACITY, GatewayCapacity, type GatewayCapacityLimits } from "./gateway-capacity.js";
import type { GatewayExchange, GatewayRequestRecord, RecordLimits } from "./gateway-records.js";
import { errorBody, safePath } from "./gateway-refusal.js";
import { compileRoutes, type GatewayRoute } from "./gateway-routes.js";
import { GenerationBudget } from "./generation-budget.js";
import {
  DEFAULT_MAX_REFUSED_BYTES,
  DEFAULT_MAX_UNANSWERED_BYTES,
  DEFAULT_UNANSWERED_ALLOWANCE,
  RefusedBytes,
} from "./refused-bytes.js";
import { DEFAULT_MAX_REQUEST_BYTES } from "./request-body.js";
import { createRequestHandler } from "./request-handler.js";
import type { ProviderFeatures } from "./request-inspection.js";

export type { GatewayExchange, GatewayRequestRecord, RecordLimits } from "./gateway-records.js";
export type { GatewayRoute } from "./gateway-routes.js";

export interface ModelGatewayOptions {
  socketPath: string;
  /** The run's routes (one per model the run may use; today one). */
  routes: GatewayRoute[];
  /** Provider-side features the policy allows by name; everything else of the kind is refused. */
  providerFeatures?: ProviderFeatures;
  /** Largest request body in bytes (default 32 MiB); a larger one is answered 413 and refused. */
  maxRequestBytes?: number;
  /** What the gateway holds at once (default DEFAULT_GATEWAY_CAPACITY); past it: closed connections, 503/429. */
  capacity?: Partial<GatewayCapacityLimits>;
  /** How much JSON one body may make the host parse (default DEFAULT_JSON_SHAPE_LIMITS). */
  jsonShape?: JsonShapeLimits;
  /**
   * Output tokens one generation may ask for (the policy's limits.maxOutputTokens): a larger output
   * limit is lowered to it, a request without one gets it written in. Absent: not capped.
   */
  maxOutputTokens?: number;
  /** Every request, forwarded or refused; never contains secrets. */
  onRequest?(record: GatewayRequestRecord): void;
  /** Every forwarded generation request, once its response has ended. */
  onExchange?(exchange: GatewayExchange): void;
  /**
   * Awaited before a generation request is forwarded: the host's verdicts on the replies so far
   * (the invalid-result watch's, checked in a worker), which may stop the run first.
   */
  beforeGeneration?(): Promise<void>;
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
  /**
   * Bytes of bodies the gateway may read and then refuse for the run (default
   * DEFAULT_MAX_REFUSED_BYTES); onRefusalsExceeded is called once when they pass it.
   */
  maxRefusedBytes?: number;
  onRefusalsExceeded?(facts: { bytes: number; requests: number }): void;
  /**
   * Bytes of generation bodies the gateway may read and forward for the run that get no answer
   * with output (non-2xx, or the upstream unreachable; default DEFAULT_MAX_UNANSWERED_BYTES, plus
   * DEFAULT_UNANSWERED_ALLOWANCE times the bodies of the generations that were answered);
   * onUnansweredExceeded is called once when they pass it.
   */
  maxUnansweredBytes?: number;
  onUnansweredExceeded?(facts: { bytes: number; requests: number }): void;
}

/** Requests the gateway forwarded whose responses have not ended: the run is waiting on the model. */
export interface ModelWait {
  requests: number;
  /** The upstream of the oldest one (scheme, host and port only). */
  upstream: string;
  /** How long the oldest one has been open. */
  forMs: number;
}

export interface ModelGateway {
  readonly socketPath: string;
  /** What the run is waiting on the model for now, or undefined when no request is open. */
  waiting(): ModelWait | undefined;
  /** Forwards no more model requests (each is refused, naming `reason`): the run has stopped. */
  stopForwarding(reason: string): void;
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
  const sockets = new Set<Socket>();
  // Default TLS settings: the system CA store plus NODE_EXTRA_CA_CERTS; verification stays on.
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  let closing = false;
  let generations = 0;
  // Forwarded requests whose responses have not ended, oldest first.
  const open = new Set<{ upstream: string; since: number }>();

  const observe = <T>(callback: ((value: T) => void) | undefined, value: T) => {
    try {
      callback?.(value);
    } catch {
      // A throwing observer must not take the gateway down.
    }
  };
  const report = (record: GatewayRequestRecord) => observe(options.onRequest, record);
  const capacity = new GatewayCapacity({ ...DEFAULT_GATEWAY_CAPACITY, ...options.capacity });
  const budget = new GenerationBudget(options.maxGenerations);
  const refusedBytes = new RefusedBytes(options.maxRefusedBytes ?? DEFAULT_MAX_REFUSED_BYTES, (facts) =>
    observe(options.onRefusalsExceeded, facts),
  );
  const unansweredBytes = new RefusedBytes(options.maxUnansweredBytes ?? DEFAULT_MAX_UNANSWERED_BYTES, (facts) =>
    observe(options.onUnansweredExceeded, facts),
  );
  const handle = createRequestHandler({
    routes,
    maxRequestBytes: options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES,
    providerFeatures: options.providerFeatures,
    inspection: {
      json: options.jsonShape ?? DEFAULT_JSON_SHAPE_LIMITS,
      ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
    },
    capacity,
    budget,
    agents,
    recordExchanges: options.recordExchanges,
    startedAt: performance.now(),
    closing: () => closing,
    nextGeneration: () => ++generations,
    forwarding: (route) => {
      const entry = { upstream: originOf(route.upstreamBaseUrl), since: performance.now() };
      open.add(entry);
      return () => open.delete(entry);
    },
    report,
    exchange: options.onExchange ? (exchange) => observe(options.onExchange, exchange) : undefined,
    ...(options.beforeGeneration ? { beforeGeneration: options.beforeGeneration } : {}),
    budgetExceeded: (attempted) => observe(options.onBudgetExceeded, attempted),
    refused: (bytes) => refusedBytes.add(bytes),
    unanswered: (bytes) => unansweredBytes.add(bytes),
    answered: (bytes) => unansweredBytes.allow(DEFAULT_UNANSWERED_ALLOWANCE * bytes),
  });

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  // Past this, Node closes a new connection as it is accepted: one file descriptor for a moment.
  server.maxConnections = capacity.limits.maxConnections;
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
    stopForwarding: (reason) => budget.stop(reason),
    waiting: () => {
      const oldest = open.values().next().value;
      if (!oldest) return undefined;
      return { requests: open.size, upstream: oldest.upstream, forMs: performance.now() - oldest.since };
    },
    close: unixSocketCloser(server, sockets, socketPath, () => {
      closing = true;
      agents.http.destroy();
      agents.https.destroy();
    }),
  };
}

/** The scheme, host and port of an upstream URL: never its path or query, which may carry more than a name. */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "the upstream";
  }
}
