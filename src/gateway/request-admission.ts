// A request's admission: which route a request target names, and whether the method and path are a model
// API call of that route's api. Pure; nothing is read from the body yet.
import {
  describeAllowedQueries,
  describeAllowedRequests,
  isAllowedModelRequest,
  isAllowedQuery,
  isGenerationRequest,
} from "./api-paths.js";
import { type Refusal, refusal } from "./gateway-refusal.js";
import type { CompiledRoute } from "./gateway-routes.js";

export interface AdmittedRequest {
  ok: true;
  route: CompiledRoute;
  /** The path below the route's base URL, without the query string (what codecs see). */
  rest: string;
  /** The query string with its "?", or "". */
  query: string;
  target: URL;
  /** Asks the model for output: counted by the turn budget, inspected as a conversation. */
  generation: boolean;
}

type RequestAdmission = AdmittedRequest | ({ ok: false; routeId?: string } & Refusal);

export function admitRequest(
  routes: ReadonlyMap<string, CompiledRoute>,
  method: string,
  rawUrl: string,
): RequestAdmission {
  if (!rawUrl.startsWith("/") || rawUrl.startsWith("//")) {
    return {
      ok: false,
      ...refusal(
        403,
        "absolute-target",
        "only origin-form request targets (/<route>/<path>) are accepted, not absolute URIs",
      ),
    };
  }
  const queryIndex = rawUrl.indexOf("?");
  const pathname = queryIndex < 0 ? rawUrl : rawUrl.slice(0, queryIndex);
  const query = queryIndex < 0 ? "" : rawUrl.slice(queryIndex);
  const secondSlash = pathname.indexOf("/", 1);
  const routeId = secondSlash < 0 ? pathname.slice(1) : pathname.slice(1, secondSlash);
  const rest = secondSlash < 0 ? "" : pathname.slice(secondSlash);
  const route = routes.get(routeId);
  if (!route)
    return { ok: false, ...refusal(403, "unknown-route", `unknown route ${JSON.stringify(routeId.slice(0, 64))}`) };
  const notModelApi = (detail: string): RequestAdmission => ({
    ok: false,
    routeId: route.id,
    ...refusal(403, "not-model-api", detail),
  });
  if (!isAllowedModelRequest(route.api, method, rest))
    return notModelApi(`not a model API request for ${route.api} (allowed: ${describeAllowedRequests(route.api)})`);
  if (!isAllowedQuery(route.api, method, rest, query)) {
    const allowed = describeAllowedQueries(route.api, method, rest);
    return notModelApi(`not a query string Pi sends with ${method} ${rest} for ${route.api} (allowed: ${allowed})`);
  }
  const target = new URL(`${route.baseText}${rest}${query}`);
  if (target.origin !== route.base.origin) {
    return {
      ok: false,
      routeId: route.id,
      ...refusal(403, "leaves-origin", "the request would leave the route's upstream origin"),
    };
  }
  return { ok: true, route, rest, query, target, generation: isGenerationRequest(route.api, method, rest) };
}
