// Which headers cross the gateway. Towards the upstream: none that carry credentials (the
// sandbox holds a placeholder at best; the route's real ones are added here), none that pick
// another account of the key's owner, no hop-by-hop ones. Towards the sandbox: no hop-by-hop
// ones and no cookies.
import type http from "node:http";
import { connectionTokens, HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { isCredentialHeader } from "./credential-headers.js";

// "expect": Node's server already answered any "100-continue"; the body is read before forwarding.
const NOT_FORWARDED = new Set([...HOP_BY_HOP_HEADERS, "expect", "host", "content-length"]);

/** Headers that choose which organisation/project of the key's owner pays and holds the data. */
const ACCOUNT_HEADERS = new Set(["openai-organization", "openai-project", "anthropic-workspace-id"]);

/**
 * The headers the sandbox sent that may reach the upstream: the gateway's own record of the
 * request uses these too, so no credential ever appears in a record.
 */
export function relayableRequestHeaders(incoming: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const dropped = connectionTokens(incoming);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || NOT_FORWARDED.has(name) || dropped.has(name)) continue;
    if (isCredentialHeader(name) || ACCOUNT_HEADERS.has(name)) continue;
    // Decoding a compressed reply would need a copy; ask for the plain one (providers honour it).
    if (name === "accept-encoding") continue;
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
  const out: http.OutgoingHttpHeaders = { ...relayable, host, "accept-encoding": "identity" };
  if (bodyBytes > 0) out["content-length"] = bodyBytes;
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
