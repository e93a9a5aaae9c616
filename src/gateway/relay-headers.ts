// Which headers cross the gateway. Towards the upstream: only the ones Pi's own provider code
// sends (an allow-list), so none that carry credentials (the sandbox holds a placeholder at best;
// the route's real ones, and every models.json header, are added here), none that pick another
// account of the key's owner, and none that steer a provider-side proxy (Portkey's
// `x-portkey-custom-host`, Helicone's `helicone-target-url`, `x-forwarded-host`, a Cloudflare AI
// Gateway's cache key) to send the key elsewhere or serve another caller's data. Towards the
// sandbox: no hop-by-hop ones and no cookies.
import type http from "node:http";
import { connectionTokens, HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { isCredentialHeader } from "./credential-headers.js";

// "expect": Node's server already answered any "100-continue"; the body is read before forwarding.
const NOT_FORWARDED = new Set([...HOP_BY_HOP_HEADERS, "expect", "host", "content-length"]);

/**
 * The request headers Pi 1.6.0's providers set (@earendil-works/pi-ai's api/, utils/identity.js
 * and the SDKs it uses: OpenAI's and Anthropic's `x-stainless-*`, Google's `x-goog-api-client`),
 * lower-case. Whatever else the sandbox sends is dropped: a header Pi never sends is one the
 * sandbox chose, and the gateway does not know what a provider (or a proxy in front of one) does
 * with it. Values of the beta headers are checked by the route's codec.
 */
const PI_REQUEST_HEADERS = new Set([
  "accept",
  "accept-language",
  "content-type",
  "user-agent",
  "sec-fetch-mode",
  // Anthropic
  "anthropic-version",
  "anthropic-beta",
  "anthropic-dangerous-direct-browser-access",
  "x-app",
  // OpenAI and compatible servers
  "openai-beta",
  "openai-intent",
  "session-id",
  "x-client-request-id",
  "x-session-id",
  "x-session-affinity",
  // Google, Mistral
  "x-goog-api-client",
  "x-affinity",
  // Providers' identification and routing hints Pi sends (GitHub Copilot, OpenRouter, opencode)
  "copilot-integration-id",
  "copilot-vision-request",
  "editor-version",
  "editor-plugin-version",
  "x-initiator",
  "x-interaction-type",
  "x-github-api-version",
  "http-referer",
  "x-title",
  "x-openrouter-title",
  "x-openrouter-categories",
  "x-opencode-session",
  "x-opencode-client",
  "x-billing-invoke-origin",
]);

/** The SDKs' platform headers (`x-stainless-lang`, `-os`, `-retry-count`, ...). */
const PI_REQUEST_HEADER_PREFIXES = ["x-stainless-"];

function piSends(name: string): boolean {
  return PI_REQUEST_HEADERS.has(name) || PI_REQUEST_HEADER_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/**
 * The headers the sandbox sent that may reach the upstream: the gateway's own record of the
 * request uses these too, so no credential ever appears in a record.
 */
export function relayableRequestHeaders(incoming: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const dropped = connectionTokens(incoming);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || NOT_FORWARDED.has(name) || dropped.has(name)) continue;
    // Credentials and account headers are not on the list; the check stays as a second guard.
    // accept-encoding is not either: decoding a compressed reply would need a copy, so the
    // gateway asks for the plain one (providers honour it).
    if (!piSends(name) || isCredentialHeader(name)) continue;
    out[name] = value;
  }
  return out;
}

export function upstreamRequestHeaders(
  relayable: Record<string, string | string[]>,
  host: string,
  credentials: ReadonlyArray<[string, string]>,
  bodyBytes: number,
): http.OutgoingHttpHeaders {
  const { "content-type": _asSent, ...others } = relayable;
  const out: http.OutgoingHttpHeaders = { ...others, host, "accept-encoding": "identity" };
  // A body is JSON the gateway wrote itself (request-inspection.ts), and says so whatever the
  // sandbox said: sent as a form, it was read as one by a proxy in front of the provider, past
  // the checked JSON (review, session 45).
  if (bodyBytes > 0) {
    out["content-type"] = "application/json";
    out["content-length"] = bodyBytes;
  }
  for (const [name, value] of credentials) out[name] = value;
  return out;
}

export function downstreamResponseHeaders(incoming: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    if (HOP_BY_HOP_HEADERS.has(name) || dropped.has(name) || name === "set-cookie") continue;
    out[name] = value;
  }
  return out;
}
