// Reading the caller's configuration files (policy, engines, models.json, schema, prompt) and
// reporting what is wrong with them the same way everywhere: a usage error that names the file and
// says what to do. Policy and engines files are JSON, or YAML when named *.yaml / *.yml
// (readConfigFile): one reader, so both take the same YAML and refuse the same mistakes.
import fs from "node:fs";
import type { z } from "zod";
import { usageError } from "../errors.js";
import { openRegularFile, readAll } from "./read-fd.js";
import { requireVendored } from "./vendored.js";

/** The most a policy, engines, models or schema file may hold. */
export const MAX_CONFIG_FILE_BYTES = 8 * 1024 * 1024;
/** Kernel file systems: their files are no configuration, and /proc's hold the host's environment and memory. */
const KERNEL_FILES = /^\/(proc|sys|dev)(\/|$)/;

/**
 * A caller's file as text, read only when it is a regular file of at most `maxBytes` outside the
 * kernel's file systems; a usage error naming `what` ("policy", "prompt") otherwise. A file may be
 * named inside the tree under test (review, session 35: a schema linked to /dev/zero grew the CLI
 * by 150 MB/s before any check ran, a FIFO held it until a signal, and a prompt linked to
 * /proc/self/environ became the prompt). Links are followed: where they lead is judged by the plan
 * (config-origins.ts).
 */
export function readTextFile(file: string, what: string, hint: string, maxBytes = MAX_CONFIG_FILE_BYTES): string {
  try {
    return readCallerFile(file, maxBytes).toString("utf8");
  } catch (error) {
    if (!(error instanceof CallerFileError)) throw error;
    throw usageError(`Cannot read the ${what} file ${file}: ${error.reason}.`, hint);
  }
}

/** Why a caller's file is not read (readCallerFile): "it does not exist", "it is not a regular file (a FIFO)". */
export class CallerFileError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/**
 * A caller's file's bytes (readTextFile's rules: a regular file outside the kernel's file systems,
 * at most `maxBytes`); a CallerFileError saying why not. TLS files and ssh keys an engines file
 * names are read so too (review, session 35: a FIFO named as the CA held the CLI).
 */
export function readCallerFile(file: string, maxBytes: number): Buffer {
  let opened: { fd: number; stat: fs.Stats };
  try {
    opened = openRegularFile(file, true);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CallerFileError(
      code === "ENOENT"
        ? "it does not exist"
        : code === "not a regular file"
          ? `it is not a regular file (${kindOf(file)})`
          : ((error as Error).message ?? String(code)),
    );
  }
  const { fd } = opened;
  try {
    const at = fs.readlinkSync(`/proc/self/fd/${fd}`);
    if (KERNEL_FILES.test(at)) throw new CallerFileError(`it is ${at}, a file of the kernel's, not a file of yours`);
    // Read one byte past the cap whatever the size says: files of some file systems report 0.
    const bytes = readAll(fd, maxBytes + 1);
    if (bytes.length > maxBytes)
      throw new CallerFileError(`it holds more than ${Math.max(1, Math.round(maxBytes / 1024 / 1024))} MiB`);
    return bytes;
  } finally {
    fs.closeSync(fd);
  }
}

function kindOf(file: string): string {
  try {
    const stat = fs.statSync(file);
    if (stat.isDirectory()) return "a folder";
    if (stat.isFIFO()) return "a FIFO";
    if (stat.isSocket()) return "a socket";
    if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  } catch {}
  return "not a file";
}

/** The file's text; a usage error naming `what` ("policy", "models", "schema") when it cannot be read. */
function readConfigText(file: string, what: string, hint: string): string {
  // A byte-order mark (Windows editors write one) is no part of JSON or YAML (review, session 31).
  return readTextFile(file, what, hint).replace(/^\uFEFF/, "");
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
  const { parseDocument } = requireVendored<typeof import("yaml")>("yaml", (load) => load("yaml"));
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

/** The most a TLS file, an ssh key or a known_hosts file an engine's settings name may hold. */
export const MAX_ENGINE_FILE_BYTES = 1024 * 1024;
