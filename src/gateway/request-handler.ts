// One request through the gateway, in order: liveness, admission, body, inspection, budget,
// forwarding; then its records. model-gateway.ts owns the server; this owns a request.
import type http from "node:http";
import type https from "node:https";
import { performance } from "node:perf_hooks";
import type { ModelRequest } from "./apis/api-codec.js";
import { ExchangeTap } from "./exchange-tap.js";
import { elapsed, type ForwardResult, forwardRequest, type UpstreamSettlement } from "./forward-request.js";
import type { CapacityLease, GatewayCapacity } from "./gateway-capacity.js";
import type { GatewayExchange, GatewayRequestRecord, RecordLimits } from "./gateway-records.js";
import { errorBody, type Refusal, refusal, safePath, sendJson } from "./gateway-refusal.js";
import type { CompiledRoute } from "./gateway-routes.js";
import type { BudgetTicket, GenerationBudget } from "./generation-budget.js";
import { GATEWAY_LIVENESS_PATH, holdLiveness } from "./liveness.js";
import { relayableRequestHeaders } from "./relay-headers.js";
import { admitRequest } from "./request-admission.js";
import { readRequestBody } from "./request-body.js";
import { type InspectionLimits, inspectRequest, type ProviderFeatures } from "./request-inspection.js";

interface HandlerContext {
  routes: ReadonlyMap<string, CompiledRoute>;
  maxRequestBytes: number;
  providerFeatures?: ProviderFeatures;
  /** The output cap and the JSON shape limits requests are inspected with. */
  inspection: InspectionLimits;
  /** What the run's gateway may hold at once: requests, liveness requests, body bytes. */
  capacity: GatewayCapacity;
  budget: GenerationBudget;
  agents: { http: http.Agent; https: https.Agent };
  recordExchanges?: RecordLimits;
  /** performance.now() when the gateway started: exchanges are timed from it. */
  startedAt: number;
  closing(): boolean;
  /** The next generation's number (1, 2, ...). */
  nextGeneration(): number;
  report(record: GatewayRequestRecord): void;
  /** A request goes to the upstream now; the returned function is called once its response has ended. */
  forwarding(route: CompiledRoute): () => void;
  /** Undefined when nobody listens for exchanges (then no reply is parsed). */
  exchange?: (exchange: GatewayExchange) => void;
  budgetExceeded(attempted: number): void;
  /** Awaited before a generation is forwarded (ModelGatewayOptions.beforeGeneration). */
  beforeGeneration?(): Promise<void>;
  /** A request was refused after the gateway parsed its body of `bytes` (PARSED_THEN_REFUSED). */
  refused(bytes: number): void;
  /** A generation whose body of `bytes` was parsed and forwarded got no output (its turn refunded). */
  unanswered(bytes: number): void;
  /** A generation whose body of `bytes` was answered (2xx). */
  answered(bytes: number): void;
}

const DEFAULT_MAX_RECORDED_REQUEST_BYTES = 8 * 1024 * 1024;
/**
 * Refusals that come after the body was parsed: what they cost the host is the parse. A body over
 * the cap (413) is never parsed, and Pi may send one honestly (a very long conversation): it is
 * Pi's to report, not a reason to end the run.
 */
const PARSED_THEN_REFUSED: ReadonlySet<string> = new Set(["request-policy", "body-unreadable"]);

export function createRequestHandler(ctx: HandlerContext) {
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const started = performance.now();
    const method = req.method ?? "";
    const rawUrl = req.url ?? "";
    let requestBytes = 0;
    req.on("data", (chunk: Buffer) => {
      requestBytes += chunk.length;
    });
    const base = { method, path: safePath(rawUrl) };
    const refuse = (r: Refusal, routeId?: string) => {
      // Drain what is left of the body (so the answer can be read), but not without end.
      const close = drainBounded(req, ctx.maxRequestBytes);
      res.once("close", () => {
        if (PARSED_THEN_REFUSED.has(r.code)) ctx.refused(requestBytes);
        ctx.report({
          ...(routeId !== undefined ? { routeId } : {}),
          ...base,
          status: r.status,
          requestBytes,
          responseBytes: 0,
          durationMs: elapsed(started),
          refused: r.detail,
          reason: r.code,
        });
      });
      sendJson(
        res,
        r.status,
        errorBody(`sandbox-run model gateway refused ${method} ${base.path}: ${r.detail}`),
        close,
      );
    };

    const { limits } = ctx.capacity;
    if (base.path === GATEWAY_LIVENESS_PATH) {
      if (method !== "GET") return refuse(refusal(403, "liveness-method", "the liveness endpoint only answers GET"));
      if (ctx.closing()) return refuse(refusal(503, "closing", "the gateway is closing"));
      const held = ctx.capacity.liveness();
      if (!held) return refuse(refusal(429, "busy", `${limits.maxLiveness} liveness requests are held already`));
      holdLiveness(req, res, () => {
        held.release();
        ctx.report({ ...base, status: 200, requestBytes, responseBytes: 0, durationMs: elapsed(started) });
      });
      return;
    }

    const lease = ctx.capacity.request();
    if (!lease) return refuse(refusal(503, "busy", `${limits.maxRequests} requests of this run are in flight already`));
    res.once("close", () => lease.release());
    const admission = admitRequest(ctx.routes, method, rawUrl);
    if (!admission.ok) return refuse(admission, admission.routeId);
    const { route } = admission;
    // A stopped run's generations are refused before their bodies are read: what the sandbox
    // still sends while its container stops costs the host no parsing.
    if (admission.generation && ctx.budget.stopped !== undefined) {
      const detail = `the run has stopped (${ctx.budget.stopped}): no more model requests are forwarded`;
      return refuse(refusal(429, "run-stopped", detail), route.id);
    }
    const inspection = await readAndInspect(ctx, req, method, admission, lease);
    if (!inspection.ok && inspection.code === "aborted") {
      res.destroy();
      const durationMs = elapsed(started);
      return ctx.report({ routeId: route.id, ...base, status: 499, requestBytes, responseBytes: 0, durationMs });
    }
    if (!inspection.ok) return refuse(inspection, route.id);

    // The host's verdicts on the replies so far come first: the fifth invalid final result stops
    // the run before a sixth request goes out, whatever thread judged it (review, session 36).
    if (admission.generation && ctx.beforeGeneration) await ctx.beforeGeneration().catch(() => {});
    if (admission.generation && ctx.budget.stopped !== undefined) {
      const detail = `the run has stopped (${ctx.budget.stopped}): no more model requests are forwarded`;
      return refuse(refusal(429, "run-stopped", detail), route.id);
    }
    const ticket = admission.generation ? ctx.budget.take() : undefined;
    if (admission.generation && !ticket) {
      ctx.budgetExceeded(ctx.budget.spent + 1);
      const detail = `the run's budget of ${ctx.budget.limit} model responses is spent`;
      return refuse(refusal(429, "turn-budget", detail), route.id);
    }
    await forwardAndReport(ctx, { req, res, admitted: admission, body: inspection.body, ticket, started }, () => ({
      ...base,
      requestBytes,
      conversation: inspection.request,
      outputTokens: inspection.outputTokens,
    }));
  };
}

/** The body, read into the run's byte pool, then inspected; "aborted" when the client left first. */
async function readAndInspect(
  ctx: HandlerContext,
  req: http.IncomingMessage,
  method: string,
  admission: Extract<ReturnType<typeof admitRequest>, { ok: true }>,
  lease: CapacityLease,
): Promise<ReturnType<typeof inspectRequest> | { ok: false; code: "aborted" }> {
  const read = await readRequestBody(req, ctx.maxRequestBytes, lease);
  if (!read.ok && read.problem === "too-large")
    return { ok: false, ...refusal(413, "body-too-large", `the body is larger than ${ctx.maxRequestBytes} bytes`) };
  if (!read.ok && read.problem === "no-room") {
    const mib = Math.round(ctx.capacity.limits.maxBufferedBytes / 1048576);
    return {
      ok: false,
      ...refusal(503, "busy", `the bodies of this run's requests in flight fill the gateway's ${mib} MiB`),
    };
  }
  if (!read.ok) return { ok: false, code: "aborted" };
  return inspectRequest(admission, method, read.body, req.headers, ctx.providerFeatures, ctx.inspection);
}

interface CheckedRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  admitted: Extract<ReturnType<typeof admitRequest>, { ok: true }>;
  /** The body as checked, to forward. */
  body: Buffer;
  ticket?: BudgetTicket;
  started: number;
}

/** Forwards an admitted request, then reports it and, for a generation, its exchange. */
async function forwardAndReport(
  ctx: HandlerContext,
  { req, res, admitted, body, ticket, started }: CheckedRequest,
  facts: () => {
    method: string;
    path: string;
    requestBytes: number;
    conversation?: ModelRequest;
    outputTokens?: { asked?: number; sent?: number };
  },
): Promise<void> {
  const { route } = admitted;
  const { method, path, conversation, outputTokens } = facts();
  const request = admitted.generation && ctx.exchange ? conversation : undefined;
  const seq = request ? ctx.nextGeneration() : 0;
  const tap = request ? new ExchangeTap(route.codec, ctx.recordExchanges) : undefined;
  const relayable = relayableRequestHeaders(req.headers);
  const startedMs = elapsed(ctx.startedAt);
  const forwarded = ctx.forwarding(route);
  const result = await forwardRequest({
    res,
    route,
    target: admitted.target,
    method,
    relayable,
    body,
    agents: ctx.agents,
    tap,
    onUpstreamSettled: (settlement) => {
      if (!ticket) return;
      // What was forwarded, not what was read: JSON whitespace the gateway strips bought room (fix review 2, session 45).
      if (!nothingGenerated(settlement)) return ctx.answered(body.length);
      ticket.refund();
      ctx.unanswered(facts().requestBytes);
    },
  }).finally(forwarded);
  ctx.report({
    routeId: route.id,
    method,
    path,
    upstreamUrl: result.upstreamUrl,
    status: result.status,
    requestBytes: facts().requestBytes,
    responseBytes: result.responseBytes,
    durationMs: elapsed(started),
    // Only when the gateway changed the request's output limit (lowered it, or wrote one in).
    ...(outputTokens?.sent !== undefined && outputTokens.asked !== outputTokens.sent ? { outputTokens } : {}),
  });
  if (!request || !tap) return;
  const sent = { method, target: req.url ?? "", headers: relayable, body };
  ctx.exchange?.(exchangeOf(seq, route, path, request, result, tap, startedMs, sent, ctx.recordExchanges));
}

/** The upstream turned the request down (non-2xx) or never got it: no output was produced. */
function nothingGenerated(settlement: UpstreamSettlement): boolean {
  if ("unreachable" in settlement) return true;
  return "answered" in settlement && (settlement.answered < 200 || settlement.answered > 299);
}

function exchangeOf(
  seq: number,
  route: CompiledRoute,
  path: string,
  request: ModelRequest,
  result: ForwardResult,
  tap: ExchangeTap,
  startedMs: number,
  sent: { method: string; target: string; headers: Record<string, string | string[]>; body: Buffer },
  record: RecordLimits | undefined,
): GatewayExchange {
  const seen = tap.finish();
  const maxRequestBytes = record?.maxRequestBytes ?? DEFAULT_MAX_RECORDED_REQUEST_BYTES;
  return {
    seq,
    routeId: route.id,
    api: route.api,
    path,
    request,
    status: result.status,
    ...(seen.reply ? { reply: seen.reply } : {}),
    ...(seen.replyProblem ? { replyProblem: seen.replyProblem } : {}),
    relay: result.relay,
    ...(result.gatewayError !== undefined ? { gatewayError: result.gatewayError } : {}),
    startedMs,
    ...(result.headersMs !== undefined ? { headersMs: result.headersMs } : {}),
    durationMs: result.durationMs,
    ...(record
      ? {
          recording: {
            request: {
              ...sent,
              body: sent.body.subarray(0, maxRequestBytes),
              bodyTruncated: sent.body.length > maxRequestBytes,
            },
            ...(seen.response ? { response: seen.response } : {}),
          },
        }
      : {}),
  };
}

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
