// commander gives the root command every flag it also has, wherever it is written
// (`sandbox-run --model m batch tasks.jsonl` and `sandbox-run batch tasks.jsonl --model m`): a
// subcommand reads both, its own first.
import type { Command } from "commander";

/** The subcommand's flags over the root command's (an unset flag never hides a set one); `--no-build` on either turns building off. */
export function withRootFlags<T extends { build?: boolean }>(flags: T, command: Command): T & { build: boolean } {
  const root = command.parent?.opts<T>() ?? ({} as T);
  return {
    ...definedOnly(root),
    ...definedOnly(flags),
    build: root.build !== false && flags.build !== false,
  };
}

function definedOnly<T extends object>(flags: T): T {
  return Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== undefined)) as T;
}
