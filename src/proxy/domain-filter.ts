// Turns a policy's allowedDomains into the `filter(host, port)` callback the egress proxy
// asks about every connection. The proxy itself holds no policy; this is the only place
// that knows what an allow-list entry means:
//   registry.npmjs.org  -> exactly that host
//   *.npmjs.org         -> any host below npmjs.org (a.npmjs.org, a.b.npmjs.org), not npmjs.org itself
//   93.184.215.14       -> exactly that address (IP literals only ever match exactly)
// An empty list allows nothing. Only the web ports are allowed by default: an allowed name
// is not a licence to reach every service that host runs. Hosts are judged in their canonical
// spelling (host-name.ts); one that has none (empty labels, IP literals in disguise) is refused.
import { canonicalHost } from "./host-name.js";

export interface FilterDecision {
  allowed: boolean;
  /** Why, in words a person reading the event log understands. */
  reason: string;
}

export type EgressFilter = (host: string, port: number) => FilterDecision;

export interface DomainFilterOptions {
  /** Ports a connection may use; default 80 and 443. */
  ports?: readonly number[];
}

export const DEFAULT_EGRESS_PORTS: readonly number[] = Object.freeze([80, 443]);

/** The canonical spelling of a host (see host-name.ts), or undefined when it has none. */
export function normalizeHost(host: string): string | undefined {
  return canonicalHost(host).host;
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
