// The checks every egress connection passes, in order, before any byte goes out: spell the host
// canonically (util/host-name.ts), ask the policy's filter, resolve the name on the host, refuse when
// any address is in a refused range, and hand back the address that was checked (the only one
// the proxy will connect to). Every verdict is reported.
import net from "node:net";
import { canonicalHost } from "../util/host-name.js";
import type { AddressGuard } from "./address-guard.js";
import type { EgressFilter } from "./domain-filter.js";
import type { EgressDecision, ResolvedAddress, Resolver } from "./egress-types.js";

interface EgressAdmissionOptions {
  filter: EgressFilter;
  resolve: Resolver;
  guard: AddressGuard;
  /** Whether a CONNECT to this host and port is TLS-terminated (reported as such). */
  terminates(host: string, port: number): boolean;
  report(decision: EgressDecision): void;
}

type ConnectionVerdict = { host: string; address: string } | { status: number; reason: string };

export function createEgressAdmission(options: EgressAdmissionOptions) {
  /** `signal`: the client left or the proxy closed; a lookup still queued is dropped, nothing reported. */
  return async (rawHost: string, port: number, method: string, signal?: AbortSignal): Promise<ConnectionVerdict> => {
    // One spelling from here on: what the filter judges is what is resolved and reported.
    const canonical = canonicalHost(rawHost);
    if (canonical.problem !== undefined) {
      options.report({ action: "denied", host: rawHost.slice(0, 100), port, method, reason: canonical.problem });
      return { status: 400, reason: canonical.problem };
    }
    const host = canonical.host;
    const verdict = options.filter(host, port);
    if (!verdict.allowed) {
      options.report({ action: "denied", host, port, method, reason: verdict.reason });
      return { status: 403, reason: verdict.reason };
    }
    let addresses: ResolvedAddress[];
    if (canonical.kind !== "name") addresses = [{ address: host, family: net.isIP(host) }];
    else {
      try {
        addresses = await options.resolve(host, signal);
      } catch (error) {
        if (signal?.aborted) return { status: 502, reason: `${host}: the lookup was dropped (its client left)` };
        const reason = `${host} did not resolve (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
        options.report({ action: "failed", host, port, method, reason });
        return { status: 502, reason };
      }
    }
    if (addresses.length === 0) {
      options.report({ action: "failed", host, port, method, reason: `${host} has no addresses` });
      return { status: 502, reason: `${host} has no addresses` };
    }
    // Any refused address refuses the name: an allowed public name has no business resolving
    // into the host's networks, and picking "the good one" would reward a rebinding attempt.
    for (const { address } of addresses) {
      const refused = options.guard(address);
      if (refused) {
        const reason = `${host} resolves to ${address}, which is ${refused}`;
        options.report({ action: "denied", host, port, method, reason, address });
        return { status: 403, reason };
      }
    }
    const address = addresses[0]!.address;
    const terminated = method === "CONNECT" && options.terminates(host, port) ? { terminated: true } : {};
    options.report({ action: "allowed", host, port, method, reason: verdict.reason, address, ...terminated });
    return { host, address };
  };
}
