// `sandbox-run policy list` and `policy show`: the built-in policies and the effective one.
import { BUILT_IN_POLICIES, loadPolicy } from "../policy/load-policy.js";
import type { CommandContext } from "./lazy-command.js";

export function list({ io }: CommandContext): undefined {
  const width = Math.max(...BUILT_IN_POLICIES.map((name) => name.length));
  for (const name of BUILT_IN_POLICIES) {
    io.stdout(`${name.padEnd(width)}  ${loadPolicy(name).description ?? ""}\n`);
  }
  return undefined;
}

export async function show({ io }: CommandContext, name: string, flags: { yaml?: boolean }): Promise<undefined> {
  const policy = loadPolicy(name);
  if (!flags.yaml) {
    io.stdout(`${JSON.stringify(policy, null, 2)}\n`);
    return undefined;
  }
  const { stringify } = await import("yaml");
  io.stdout(`# sandbox-run policy (from ${name}); load it with --policy <file>.yaml\n${stringify(policy)}`);
  return undefined;
}
