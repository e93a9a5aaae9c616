// `sandbox-run policy list` and `policy show`: the policies a run takes by name and the effective one.
import { listPolicies, readPolicy } from "../operations.js";
import { isBuiltInPolicy } from "../util/policy-names.js";
import type { CommandContext } from "./lazy-command.js";
import { jsonText, terminalText } from "./terminal-text.js";

/**
 * One line per policy a run takes by name (`--policy <name>`): the built-ins, then the shipped
 * examples, marked as such (a starting point: `policy show <name> --yaml` to copy and adapt).
 */
export async function list({ io }: CommandContext): Promise<undefined> {
  const policies = await listPolicies();
  const width = Math.max(...policies.map(({ name }) => name.length));
  for (const { name, description } of policies) {
    const example = isBuiltInPolicy(name) ? "" : "(example) ";
    io.stdout(`${name.padEnd(width)}  ${example}${description}\n`);
  }
  return undefined;
}

export async function show({ io }: CommandContext, name: string, flags: { yaml?: boolean }): Promise<undefined> {
  const policy = await readPolicy(name);
  if (!flags.yaml) {
    // A policy file may come from anyone (a repository under review): what it holds cannot act on the terminal.
    io.stdout(`${jsonText(policy, 2)}\n`);
    return undefined;
  }
  const { stringify } = await import("yaml");
  io.stdout(
    terminalText(`# sandbox-run policy (from ${name}); load it with --policy <file>.yaml\n${stringify(policy)}`),
  );
  return undefined;
}
