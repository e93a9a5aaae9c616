// The egress side of one run in network mode "allowlist", composed from the policy (the proxy
// parts in proxy/ know nothing of policies): the proxy on the run's socket, and,
// when the policy has secrets, their values read on the host, a fresh CA, the CA bundle the
// sandbox will trust and the TLS interception for the secrets' hosts. The placeholders come from the
// plan (made when the run was planned); the bundle sits in the run folder under a fixed name
// (SANDBOX_TRUST_FILE), where the plan mounts it from.
import path from "node:path";
import tls from "node:tls";
import type { Policy } from "../policy/policy-schema.js";
import type { AddressGuard } from "../proxy/address-guard.js";
import { createDomainFilter } from "../proxy/domain-filter.js";
import { type EgressDecision, type EgressProxy, type Resolver, startEgressProxy } from "../proxy/egress-proxy.js";
import { createRunCa, type RunCa } from "../proxy/run-ca.js";
import { upstreamTrust, writeSandboxTrust } from "../proxy/sandbox-trust.js";
import { resolveSecretBindings } from "../proxy/secret-bindings.js";
import { createSecretInterception } from "../proxy/secret-interception.js";

/**
 * Tests only: lets the integration tests point a run's egress proxy at servers on loopback (a git
 * server, a registry) that play the part of public hosts. An agent's (internal) constructor option
 * carries it to its runs' proxies; no policy field, CLI flag or environment variable reaches it.
 * Without it every run uses the real resolver, the real address guard, the real ports and the
 * host's normal trust.
 */
export interface EgressOverrides {
  resolve?: Resolver;
  guard?: AddressGuard;
  upstreamPort?: (host: string, port: number) => number;
  /** Extra roots for upstream certificates (the test servers' CA). */
  upstreamCa?: string[];
  /** Sees each run's CA (to check its key never reaches the sandbox). */
  onRunCa?: (ca: RunCa) => void;
}

interface RunEgressOptions {
  runId: string;
  runDir: string;
  policy: Policy;
  /** Where secret values named by `from: { env }` are read: the host's environment layers. */
  hostEnv: Record<string, string | undefined>;
  /** The placeholders the run's plan gave the sandbox, by secret name. */
  placeholders: Record<string, string>;
  /** The host CA bundle when the policy trusts it (already checked to exist). */
  hostCaBundle?: string;
  /** How long the run may last: the CA's certificates are valid that long (plus a margin). */
  timeoutMs: number;
  onDecision(decision: EgressDecision): void;
  overrides?: EgressOverrides;
}

interface RunEgress {
  proxy: EgressProxy;
  /** The policy's secrets' values (read on the host): for the run's scrubbers. */
  secretValues: string[];
}

const CERTIFICATE_MARGIN_MS = 60 * 60 * 1000;

export async function startRunEgress(options: RunEgressOptions): Promise<RunEgress> {
  const { policy } = options;
  const hooks = options.overrides;
  // Read first: a missing value is a usage error before the proxy or the CA exists.
  const bindings = resolveSecretBindings(policy.secrets, options.hostEnv, options.placeholders);
  let interception: ReturnType<typeof createSecretInterception> | undefined;
  if (bindings.length > 0) {
    const ca = createRunCa({
      label: options.runId,
      hosts: [...new Set(bindings.flatMap((b) => b.hosts))],
      validForMs: options.timeoutMs + CERTIFICATE_MARGIN_MS,
    });
    hooks?.onRunCa?.(ca);
    writeSandboxTrust(options.runDir, ca.certificatePem, options.hostCaBundle);
    const roots = upstreamTrust(options.hostCaBundle);
    interception = createSecretInterception({
      bindings,
      ca,
      upstreamCa: hooks?.upstreamCa ? [...(roots ?? tls.rootCertificates), ...hooks.upstreamCa] : roots,
    });
  }
  const proxy = await startEgressProxy({
    socketPath: path.join(options.runDir, "proxy.sock"),
    filter: createDomainFilter(policy.allowedDomains),
    onDecision: options.onDecision,
    resolve: hooks?.resolve,
    guard: hooks?.guard,
    upstreamPort: hooks?.upstreamPort,
    interception,
  });
  return { proxy, secretValues: bindings.map((b) => b.value) };
}
