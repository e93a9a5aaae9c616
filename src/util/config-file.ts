// Reading the caller's configuration files (policy, engines, models.json, schema, prompt) and
// reporting what is wrong with them the same way everywhere: a usage error that names the file and
// says what to do. Policy and engines files are JSON, or YAML when named *.yaml / *.yml
// (readConfigFile): one reader, so both take the same YAML and refuse the same mistakes.
import fs from "node:fs";
import { createRequire } from "node:module";
import type { z } from "zod";
import { usageError } from "../errors.js";

/** The file's text; a usage error naming `what` ("policy", "models", "schema") when it cannot be read. */
function readConfigText(file: string, what: string, hint: string): string {
  try {
    // A byte-order mark (Windows editors write one) is no part of JSON or YAML (review, session 31).
    return fs.readFileSync(file, "utf8").replace(/^\uFEFF/, "");
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
    const message = (error as Error).message;
    // V8 says where by character position: a line and column are what an editor shows.
    const at = /at position (\d+)/.exec(message);
    const where = at ? ` (line ${lineAndColumn(text, Number(at[1]))})` : "";
    throw usageError(
      `The ${what} file ${file} is not valid JSON${where}: ${message}`,
      `Check the file's syntax: JSON has no comments and no trailing commas${what === "policy" ? " (a policy file named *.yaml may have comments)" : /\.ya?ml$/i.test(file) ? ` (a ${what} file is read as JSON, whatever its name)` : ""}.`,
    );
  }
}

/** The file parsed as YAML when named *.yaml / *.yml, else as JSON; usage errors as above. */
export function readConfigFile(file: string, what: string, hint: string): unknown {
  return /\.ya?ml$/i.test(file) ? readConfigYaml(file, what, hint) : readConfigJson(file, what, hint);
}

/**
 * The file parsed as YAML 1.2 (core schema: no custom tags, no `<<` merge keys). Duplicate keys
 * are errors (JSON.parse would silently keep the last one; YAML users expect to be told), and
 * aliases are bounded (a billion laughs stays small). The yaml package is loaded on first use:
 * most runs never read YAML, and the CLI's start-up time matters.
 */
function readConfigYaml(file: string, what: string, hint: string): unknown {
  const text = readConfigText(file, what, hint);
  const { parseDocument } = createRequire(import.meta.url)("yaml") as typeof import("yaml");
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  const error = doc.errors[0];
  if (error)
    throw usageError(
      `The ${what} file ${file} is not valid YAML: ${error.message.split("\n")[0]!.replace(/:$/, "")}`,
      "Check the file's syntax at that line.",
    );
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw usageError(
      `The ${what} file ${file} could not be read as YAML: ${(e as Error).message}`,
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

/** "3, column 14" for a character offset into `text`. */
function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split("\n");
  return `${before.length}, column ${before.at(-1)!.length + 1}`;
}
