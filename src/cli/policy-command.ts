// `sandbox-run policy list` and `policy show`: the built-in policies and the effective one.
import { listPolicies, readPolicy } from "../operations.js";
import type { CommandContext } from "./lazy-command.js";
import { jsonText, terminalText } from "./terminal-text.js";

export async function list({ io }: CommandContext): Promise<undefined> {
  const policies = await listPolicies();
  const width = Math.max(...policies.map(({ name }) => name.length));
  for (const { name, description } of policies) io.stdout(`${name.padEnd(width)}  ${description}\n`);
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
