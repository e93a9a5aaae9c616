// Why the gateway refuses a request: a short, stable code (what a rate limiter or a summary
// aggregates on) and a detail for people. Refused requests never reach an upstream.
import type http from "node:http";

export type RefusalCode =
  /** The first path segment names no route. */
  | "unknown-route"
  /** Not one of the method + path pairs the route's api uses. */
  | "not-model-api"
  /** An absolute-form target (`GET http://host/...`) or `//...`. */
  | "absolute-target"
  /** The joined URL would leave the route's upstream origin. */
  | "leaves-origin"
  /** CONNECT or a protocol upgrade. */
  | "tunnel"
  /** The body is larger than the gateway's cap. */
  | "body-too-large"
  /** A body that is not the JSON the api sends (or a body on a GET). */
  | "body-unreadable"
  /** The api codec refused it: another model, a provider-side tool, an unknown beta flag, ... */
  | "request-policy"
  /** The run's budget of model responses is spent. */
  | "turn-budget"
  /** The run has stopped (a limit, an invalid result, a timeout): nothing more is forwarded. */
  | "run-stopped"
  /** The liveness endpoint only answers GET. */
  | "liveness-method"
  /** The gateway is closing. */
  | "closing"
  /** The run's gateway holds as many requests, liveness requests or body bytes as it may (gateway-capacity.ts). */
  | "busy";

export interface Refusal {
  status: number;
  code: RefusalCode;
  detail: string;
}

export function refusal(status: number, code: RefusalCode, detail: string): Refusal {
  return { status, code, detail };
}

/** An error body both the OpenAI and Anthropic SDKs surface (`error.message`). */
export function errorBody(message: string): string {
  return JSON.stringify({ type: "error", error: { type: "sandbox_run_gateway_error", message } });
}

export function sendJson(res: http.ServerResponse, status: number, body: string, close = false): void {
  if (res.destroyed || res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...(close ? { connection: "close" } : {}),
  });
  res.end(body);
}

/** Request targets are reported without their query string (it could carry a key). */
export function safePath(target: string): string {
  const queryIndex = target.indexOf("?");
  const withoutQuery = queryIndex < 0 ? target : target.slice(0, queryIndex);
  return withoutQuery.length > 512 ? `${withoutQuery.slice(0, 512)}…` : withoutQuery;
}
