// One canonical spelling per host, computed once where a name enters the egress proxy (a CONNECT
// target, a request URL, a TLS SNI, a Host header), so the allow-list, the resolver, the
// secrets' host checks and the events all judge the same string. A leaf: the policy's schema
// (host-pattern.ts) and the proxy spell hosts by the same rules without knowing each other. Two spellings of one
// destination must never get two verdicts:
//   Example.COM.          -> example.com        (lower case, one trailing dot dropped)
//   [0:0:0:0:0:0:0:1]     -> ::1                (IPv6 in RFC 5952 form, no brackets)
//   0x7f.0.0.1, 2130706433, 0177.0.0.1          -> refused: getaddrinfo would read them as
//                                                  127.0.0.1, so they are IP literals in
//                                                  disguise, never names a pattern may match
// Names also need non-empty labels of at most 63 characters, 253 characters in all, and a last
// label that starts with a letter (no top-level domain is numeric).
import net from "node:net";
import { formatIpv6, ipv6ToGroups } from "./ip-address.js";

type CanonicalHost =
  | { kind: "name" | "ipv4" | "ipv6"; host: string; problem?: undefined }
  | { kind?: undefined; host?: undefined; problem: string };

const MAX_NAME = 253;
const LABEL = /^[a-z0-9-]{1,63}$/;
/** A label inet_aton reads as a number: decimal, octal (leading 0) or hex (0x). */
export const NUMERIC_LABEL = /^(0x[0-9a-f]*|[0-9]+)$/;

export function canonicalHost(raw: string): CanonicalHost {
  const shown = JSON.stringify(raw.slice(0, 100));
  if (raw.startsWith("[") || raw.includes(":")) {
    const inner = raw.startsWith("[") && raw.endsWith("]") ? raw.slice(1, -1) : raw;
    // A zone id (fe80::1%eth0) names one of the host's own interfaces: never a destination.
    if (inner.includes("%") || !net.isIPv6(inner)) return { problem: `${shown} is not an IPv6 address` };
    return { kind: "ipv6", host: formatIpv6(ipv6ToGroups(inner)!) };
  }
  let name = raw.toLowerCase();
  if (name.endsWith(".")) name = name.slice(0, -1);
  if (name === "" || name.length > MAX_NAME) return { problem: `${shown} is not a host name (1 to 253 characters)` };
  const labels = name.split(".");
  if (!labels.every((l) => LABEL.test(l))) {
    return { problem: `${shown} is not a host name (labels of letters, digits and '-', none empty)` };
  }
  if (net.isIPv4(name)) return { kind: "ipv4", host: name };
  if (labels.every((l) => NUMERIC_LABEL.test(l))) {
    return { problem: `${shown} is an IP address in a non-standard spelling; write it as a.b.c.d` };
  }
  if (!/^[a-z]/.test(labels[labels.length - 1]!)) {
    return { problem: `${shown} is not a host name (its last label must start with a letter)` };
  }
  return { kind: "name", host: name };
}
