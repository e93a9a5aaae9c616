// What an allow-list or secrets entry may be, and which hosts it matches: the rules the policy's
// schema checks entries with and the egress proxy's filter applies, in one place both import
// (a leaf: the policy knows nothing of the proxy, the proxy nothing of policies):
//   registry.npmjs.org  -> exactly that host
//   *.npmjs.org         -> any host below npmjs.org (a.npmjs.org, a.b.npmjs.org), not npmjs.org itself
//   93.184.215.14       -> exactly that address (IP literals only ever match exactly)
// Hosts and entries are compared in their canonical spelling (host-name.ts).
import { canonicalHost, NUMERIC_LABEL } from "./host-name.js";
import { classifyIpv4, ipv4ToInt } from "./ip-address.js";

/**
 * Why an allow-list or secrets entry is not acceptable, or undefined. Entries are exact names
 * (registry.npmjs.org), canonical IPv4 addresses (exact only), or `*.` followed by a name of at
 * least two labels. A wildcard whose last label is numeric (`*.0.0.1`) is refused: it can only
 * ever match IP literals, since no real domain ends in a number.
 */
export function hostPatternProblem(pattern: string, options: { wildcard: boolean }): string | undefined {
  const shape = "must be a host name like registry.npmjs.org or a pattern like *.npmjs.org";
  // What a policy author writes by habit, each said plainly (review, session 30: one message for all).
  if (pattern !== pattern.trim()) return "has spaces around it";
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(pattern))
    return `must be a host name without a scheme (write ${pattern.replace(/^[^:]+:\/\//, "").split(/[/:]/)[0]})`;
  if (pattern.includes("/")) return `must be a host name without a path (write ${pattern.split("/")[0]})`;
  if (/^[^:]+:\d+$/.test(pattern))
    return `must be a host name without a port (write ${pattern.split(":")[0]}; the egress proxy takes ports 80 and 443)`;
  if (pattern.startsWith("[") || (pattern.match(/:/g)?.length ?? 0) > 1)
    return "is an IPv6 address, which allow-lists do not take: list the host by name";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range is the point
  if (/[^\x00-\x7f]/.test(pattern))
    return "must be written in ASCII: give an international name in its xn-- (punycode) form";
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
  // The egress proxy never connects to such an address (proxy/address-guard.ts): listed, it would
  // load and then refuse every request of the run.
  const refusedRange = parsed.kind === "ipv4" ? classifyIpv4(ipv4ToInt(parsed.host)!) : undefined;
  if (refusedRange) {
    return `is an address in a ${refusedRange} range, which the egress proxy never connects to (sandboxes do not reach the host, its LAN or metadata services): list a public host`;
  }
  if (labels.length < 2) {
    return wildcard
      ? "is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)"
      : shape;
  }
  return undefined;
}

/** Whether `host` is matched by one allow-list entry. */
export function matchesDomain(host: string, pattern: string): boolean {
  const h = canonicalHost(host);
  if (h.problem !== undefined) return false;
  const wildcard = pattern.startsWith("*.");
  const p = canonicalHost(wildcard ? pattern.slice(2) : pattern);
  if (p.problem !== undefined) return false;
  // A wildcard names a DNS subtree; an address is not in one, whatever it looks like.
  if (wildcard) return h.kind === "name" && p.kind === "name" && h.host.endsWith(`.${p.host}`);
  return h.host === p.host;
}
