// Test-only: lets the integration tests point a run's egress proxy at servers on loopback (a
// git server, a registry) that play the part of public hosts. No policy field, option, CLI flag
// or environment variable reaches this; only code running in the controller's own process can
// set it, and nothing in sandbox-run does. Unset, every run uses the real resolver, the real
// address guard, the real ports and the host's normal trust.
import type { AddressGuard } from "./address-guard.js";
import type { Resolver } from "./egress-proxy.js";
import type { RunCa } from "./run-ca.js";

export interface EgressTestHooks {
  resolve?: Resolver;
  guard?: AddressGuard;
  upstreamPort?: (host: string, port: number) => number;
  /** Extra roots for upstream certificates (the test servers' CA). */
  upstreamCa?: string[];
  /** Sees each run's CA (to check its key never reaches the sandbox). */
  onRunCa?: (ca: RunCa) => void;
}

let hooks: EgressTestHooks | undefined;

/** Installs hooks for the runs that start until the returned function is called. */
export function setEgressTestHooks(value: EgressTestHooks): () => void {
  hooks = value;
  return () => {
    if (hooks === value) hooks = undefined;
  };
}

export function egressTestHooks(): EgressTestHooks | undefined {
  return hooks;
}
