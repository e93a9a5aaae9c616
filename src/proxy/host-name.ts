// One canonical spelling per host, computed once where a name enters the proxy (a CONNECT
// target, a request URL, a TLS SNI, a Host header), so the allow-list, the resolver, the
// secrets' host checks and the events all judge the same string. Two spellings of one
// destination must never get two verdicts:
//   Example.COM.          -> example.com        (lower case, one trailing dot dropped)
//   [0:0:0:0:0:0:0:1]     -> ::1                (IPv6 in RFC 5952 form, no brackets)
//   0x7f.0.0.1, 2130706433, 0177.0.0.1          -> refused: getaddrinfo would read them as
//                                                  127.0.0.1, so they are IP literals in
//                                                  disguise, never names a pattern may match
// Names also need non-empty labels of at most 63 characters, 253 characters in all, and a last
// label that starts with a letter (no top-level domain is numeric).
import net from "node:net";
import { ipv6ToGroups } from "./address-guard.js";

export type CanonicalHost =
  | { kind: "name" | "ipv4" | "ipv6"; host: string; problem?: undefined }
  | { kind?: undefined; host?: undefined; problem: string };

const MAX_NAME = 253;
const LABEL = /^[a-z0-9-]{1,63}$/;
/** A label inet_aton reads as a number: decimal, octal (leading 0) or hex (0x). */
const NUMERIC_LABEL = /^(0x[0-9a-f]*|[0-9]+)$/;

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

/** Eight 16-bit groups in RFC 5952 form: lower-case hex, the longest run of 2+ zero groups as `::`. */
export function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/**
 * Why an allow-list or secrets entry is not acceptable, or undefined. Entries are exact names
 * (registry.npmjs.org), canonical IPv4 addresses (exact only), or `*.` followed by a name of at
 * least two labels. A wildcard whose last label is numeric (`*.0.0.1`) is refused: it can only
 * ever match IP literals, since no real domain ends in a number.
 */
export function hostPatternProblem(pattern: string, options: { wildcard: boolean }): string | undefined {
  const shape = "must be a host name like registry.npmjs.org or a pattern like *.npmjs.org";
  const wildcard = pattern.startsWith("*.");
  if (wildcard && !options.wildcard) return "must be an exact host name (no *. patterns)";
  const body = wildcard ? pattern.slice(2) : pattern;
  if (body.endsWith(".") || body.startsWith("[") || body.includes(":")) return shape;
  const labels = body.toLowerCase().split(".");
  if (wildcard && NUMERIC_LABEL.test(labels[labels.length - 1]!)) {
    return "is a wildcard over IP addresses (its last label is numeric): list hosts by name, or one address exactly";
  }
  const parsed = canonicalHost(body);
  if (parsed.problem !== undefined) return shape;
  if (labels.length < 2) {
    return wildcard
      ? "is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)"
      : shape;
  }
  return undefined;
}
