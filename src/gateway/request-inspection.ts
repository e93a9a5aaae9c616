// Inspection: the body of an admitted request, read through the route's api codec. The codec
// refuses what the run does not allow (another model than the run's, provider-side tools such
// as MCP connectors or web fetch, beta flags outside Pi's own and the policy's); a generation
// request must also read as a conversation, or it is not relayed at all.
import type http from "node:http";
import { type JsonShapeLimits, jsonShapeProblem } from "../util/json-shape.js";
import type { ModelRequest, RequestPolicy } from "./apis/api-codec.js";
import type { JsonRecord } from "./apis/codec-support.js";
import { capGeneration } from "./apis/generation-limits.js";
import { type Refusal, refusal } from "./gateway-refusal.js";
import type { AdmittedRequest } from "./request-admission.js";

/** What the policy allows beyond Pi's own requests (the model itself comes from the route). */
export type ProviderFeatures = Omit<RequestPolicy, "model">;

/** What one generation may cost and how much JSON the gateway parses for it. */
export interface InspectionLimits {
  /** Output tokens one response may use (the policy's limits.maxOutputTokens); absent: not capped. */
  maxOutputTokens?: number;
  /** The JSON's shape: values and nesting, checked before it is parsed. */
  json?: JsonShapeLimits;
}

type Inspection =
  | {
      ok: true;
      body: Buffer;
      request?: ModelRequest;
      /** A generation's output limit: what the request asked for and what was forwarded. */
      outputTokens?: { asked?: number; sent?: number };
    }
  | ({ ok: false } & Refusal);

export function inspectRequest(
  admitted: AdmittedRequest,
  method: string,
  body: Buffer,
  headers: http.IncomingHttpHeaders,
  features: ProviderFeatures = {},
  limits: InspectionLimits = {},
): Inspection {
  const { route, rest } = admitted;
  if (method === "GET") {
    return body.length === 0
      ? { ok: true, body }
      : { ok: false, ...refusal(400, "body-unreadable", "a GET request to a model API carries no body") };
  }
  // JSON.parse of 32 MiB of `[{},{},...]` takes ~1 GB and 17 s of this process: count first.
  const shape = jsonShapeProblem(body, limits.json);
  if (shape) return { ok: false, ...refusal(413, "body-too-large", shape) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, ...refusal(400, "body-unreadable", `the body is not JSON (${route.api} requests are)`) };
  }
  const reason = route.codec.refusal(rest, parsed, headers, { ...features, model: route.model });
  if (reason !== undefined) return { ok: false, ...refusal(403, "request-policy", reason) };
  // One response per generation, of at most the run's output cap (lowered in place before it is serialised).
  const cap = admitted.generation ? capGeneration(route.api, parsed as JsonRecord, limits.maxOutputTokens) : undefined;
  if (cap && !cap.ok) return { ok: false, ...refusal(403, "request-policy", cap.reason) };
  // What was checked is what is sent: re-serialised, so that a duplicate key or another parser
  // difference between this host and the provider cannot carry a second model or tool past the check.
  const forwarded = Buffer.from(JSON.stringify(parsed), "utf8");
  if (!admitted.generation) return { ok: true, body: forwarded };
  const conversation = route.codec.parseRequest(rest, parsed);
  if (!conversation.ok) {
    return {
      ok: false,
      ...refusal(
        400,
        "body-unreadable",
        `the request cannot be read as a ${route.api} conversation: ${conversation.reason}`,
      ),
    };
  }
  const outputTokens = cap?.ok && (cap.asked !== undefined || cap.sent !== undefined) ? cap : undefined;
  return {
    ok: true,
    body: forwarded,
    request: conversation.request,
    ...(outputTokens ? { outputTokens: { asked: outputTokens.asked, sent: outputTokens.sent } } : {}),
  };
}
