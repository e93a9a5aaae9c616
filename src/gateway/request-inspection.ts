// Inspection: the body of an admitted request, read through the route's api codec. The codec
// refuses what the run does not allow (another model than the run's, provider-side tools such
// as MCP connectors or web fetch, beta flags outside Pi's own and the policy's); a generation
// request must also read as a conversation, or it is not relayed at all.
import type http from "node:http";
import type { ModelRequest, RequestPolicy } from "./apis/api-codec.js";
import type { Admitted } from "./admission.js";
import { type Refusal, refusal } from "./gateway-refusal.js";

/** What the policy allows beyond Pi's own requests (the model itself comes from the route). */
export type ProviderFeatures = Omit<RequestPolicy, "model">;

export type Inspection = { ok: true; body: Buffer; request?: ModelRequest } | ({ ok: false } & Refusal);

export function inspectRequest(
  admitted: Admitted,
  method: string,
  body: Buffer,
  headers: http.IncomingHttpHeaders,
  features: ProviderFeatures = {},
): Inspection {
  const { route, rest } = admitted;
  if (method === "GET") {
    return body.length === 0
      ? { ok: true, body }
      : { ok: false, ...refusal(400, "body-unreadable", "a GET request to a model API carries no body") };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, ...refusal(400, "body-unreadable", `the body is not JSON (${route.api} requests are)`) };
  }
  const reason = route.codec.refusal(rest, parsed, headers, { ...features, model: route.model });
  if (reason !== undefined) return { ok: false, ...refusal(403, "request-policy", reason) };
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
  return { ok: true, body: forwarded, request: conversation.request };
}
