// The names of the policies sandbox-run ships (built in, or example files read from the package),
// apart from loading them: the CLI tells a name from a file path without loading any policy code.

export const BUILT_IN_POLICIES = ["read-only", "workspace-write", "danger-full-access"] as const;
export type BuiltInPolicyName = (typeof BUILT_IN_POLICIES)[number];

/**
 * The example policies that ship with the package, by name: `--policy npm-install` reads the
 * package's own file wherever the command runs. A relative path would be read from the current
 * folder, which is the untrusted workspace in `cd repo && sandbox-run`.
 */
export const EXAMPLE_POLICIES: Readonly<Record<string, string>> = {
  "npm-install": "examples/npm-install.json",
  "pr-fix": "examples/pr-fix.yaml",
};

export function isBuiltInPolicy(name: string): name is BuiltInPolicyName {
  return (BUILT_IN_POLICIES as readonly string[]).includes(name);
}

/** A policy named rather than read from a path the caller chose: built in, or a shipped example. */
export function isNamedPolicy(name: string): boolean {
  return isBuiltInPolicy(name) || Object.hasOwn(EXAMPLE_POLICIES, name);
}
