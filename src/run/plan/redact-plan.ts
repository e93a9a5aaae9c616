// One view of a run plan that is safe to print or store (--dry-run, run records): the values of the
// caller's variables are replaced by a marker (their names stay, so it shows what was set), the
// launcher's configuration is shown parsed, and the gateway's routes appear without credentials.
import { describeRouteCredentials } from "../../gateway/route-credentials.js";
import { summarizeSecrets } from "../../proxy/secret-bindings.js";
import type { PlannedRun } from "./prepare-plan.js";

const REDACTED = "<set by caller>";

export function redactPlan(planned: PlannedRun): Record<string, unknown> {
  const { plan, run } = planned;
  const callerSet = new Set(planned.callerEnvNames);
  const env = Object.fromEntries(
    Object.entries(plan.env).map(([name, value]) => {
      if (name === "SANDBOX_RUN_CONFIG") return [name, JSON.parse(value)];
      return [name, callerSet.has(name) ? REDACTED : value];
    }),
  );
  return {
    ...plan,
    env,
    limits: callLimits(planned),
    gatewayRoutes: run.routing.routes.map((r) => ({
      id: r.id,
      upstream: r.upstreamBaseUrl,
      api: r.api,
      model: r.model,
      // Where each credential comes from (a variable, a models.json field, a command that runs when the run starts), never a value.
      credentialHeaders: describeRouteCredentials(r),
    })),
    // Which credentials the run would get, by name, host and source; never a value.
    secrets: summarizeSecrets(run.policy.network === "allowlist" ? run.policy.secrets : undefined, run.hostEnv).map(
      ({ problem, ...secret }) => ({ ...secret, available: problem === undefined }),
    ),
    prompt: { bytes: Buffer.byteLength(run.prompt) },
    // The container's own `network` is "none" under an allow-list too (its way out is the egress
    // proxy on the host, through a socket): what the proxy lets through is said here.
    egress:
      run.policy.network === "allowlist"
        ? {
            mode: "allowlist",
            via: "egress proxy on the host",
            ports: [80, 443],
            allowedDomains: run.policy.allowedDomains,
          }
        : { mode: run.policy.network },
  };
}

/**
 * The policy's limits as this call gets them: a call's timeout and budgets (--timeout, --max-turns,
 * --max-cost, or the library's options) override the policy's, and a plan that showed the policy's
 * own figures misled whoever checked it before a run (session 30's list).
 */
function callLimits({ plan, run }: PlannedRun): Record<string, unknown> {
  return {
    ...plan.limits,
    timeoutSeconds: run.timeoutMs / 1000,
    maxTurns: run.budgets.maxTurns,
    ...(run.budgets.maxCostUsd !== undefined ? { maxCostUsd: run.budgets.maxCostUsd } : {}),
  };
}
