// Connection-specific headers (RFC 9110 §7.6.1) and the usual non-standard ones: a proxy or
// gateway never forwards them to the next hop.
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
