import type { JsonSchema, SandboxMode } from "../agent.js";
import { usageError } from "../errors.js";
import type { RunOptions } from "../index.js";
import { HAND_BACK_MODES, type HandBackMode, MAX_TIMEOUT_SECONDS, SANDBOX_MODES } from "../sandbox-contract.js";
import { readConfigJson } from "../util/config-file.js";
import { parsePlatform } from "../util/parse-platform.js";

export interface RunFlags {
  schema?: string;
  promptFile?: string;
  refuseWorkspaceConfig?: boolean;
  allowWorkspaceConfig?: boolean;
  cwd?: string;
  sandbox?: string;
  policy?: string;
  writable?: string[];
  model?: string;
  models?: string;
  env?: string[];
  timeout?: string;
  runtime?: string;
  platform?: string;
  workspace?: string;
  handBack?: string;
  image?: string;
  contextFiles?: boolean;
  maxTurns?: string;
  maxCost?: string;
}

export function parseRunFlags(flags: RunFlags, hostEnv: Record<string, string | undefined>): RunOptions {
  const options: RunOptions = {};
  if (flags.schema) options.schema = readSchema(flags.schema);
  // `--prompt-file -` is stdin, no file of the workspace's.
  const promptFile = flags.promptFile === "-" ? undefined : flags.promptFile;
  if (flags.schema || promptFile) options.configFiles = { schema: flags.schema, prompt: promptFile };
  if (flags.refuseWorkspaceConfig) options.refuseWorkspaceConfig = true;
  if (flags.allowWorkspaceConfig) options.allowWorkspaceConfig = true;
  // An empty --cwd "" is the library's to refuse, not the process's folder (review, session 33).
  if (flags.cwd !== undefined) options.cwd = flags.cwd;
  if (flags.sandbox) {
    if (!(SANDBOX_MODES as readonly string[]).includes(flags.sandbox)) {
      throw usageError(`--sandbox must be read-only, workspace-write or danger-full-access, not "${flags.sandbox}".`);
    }
    options.sandbox = flags.sandbox as SandboxMode;
  }
  if (flags.policy) options.policy = flags.policy;
  if (flags.image) options.image = flags.image;
  if (flags.writable?.length) options.additionalWritableDirectories = flags.writable;
  if (flags.model) options.model = flags.model;
  if (flags.models) options.models = flags.models;
  if (flags.env?.length) options.env = parseEnvFlags(flags.env, hostEnv);
  if (flags.timeout !== undefined) {
    const seconds = Number(flags.timeout);
    if (!Number.isFinite(seconds) || seconds <= 0)
      throw usageError(`--timeout must be a positive number of seconds, not "${flags.timeout}".`);
    if (seconds > MAX_TIMEOUT_SECONDS)
      throw usageError(
        `--timeout ${flags.timeout} is longer than a run may last (${MAX_TIMEOUT_SECONDS} seconds, a day).`,
        "Pass at most 86400; split longer work into several runs.",
      );
    options.timeoutMs = Math.round(seconds * 1000);
  }
  if (flags.runtime) {
    if (flags.runtime !== "runc" && flags.runtime !== "runsc")
      throw usageError(`--runtime must be runc or runsc, not "${flags.runtime}".`);
    options.runtime = flags.runtime;
  }
  if (flags.platform) options.platform = parsePlatform(flags.platform, "--platform");
  if (flags.workspace) {
    if (flags.workspace !== "bind" && flags.workspace !== "copy")
      throw usageError(`--workspace must be bind or copy, not "${flags.workspace}".`);
    options.workspaceMode = flags.workspace;
  }
  if (flags.handBack) {
    if (!(HAND_BACK_MODES as readonly string[]).includes(flags.handBack))
      throw usageError(`--hand-back must be apply, branch or patch, not "${flags.handBack}".`);
    options.handBack = flags.handBack as HandBackMode;
  }
  if (flags.contextFiles) options.contextFiles = true;
  if (flags.maxTurns !== undefined) {
    const turns = Number(flags.maxTurns);
    if (!Number.isInteger(turns) || turns <= 0)
      throw usageError(`--max-turns must be a positive whole number, not "${flags.maxTurns}".`);
    options.maxTurns = turns;
  }
  if (flags.maxCost !== undefined) {
    const usd = Number(flags.maxCost);
    if (!Number.isFinite(usd) || usd <= 0)
      throw usageError(`--max-cost must be a positive number of US dollars, not "${flags.maxCost}".`);
    options.maxCostUsd = usd;
  }
  return options;
}

/** KEY=VALUE sets a value; a bare KEY passes the host's value (like docker run -e KEY). */
export function parseEnvFlags(entries: string[], hostEnv: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const eq = entry.indexOf("=");
    const key = eq === -1 ? entry : entry.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      throw usageError(
        `--env "${entry}" is not KEY=VALUE.`,
        "Pass --env NAME=value, or --env NAME to pass the host's value.",
      );
    }
    const value = eq === -1 ? hostEnv[key] : entry.slice(eq + 1);
    if (value === undefined)
      throw usageError(`--env ${key}: the host has no variable ${key}.`, `Pass --env ${key}=value.`);
    env[key] = value;
  }
  return env;
}

function readSchema(file: string): JsonSchema {
  return readConfigJson(file, "schema", "Pass the path of a JSON Schema file.") as JsonSchema;
}
