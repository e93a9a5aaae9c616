// Reading the caller's configuration files (policy, models.json, schema, prompt) and reporting what
// is wrong with them the same way everywhere: a usage error that names the file and says what to do.
import fs from "node:fs";
import type { z } from "zod";
import { usageError } from "../errors.js";

/** The file's text; a usage error naming `what` ("policy", "models", "schema") when it cannot be read. */
export function readConfigText(file: string, what: string, hint: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === "EISDIR" ? "it is a folder" : code === "ENOENT" ? "it does not exist" : (error as Error).message;
    throw usageError(`Cannot read the ${what} file ${file}: ${reason}.`, hint);
  }
}

/** The file parsed as JSON; usage errors for a file that cannot be read or is not JSON. */
export function readConfigJson(file: string, what: string, hint: string): unknown {
  const text = readConfigText(file, what, hint);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw usageError(
      `The ${what} file ${file} is not valid JSON: ${(error as Error).message}`,
      "Check the file's syntax.",
    );
  }
}

/** zod's issues as `path: message` lines (or joined with `separator`), the form every error uses. */
export function formatZodIssues(issues: readonly z.core.$ZodIssue[], separator = "\n", indent = "  "): string {
  return issues
    .map((i) => `${separator === "\n" ? indent : ""}${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`)
    .join(separator);
}
