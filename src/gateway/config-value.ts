// Resolution of models.json `apiKey` and header values, following Pi 1.6.0
// (dist/core/resolve-config-value.js):
// - a value starting with "!" is a shell command; its trimmed stdout is the value
//   (empty output, a nonzero exit or a timeout leave it unresolved);
// - otherwise "$NAME" and "${NAME}" interpolate environment variables anywhere in the string,
//   "$$" is a literal "$" and "$!" a literal "!"; an unset or empty variable leaves the whole
//   value unresolved;
// - anything else is literal.
// The difference to Pi: variables come only from the `env` passed in (not process.env), so the
// caller decides which environment the host-side lookup sees.
import { hostProgramCwd, hostProgramEnv } from "../util/host-programs.js";
import { childProcess } from "../util/lazy-builtins.js";

export type ConfigEnv = Record<string, string | undefined>;

type TemplatePart = { type: "literal"; value: string } | { type: "env"; name: string };

const ENV_VAR_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ENV_VAR_NAME_PREFIX_RE = /^[A-Za-z_][A-Za-z0-9_]*/;

/** Pi's timeout for `!command` values. */
const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;

function appendLiteral(parts: TemplatePart[], value: string): void {
  if (!value) return;
  const previous = parts[parts.length - 1];
  if (previous?.type === "literal") previous.value += value;
  else parts.push({ type: "literal", value });
}

function parseTemplate(config: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let index = 0;
  while (index < config.length) {
    const dollar = config.indexOf("$", index);
    if (dollar < 0) {
      appendLiteral(parts, config.slice(index));
      break;
    }
    appendLiteral(parts, config.slice(index, dollar));
    const next = config[dollar + 1];
    if (next === "$" || next === "!") {
      appendLiteral(parts, next);
      index = dollar + 2;
      continue;
    }
    if (next === "{") {
      const end = config.indexOf("}", dollar + 2);
      if (end < 0) {
        appendLiteral(parts, "$");
        index = dollar + 1;
        continue;
      }
      const name = config.slice(dollar + 2, end);
      if (ENV_VAR_NAME_RE.test(name)) parts.push({ type: "env", name });
      else appendLiteral(parts, config.slice(dollar, end + 1));
      index = end + 1;
      continue;
    }
    const match = config.slice(dollar + 1).match(ENV_VAR_NAME_PREFIX_RE);
    if (match) {
      parts.push({ type: "env", name: match[0] });
      index = dollar + 1 + match[0].length;
      continue;
    }
    appendLiteral(parts, "$");
    index = dollar + 1;
  }
  return parts;
}

export function isCommandConfigValue(config: string): boolean {
  return config.startsWith("!");
}

/** Environment variables a (non-command) value refers to, in order, without duplicates. */
export function configValueEnvNames(config: string): string[] {
  if (isCommandConfigValue(config)) return [];
  const names: string[] = [];
  for (const part of parseTemplate(config)) {
    if (part.type === "env" && !names.includes(part.name)) names.push(part.name);
  }
  return names;
}

function envValue(name: string, env: ConfigEnv): string | undefined {
  return env[name] || undefined;
}

export type ConfigValueResult = { ok: true; value: string } | { ok: false; reason: string; missingEnv?: string[] };

interface ResolveOptions {
  env: ConfigEnv;
  /** Run `!command` values (on the host). When false they resolve to an error. */
  runCommands: boolean;
  commandTimeoutMs?: number;
}

/**
 * A command's program, for messages (" (vault)"): never the rest of its text, which may carry a
 * token of its own (`curl -H 'X-Vault-Token: …'`) and would reach stderr and the --json envelope.
 */
function programOf(command: string): string {
  const program = /^\s*([\w./-]{1,64})(\s|$)/.exec(command)?.[1];
  return program ? ` (${program.split("/").at(-1)})` : "";
}

/** Resolves one value. Reasons never contain the value itself, nor a command's arguments. */
export function resolveConfigValue(config: string, options: ResolveOptions): ConfigValueResult {
  if (isCommandConfigValue(config)) {
    if (!options.runCommands) return { ok: false, reason: "the command was not run" };
    const command = config.slice(1);
    try {
      const output = childProcess()
        .execSync(command, {
          encoding: "utf8",
          timeout: options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
          stdio: ["ignore", "pipe", "ignore"],
          env: hostProgramEnv(definedEnv(options.env)),
          cwd: hostProgramCwd(),
        })
        .trim();
      return output
        ? { ok: true, value: output }
        : { ok: false, reason: `the command${programOf(command)} printed nothing` };
    } catch (error) {
      const e = error as { code?: string; status?: number | null; signal?: string | null };
      const why =
        e.code === "ETIMEDOUT" || e.signal === "SIGTERM"
          ? `timed out after ${options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS}ms`
          : e.status != null
            ? `exited with status ${e.status}`
            : "could not be run";
      return { ok: false, reason: `the command${programOf(command)} ${why}` };
    }
  }
  let resolved = "";
  const missing: string[] = [];
  for (const part of parseTemplate(config)) {
    if (part.type === "literal") {
      resolved += part.value;
      continue;
    }
    const value = envValue(part.name, options.env);
    if (value === undefined) {
      if (!missing.includes(part.name)) missing.push(part.name);
      continue;
    }
    resolved += value;
  }
  if (missing.length > 0) {
    return {
      ok: false,
      reason: `environment variable${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not set`,
      missingEnv: missing,
    };
  }
  return { ok: true, value: resolved };
}

function definedEnv(env: ConfigEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined) out[name] = value;
  return out;
}
