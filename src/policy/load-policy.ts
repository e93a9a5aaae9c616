// Finds a policy by built-in name or file path and validates it, reporting mistakes as
// `path: message` lines so a user can fix their file without reading our source.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { usageError } from "../errors.js";
import { policySchema, type Policy } from "./policy-schema.js";

export const BUILT_IN_POLICIES = ["read-only", "workspace-write", "danger-full-access"] as const;
export type BuiltInPolicyName = (typeof BUILT_IN_POLICIES)[number];

const policiesDir = fileURLToPath(new URL("../../policies/", import.meta.url));

export function isBuiltInPolicy(name: string): name is BuiltInPolicyName {
  return (BUILT_IN_POLICIES as readonly string[]).includes(name);
}

/** Loads a built-in policy by name, or a user policy from a JSON file. */
export function loadPolicy(nameOrFile: string): Policy {
  if (isBuiltInPolicy(nameOrFile)) return parsePolicy(readJson(path.join(policiesDir, `${nameOrFile}.json`)), nameOrFile);
  if (!fs.existsSync(nameOrFile)) {
    throw usageError(
      `Policy "${nameOrFile}" is neither a built-in policy nor an existing file.`,
      `Use one of ${BUILT_IN_POLICIES.join(", ")}, or pass the path of a policy JSON file.`,
    );
  }
  return parsePolicy(readJson(nameOrFile), nameOrFile);
}

export function parsePolicy(value: unknown, source: string): Policy {
  const parsed = policySchema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw usageError(
    `Policy ${source} is invalid:\n${formatIssues(parsed.error.issues)}`,
    "Fix the fields above; `sandbox-run policy show workspace-write` prints a complete example.",
  );
}

export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((i) => `  ${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`).join("\n");
}

function readJson(file: string): unknown {
  const text = fs.readFileSync(file, "utf8");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw usageError(`Policy file ${file} is not valid JSON: ${(error as Error).message}`, "Check the file's syntax.");
  }
}
