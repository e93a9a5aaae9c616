// The routes a gateway serves, checked once when it starts: the first path segment names the
// route; each route is one upstream, one Pi api and the one model the run may use.
import { usageError } from "../errors.js";
import { HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { credentialForms, type Replacement } from "../util/scrubber.js";
import { isSupportedGatewayApi, RESERVED_ROUTE_ID, SUPPORTED_GATEWAY_APIS } from "./api-paths.js";
import { type ApiCodec, codecFor } from "./apis/api-codec.js";

export interface GatewayRoute {
  /** First path segment, [a-z0-9_-]+. */
  id: string;
  /** e.g. "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1". */
  upstreamBaseUrl: string;
  /** Pi api name: "openai-completions" | "openai-responses" | "anthropic-messages" | ... */
  api: string;
  /** The run's model id as the upstream sees it: a request naming any other is refused. */
  model: string;
  /** Real credential headers, added on the host. */
  headers: Record<string, string>;
}

export interface CompiledRoute extends GatewayRoute {
  base: URL;
  /** Base URL without trailing slashes, for concatenation. */
  baseText: string;
  /** Lower-cased credential headers to set. */
  headerEntries: Array<[string, string]>;
  /** What the route's replies lose before they reach the sandbox: every value it adds, in every form. */
  scrub: Replacement[];
  codec: ApiCodec;
}

const ROUTE_ID_RE = /^[a-z0-9_-]+$/;
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

export function compileRoutes(routes: readonly GatewayRoute[]): Map<string, CompiledRoute> {
  const compiled = new Map<string, CompiledRoute>();
  for (const route of routes) {
    if (!ROUTE_ID_RE.test(route.id) || route.id === RESERVED_ROUTE_ID) {
      throw usageError(
        `Invalid gateway route id ${JSON.stringify(route.id)}`,
        `Use lower-case letters, digits, "-" and "_" only (and not ${RESERVED_ROUTE_ID}).`,
      );
    }
    if (compiled.has(route.id)) {
      throw usageError(`Duplicate gateway route id ${JSON.stringify(route.id)}`, "Give every route a distinct id.");
    }
    const codec = isSupportedGatewayApi(route.api) ? codecFor(route.api) : undefined;
    if (!codec) {
      throw usageError(
        `Gateway route ${route.id}: unsupported api ${JSON.stringify(route.api)}`,
        `Use one of: ${SUPPORTED_GATEWAY_APIS.join(", ")}.`,
      );
    }
    if (typeof route.model !== "string" || route.model === "") {
      throw usageError(`Gateway route ${route.id}: no model`, "Every route carries the one model the run may use.");
    }
    compiled.set(route.id, {
      ...route,
      base: upstreamBase(route),
      baseText: route.upstreamBaseUrl.replace(/\/+$/, ""),
      headerEntries: headerEntries(route),
      scrub: credentialForms(Object.values(route.headers)),
      codec,
    });
  }
  return compiled;
}

function upstreamBase(route: GatewayRoute): URL {
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
  return base;
}

function headerEntries(route: GatewayRoute): Array<[string, string]> {
  const entries: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(route.headers)) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME_RE.test(lower) || HOP_BY_HOP_HEADERS.has(lower) || lower === "expect" || lower === "host") {
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
    entries.push([lower, value]);
  }
  return entries;
}
