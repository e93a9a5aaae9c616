// The shapes the egress proxy and its admission checks share.

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** `signal`: the lookup is no longer wanted (its client left, the proxy closed); one still queued is dropped. */
export type Resolver = (host: string, signal?: AbortSignal) => Promise<ResolvedAddress[]>;

export interface EgressDecision {
  /** allowed: the checks passed and a connection is being made; denied: a check refused it;
   *  failed: allowed, but the name did not resolve or the upstream could not be reached;
   *  injected: a secret's value replaced its placeholder in a request (once per tunnel and secret). */
  action: "allowed" | "denied" | "failed" | "injected";
  host: string;
  port: number;
  /** "CONNECT" for tunnels, the HTTP method for requests. */
  method: string;
  reason: string;
  /** The address connected to (allowed) or refused (denied by address). */
  address?: string;
  /** allowed CONNECT: TLS is terminated on the host because a secret may be sent to this host. */
  terminated?: boolean;
  /** The secret (by name, never its value) a request carried or received. */
  secret?: string;
}
