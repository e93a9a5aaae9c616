// `sandbox-run policy list` and `policy show` as library operations: the built-in policies with
// what each is for, and the effective policy of a name or file (validated as a run would).

import { loadPolicy } from "../policy/load-policy.js";
import type { Policy } from "../policy/policy-schema.js";
import { BUILT_IN_POLICIES } from "../util/policy-names.js";

export function listPolicies(): Array<{ name: string; description: string }> {
  return BUILT_IN_POLICIES.map((name) => ({ name, description: loadPolicy(name).description ?? "" }));
}

export function readPolicy(nameOrFile: string): Policy {
  return loadPolicy(nameOrFile);
}
