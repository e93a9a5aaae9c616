// Finds a policy by built-in name or file path and validates it, reporting mistakes as
// `path: message` lines so a user can fix their file without reading our source. User files
// are JSON, or YAML when named *.yaml / *.yml (for comments next to a policy's choices).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { usageError } from "../errors.js";
import { formatZodIssues, readConfigFile, readConfigJson } from "../util/config-file.js";
import { nameMeant } from "../util/edit-distance.js";
import { BUILT_IN_POLICIES, type BuiltInPolicyName, EXAMPLE_POLICIES, isBuiltInPolicy } from "../util/policy-names.js";
import { type Policy, policySchemas } from "./policy-schema.js";

const policiesDir = fileURLToPath(new URL("../../policies/", import.meta.url));

/** Loads a built-in or example policy by name, or a user policy from a JSON or YAML file. */
export function loadPolicy(nameOrFile: string): Policy {
  if (isBuiltInPolicy(nameOrFile)) return builtInPolicy(nameOrFile);
  if (Object.hasOwn(EXAMPLE_POLICIES, nameOrFile)) {
    const file = path.join(policiesDir, EXAMPLE_POLICIES[nameOrFile]!);
    return parsePolicy(readConfigFile(file, "policy", POLICY_HINT), nameOrFile);
  }
  if (!fs.existsSync(nameOrFile)) {
    throw usageError(
      `Policy "${nameOrFile}" is neither a built-in policy nor an existing file.`,
      `Use one of ${[...BUILT_IN_POLICIES, ...Object.keys(EXAMPLE_POLICIES)].join(", ")}, or pass the path of a policy file (.json, .yaml or .yml).`,
    );
  }
  return parsePolicy(readConfigFile(nameOrFile, "policy", POLICY_HINT), nameOrFile);
}

/**
 * A built-in policy as it ships: complete and valid (policy-files.test.ts checks that each file is
 * exactly what the schema makes of it), so it is read without zod. Most runs use one, and loading
 * zod would cost them about as much CPU as Node's own start-up.
 */
function builtInPolicy(name: BuiltInPolicyName): Policy {
  return readJson(path.join(policiesDir, `${name}.json`)) as Policy;
}

export function parsePolicy(value: unknown, source: string): Policy {
  // Other tools' policies inherit; these do not, and "extends" drowned in a list of missing fields.
  if (value && typeof value === "object" && "extends" in value)
    throw usageError(
      `Policy ${source} uses "extends": a policy here is complete in itself and inherits from none.`,
      "Start from a complete one and edit it: `sandbox-run policy show workspace-write --yaml > mine.yaml`.",
    );
  const parsed = policySchemas().policySchema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw usageError(
    `Policy ${source} is invalid:\n${formatZodIssues(parsed.error.issues.map(withMeant))}`,
    "Fix the fields above; `sandbox-run policy show workspace-write` prints a complete example.",
  );
}

/** An unknown field's issue names the field it probably meant (`memoryMB` -> memoryMb). */
function withMeant(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "unrecognized_keys") return issue;
  const known = policyFieldNames();
  const meant = issue.keys.map((key) => {
    const near = nameMeant(key, known);
    return near ? `"${key}" (did you mean "${near}"?)` : `"${key}"`;
  });
  return { ...issue, message: `Unrecognized key${issue.keys.length > 1 ? "s" : ""}: ${meant.join(", ")}` };
}

/** Every field name of a policy and of its limits (secrets' own fields are rare enough to leave out). */
function policyFieldNames(): string[] {
  const { policySchema } = policySchemas();
  return [...Object.keys(policySchema.shape), ...Object.keys(policySchema.shape.limits.shape)];
}

const POLICY_HINT = "Pass the path of a readable policy file.";
const readJson = (file: string) => readConfigJson(file, "policy", POLICY_HINT);
