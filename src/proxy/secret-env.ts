// What a run's secrets put into the sandbox's environment: each secret's variable holding its
// placeholder, and, for secrets sent as HTTP basic auth, a git credential helper per host that
// answers with that variable, so `git push` to the host works without any set-up in the sandbox
// (git's environment-only configuration: GIT_CONFIG_COUNT / _KEY_n / _VALUE_n, appended after
// any the caller passed).
import type { ProxySecret } from "./secret-bindings.js";

export function secretSandboxEnv(
  secrets: Record<string, ProxySecret>,
  placeholders: Record<string, string>,
  callerEnv: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {};
  const given = Number(callerEnv.GIT_CONFIG_COUNT ?? 0);
  let count = Number.isInteger(given) && given >= 0 ? given : 0;
  for (const [name, secret] of Object.entries(secrets)) {
    env[name] = placeholders[name] ?? "<per-run placeholder>";
    if (!secret.inject.includes("basic")) continue;
    const username = secret.username ?? "x-access-token";
    // git runs `sh -c '<helper> "$@"' <helper> get`; the placeholder is read at that moment.
    const helper = `!f() { test "$1" = get && printf 'username=%s\\npassword=%s\\n' '${username}' "$${name}"; }; f`;
    for (const host of secret.hosts) {
      env[`GIT_CONFIG_KEY_${count}`] = `credential.https://${host.toLowerCase()}.helper`;
      env[`GIT_CONFIG_VALUE_${count}`] = helper;
      count++;
    }
  }
  if (count > given) env.GIT_CONFIG_COUNT = String(count);
  return env;
}
