// `sandbox-run policy list` and `policy show` as library operations: the policies sandbox-run ships
// (the built-ins, then the example policies `--policy <name>` reads from the package, such as
// npm-install and pr-fix) with what each is for, and the effective policy of a name or file
// (validated as a run would).

import { loadPolicy } from "../policy/load-policy.js";
import type { Policy } from "../policy/policy-schema.js";
import { BUILT_IN_POLICIES, EXAMPLE_POLICIES } from "../util/policy-names.js";

/** Every policy a run takes by name: the built-ins, then the shipped examples (isBuiltInPolicy tells them apart). */
export function listPolicies(): Array<{ name: string; description: string }> {
  return [...BUILT_IN_POLICIES, ...Object.keys(EXAMPLE_POLICIES)].map((name) => ({
    name,
    description: loadPolicy(name).description ?? "",
  }));
}

export function readPolicy(nameOrFile: string): Policy {
  return loadPolicy(nameOrFile);
}
