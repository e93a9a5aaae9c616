// Turns an allow-list (a policy's allowedDomains) into the `filter(host, port)` callback the
// egress proxy asks about every connection. The proxy itself holds no policy; what an entry
// matches is util/host-pattern.ts's rule, the one the policy's schema checks entries with.
// An empty list allows nothing. Only the web ports are allowed by default: an allowed name
// is not a licence to reach every service that host runs. Hosts are judged in their canonical
// spelling (util/host-name.ts); one that has none (empty labels, IP literals in disguise) is refused.
import { canonicalHost } from "../util/host-name.js";
import { matchesDomain } from "../util/host-pattern.js";

// replay/compare-record.ts (changed on another branch this round) still imports it from here.
export { matchesDomain };

interface FilterDecision {
  allowed: boolean;
  /** Why, in words a person reading the event log understands. */
  reason: string;
}

export type EgressFilter = (host: string, port: number) => FilterDecision;

interface DomainFilterOptions {
  /** Ports a connection may use; default 80 and 443. */
  ports?: readonly number[];
}

const DEFAULT_EGRESS_PORTS: readonly number[] = Object.freeze([80, 443]);

/** The canonical spelling of a host (see util/host-name.ts), or undefined when it has none. */
export function normalizeHost(host: string): string | undefined {
  return canonicalHost(host).host;
}

export function createDomainFilter(patterns: readonly string[], options: DomainFilterOptions = {}): EgressFilter {
  const ports = options.ports ?? DEFAULT_EGRESS_PORTS;
  return (host, port) => {
    const parsed = canonicalHost(host);
    if (parsed.problem !== undefined) return { allowed: false, reason: parsed.problem };
    const h = parsed.host;
    const match = patterns.find((p) => matchesDomain(h, p));
    if (!match) {
      return {
        allowed: false,
        reason: patterns.length === 0 ? "the allow-list is empty" : `${h} is not in the policy's allowedDomains`,
      };
    }
    if (!ports.includes(port)) {
      return { allowed: false, reason: `port ${port} is not allowed (only ${ports.join(", ")})` };
    }
    return { allowed: true, reason: `matches allowedDomains entry ${match}` };
  };
}
