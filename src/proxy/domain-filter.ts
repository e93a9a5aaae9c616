// Turns a policy's allowedDomains into the `filter(host, port)` callback the egress proxy
// asks about every connection. The proxy itself holds no policy; this is the only place
// that knows what an allow-list entry means:
//   registry.npmjs.org  -> exactly that host
//   *.npmjs.org         -> any host below npmjs.org (a.npmjs.org, a.b.npmjs.org), not npmjs.org itself
// An empty list allows nothing. Only the web ports are allowed by default: an allowed name
// is not a licence to reach every service that host runs.

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

/** Lower-cases a host name and drops one trailing dot ("Example.COM." -> "example.com"). */
export function normalizeHost(host: string): string {
  const lower = host.trim().toLowerCase();
  return lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

/** Whether `host` is matched by one allow-list entry. */
export function matchesDomain(host: string, pattern: string): boolean {
  const h = normalizeHost(host);
  const p = normalizeHost(pattern);
  if (p.startsWith("*.")) {
    const suffix = p.slice(1); // ".npmjs.org"
    return h.length > suffix.length && h.endsWith(suffix);
  }
  return h === p;
}

export function createDomainFilter(patterns: readonly string[], options: DomainFilterOptions = {}): EgressFilter {
  const ports = options.ports ?? DEFAULT_EGRESS_PORTS;
  return (host, port) => {
    const h = normalizeHost(host);
    // Host names as the client wrote them: anything that is not a plain DNS name (user info,
    // percent-escapes, spaces) is refused rather than interpreted.
    if (!/^[a-z0-9.-]+$/.test(h) && !/^\[?[0-9a-f:.]+\]?$/.test(h)) {
      return { allowed: false, reason: `"${host.slice(0, 100)}" is not a host name` };
    }
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
