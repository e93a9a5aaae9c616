// Connection-specific headers (RFC 9110 §7.6.1), HTTP/1.1's upgrade to HTTP/2 (RFC 7540 §3.2.1)
// and the usual non-standard ones: a proxy or gateway never forwards them to the next hop (and
// Node's HTTP/2 refuses to send them).
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "http2-settings",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The header names a message's `Connection` header lists: hop-by-hop for this message only. */
export function connectionTokens(headers: { connection?: string | string[] }): Set<string> {
  const value = headers.connection;
  const list = Array.isArray(value) ? value : value ? [value] : [];
  return new Set(
    list
      .flatMap((v) => v.split(","))
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}
