// Merges the option layers (host environment < constructor config < per-run options),
// canonicalises every host path and rejects bad input before anything is created.
// (Over 300 lines because every option's rule and its usage error are kept side by side.)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { AgentOptions, JsonSchema, SandboxMode } from "../../agent.js";
import { usageError } from "../../errors.js";
import { type ProviderRouting, planProviderRouting } from "../../gateway/provider-routes.js";
import { checkExtraArgs } from "../../pi/pi-args.js";
import { loadPolicy, parsePolicy } from "../../policy/load-policy.js";
import type { Policy } from "../../policy/policy-schema.js";
import {
  GATEWAY_PORT,
  HAND_BACK_MODES,
  type HandBackMode,
  MAX_TIMEOUT_SECONDS,
  SANDBOX_MODES,
  WORKSPACE_MODES,
  type WorkspaceMode,
} from "../../sandbox-contract.js";
import { readConfigJson } from "../../util/config-file.js";
import { launchPaths, ownInstallation } from "../../util/own-installation.js";
import { parsePlatform } from "../../util/parse-platform.js";
import { passesThrough } from "../../util/passes-through.js";
import { atOrBelow, treesOverlapOnDisk } from "../../util/path-inside.js";
import type { RunnerPlatform } from "../../util/platform.js";
import { isNamedPolicy } from "../../util/policy-names.js";
import { gitDirOutsideWarning } from "../../workspace/git-dir-outside.js";
import type { ResultValidator } from "../result-validator.js";
import {
  type ConfigFiles,
  checkSecretFiles,
  configInsideRoots,
  describeInside,
  modelsJsonHasCommands,
  refuseLinksOut,
} from "./config-origins.js";
import {
  type FolderRole,
  lentFolderProblem,
  othersMayReplace,
  readOnlyFolderProblem,
  realFolder,
} from "./host-folders.js";

export type Env = Record<string, string | undefined>;

/** Options beyond the seam that a ContainerPiAgent (or one run) accepts. */
export interface SandboxOptions {
  /** A built-in policy name, a policy file path, or a policy object; defaults to the sandbox mode's policy. */
  policy?: string | Policy | undefined;
  /** Pi models.json for custom providers: a file path or the parsed object. */
  models?: string | Record<string, unknown> | undefined;
  /** Wall-clock limit in milliseconds; defaults to the policy's timeoutSeconds. */
  timeoutMs?: number | undefined;
  /** Extra Pi flags (never ones that change the protocol or the boundary). */
  extraArgs?: string[] | undefined;
  /** Container runtime; overrides the policy's. */
  runtime?: "runc" | "runsc" | undefined;
  /**
   * The platform the sandbox runs on (linux/amd64, linux/arm64); overrides the policy's, which
   * overrides SANDBOX_RUN_PLATFORM; default: the engine's own. Another platform runs under the
   * engine's emulator (runc only).
   */
  platform?: RunnerPlatform | undefined;
  /**
   * How the workspace reaches the sandbox: "bind" (mounted) or "copy" (copied in, changes checked
   * and copied back). Overrides the policy's, which overrides SANDBOX_RUN_WORKSPACE; default: bind
   * where the engine shares this host's filesystem, copy where it does not.
   */
  workspaceMode?: WorkspaceMode | undefined;
  /**
   * What becomes of the workspace's changes once they passed the checks: "apply" (default: they are
   * written into the working tree), "branch" (the host's own git commits them onto
   * `sandbox-run/<run-id>`; the working tree and `.git` stay as they were; the workspace must be a
   * git repository with a commit) or "patch" (`RunDetails.handBack.patch` only). branch and patch
   * run in copy mode. Overrides the policy's `handBack`.
   */
  handBack?: HandBackMode | undefined;
  /**
   * Runner image: one built FROM the runner image (e.g. by `sandbox-run image build --apt`).
   * Overrides the policy's; then SANDBOX_RUN_IMAGE; default: this version's runner image.
   */
  image?: string | undefined;
  /**
   * Where the workspace appears inside the sandbox (Pi's working directory, named in its system
   * prompt); default: its host path. A fixed path makes a run's requests independent of where the
   * checkout lives: replay mounts the workspace where the recorded run saw it.
   */
  workspacePath?: string | undefined;
  /** Load AGENTS.md/CLAUDE.md from the workspace; overrides the policy's (off for untrusted work). */
  contextFiles?: boolean | undefined;
  /** Stop the run when the cost Pi reports passes this many US dollars. */
  maxCostUsd?: number | undefined;
  /** Stop the run after this many model responses; overrides the policy's limits.maxTurns. */
  maxTurns?: number | undefined;
  /**
   * Files the caller read the schema and the prompt from (the CLI's --schema, --prompt-file), and
   * the engines file the agent's pool came from, so the run can tell when they lie inside the trees
   * it sandboxes (policy and models files it knows).
   */
  configFiles?: { schema?: string | undefined; prompt?: string | undefined; engines?: string | undefined } | undefined;
  /**
   * Refuse (instead of warn about) a policy, models, schema or prompt file that lies inside the
   * workspace or an extra writable root: for CI, where that tree is the change under test.
   * Default: the SANDBOX_RUN_REFUSE_WORKSPACE_CONFIG=1 variable, else false.
   */
  refuseWorkspaceConfig?: boolean | undefined;
  /**
   * Accept (with a warning) a policy, models or engines file inside the workspace or an extra
   * writable root. Such a file chooses the run's boundary and where the provider key goes, and
   * the tree is the one under test, so it is refused unless the caller says the tree is theirs.
   * Default: the SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG=1 variable, else false.
   */
  allowWorkspaceConfig?: boolean | undefined;
}

export type RunOptions = AgentOptions & SandboxOptions;

export interface ResolvedRun {
  prompt: string;
  cwd: string;
  /** Where the workspace appears inside the sandbox, when not at its host path. */
  workspacePath?: string;
  writableRoots: string[];
  readOnlyMounts: string[];
  model: string;
  schema?: JsonSchema;
  validator?: ResultValidator;
  policy: Policy;
  hostEnv: Record<string, string>;
  /** Variables explicitly given for the sandbox (constructor + run), before credential filtering. */
  sandboxEnv: Record<string, string>;
  modelsJson?: unknown;
  timeoutMs: number;
  extraArgs: string[];
  /** maxTurns: the call's, else the policy's limits.maxTurns. */
  budgets: { maxCostUsd?: number; maxTurns: number };
  /** The runner image asked for, if any (else this version's runner image). */
  image?: string;
  /** Things the caller should know before trusting this run (e.g. a config file inside the workspace). */
  warnings: string[];
  /** Of those, the config files inside the sandboxed trees (event `config.untrusted`). */
  untrustedConfig: string[];
  /** The workspace mode asked for (run > constructor > policy), if any; the engine decides otherwise. */
  workspaceMode?: WorkspaceMode;
  /** What becomes of the workspace's judged changes (run > constructor > policy > "apply"). */
  handBack: HandBackMode;
  /** Gateway routes and the sandbox's models.json: planned here so a bad model fails before Docker is touched. */
  routing: ProviderRouting;
}

/** Compiles a call's result schema: result-validator.ts's compileResultSchema. */
export type SchemaCompiler = (schema: JsonSchema) => ResultValidator;

let schemaCompiler: SchemaCompiler | undefined;

/**
 * The schema compiler resolveRun uses. result-validator.ts (Ajv's set-up, pi-schema's checks, the
 * check worker and, through it, Node's worker_threads) is not imported here: a plan without a schema
 * needs none of it, and loading it cost every `sandbox-run --dry-run` about a fifth of its start-up
 * (tests/unit/cli-start-up.test.ts). resolveRun is synchronous (ContainerPiAgent.plan()), so it
 * cannot load the compiler when a schema comes: the agent, which imports it anyway, hands it over
 * here when its module loads (useSchemaCompiler); the --dry-run path loads it before it resolves a
 * call with a schema (loadSchemaCompiler). A schema with no compiler is refused, never left unchecked.
 */
export function useSchemaCompiler(compile: SchemaCompiler): void {
  schemaCompiler = compile;
}

/** Loads result-validator.ts and uses its compiler (useSchemaCompiler): before a call with a schema is resolved. */
export async function loadSchemaCompiler(): Promise<void> {
  if (!schemaCompiler) useSchemaCompiler((await import("../result-validator.js")).compileResultSchema);
}

function compileSchema(schema: JsonSchema): ResultValidator {
  if (!schemaCompiler)
    throw new Error(
      "sandbox-run: a call with a schema was resolved before the schema compiler was loaded (loadSchemaCompiler in resolve-options.ts).",
    );
  return schemaCompiler(schema);
}

/** Variables the sandbox relies on; a caller may not set them. */
const RESERVED_ENV = /^(SANDBOX_RUN_.*|PI_CODING_AGENT_DIR|PI_OFFLINE|HOME|TMPDIR|NODE_COMPILE_CACHE)$/;

/** Container paths we own or that would break the container if shadowed. */
const FORBIDDEN_EXACT = [
  "/",
  "/tmp",
  "/home",
  "/home/sandbox",
  "/usr",
  "/etc",
  "/bin",
  "/sbin",
  "/lib",
  "/lib64",
  "/var",
  "/run",
  "/opt",
];
const FORBIDDEN_TREES = ["/proc", "/sys", "/dev", "/opt/sandbox-run", "/run/sandbox-run", "/home/sandbox"];

function mergeEnv(...layers: Array<Env | undefined>): Record<string, string> {
  const merged: Env = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [key, value] of Object.entries(layer)) merged[key] = value;
  }
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(merged)) if (value !== undefined) result[key] = value;
  return result;
}

// Long because it is a checklist read top to bottom: each option is merged, checked and explained
// (its usage error next to its rule) in the order a caller would fix them; no side effects but reads.
export function resolveRun(
  prompt: string,
  config: RunOptions,
  run: RunOptions,
  processEnv: Env = process.env,
  /** "shape": a warm pool's template, which lends no tree (each claim's own call is checked). */
  purpose: "call" | "shape" = "call",
): ResolvedRun {
  if (typeof prompt !== "string")
    throw usageError(
      `The prompt must be a string, not ${prompt === null ? "null" : typeof prompt}.`,
      "Pass the task as the prompt argument, as text.",
    );
  if (prompt.trim() === "") {
    throw usageError("The prompt is empty.", "Pass the task as the prompt argument (or on stdin for the CLI).");
  }
  const hostEnv = mergeEnv(processEnv, config.env, run.env);
  const sandboxEnv = mergeEnv(config.env, run.env);
  // Drop variables an earlier layer set and a later layer removed with `undefined`.
  for (const layer of [config.env, run.env]) {
    for (const [key, value] of Object.entries(layer ?? {})) if (value === undefined) delete sandboxEnv[key];
  }
  for (const [key, value] of Object.entries(sandboxEnv)) {
    // The engine refuses such a variable when it creates the container, and that failure read as an
    // engine that cannot run containers, which callers retry (review, session 34).
    if (key === "" || key.includes("=") || key.includes("\0"))
      throw usageError(
        `env has a variable named ${JSON.stringify(key)}: a name may not be empty nor hold "=" or a NUL byte.`,
        "Name each variable as the shell would (letters, digits and _).",
      );
    if (typeof value !== "string" || value.includes("\0"))
      throw usageError(
        `env's ${key} ${typeof value === "string" ? "holds a NUL byte, which no process's environment can carry" : `is ${value === null ? "null" : typeof value}, not a string`}.`,
        "Pass each variable's value as text without NUL bytes (undefined removes one an earlier layer set).",
      );
    if (RESERVED_ENV.test(key))
      throw usageError(`env may not set ${key}: sandbox-run sets it inside the sandbox.`, `Remove ${key} from env.`);
  }

  const model = run.model ?? config.model ?? hostEnv.SANDBOX_RUN_MODEL;
  if (!model?.includes("/")) {
    throw usageError(
      model ? `Model "${model}" is not of the form provider/id.` : "No model was given.",
      "Pass a model as provider/id (e.g. --model anthropic/claude-sonnet-4-5), or set SANDBOX_RUN_MODEL.",
    );
  }

  const mode: SandboxMode = run.sandbox ?? config.sandbox ?? "workspace-write";
  if (!SANDBOX_MODES.includes(mode)) {
    throw usageError(`Unknown sandbox mode "${mode}".`, "Use read-only, workspace-write or danger-full-access.");
  }
  const policySource = run.policy ?? config.policy ?? mode;
  // A policy object gets the same validation as a policy file: a typo must not silently drop
  // a limit (Docker reads a NaN memory or a negative pids limit as "unlimited").
  let policy =
    typeof policySource === "string"
      ? loadPolicy(policySource)
      : parsePolicy(policySource, "object (the policy option)");
  // Pi's events carry the prompt whole (the user message, then the whole conversation at its end),
  // and one event line is bounded by maxLineMb: a prompt past half of it started a sandbox and then
  // failed as "runaway tool output" (review, session 33).
  const lineMb = policy.limits.maxLineMb;
  if (Buffer.byteLength(prompt) > (lineMb * 1024 * 1024) / 2)
    throw usageError(
      `The prompt is ${(Buffer.byteLength(prompt) / 1048576).toFixed(1)} MiB, more than half of limits.maxLineMb (${lineMb} MiB): Pi's events carry it whole, and one event line is bounded by that limit.`,
      "Put the material in a file in the workspace and name it in the prompt, or raise limits.maxLineMb in a policy file.",
    );
  const runtime = run.runtime ?? config.runtime;
  const contextFiles = run.contextFiles ?? config.contextFiles;
  if (runtime || contextFiles !== undefined) {
    policy = { ...policy, runtime: runtime ?? policy.runtime, contextFiles: contextFiles ?? policy.contextFiles };
  }
  // Folded into the policy like the runtime, so a run record (and its replay) keeps it.
  const platformAsked = run.platform ?? config.platform;
  const platform = platformAsked
    ? parsePlatform(platformAsked, "The platform option")
    : (policy.platform ??
      (hostEnv.SANDBOX_RUN_PLATFORM ? parsePlatform(hostEnv.SANDBOX_RUN_PLATFORM, "SANDBOX_RUN_PLATFORM") : undefined));
  if (platform && platform !== policy.platform) policy = { ...policy, platform };

  const cwd =
    purpose === "shape"
      ? shapeCwd(run.cwd ?? config.cwd)
      : canonicalDirectory(run.cwd ?? config.cwd ?? process.cwd(), ROLES.cwd, true);
  const writableRoots = (run.additionalWritableDirectories ?? config.additionalWritableDirectories ?? []).map((d) =>
    canonicalDirectory(d, ROLES.writable, true),
  );
  if (writableRoots.length > 0 && !policy.writableRoots) {
    throw usageError(
      `Policy ${policy.name} does not allow extra writable directories.`,
      "Drop the writable directories, or use workspace-write (or a policy with writableRoots: true).",
    );
  }
  const readOnlyMounts = policy.readOnlyMounts.map((d) => canonicalDirectory(d, ROLES.readOnly, false));
  // Judged as they land in the image too: a target through one of its links lands at the link's target.
  checkOverlaps([cwd, ...writableRoots, ...readOnlyMounts].map(throughImageLinks));
  checkSecretFiles(policy.secrets, [cwd, ...writableRoots, ...readOnlyMounts]);
  const workspacePath = sandboxWorkspacePath(run.workspacePath ?? config.workspacePath, cwd);
  if (workspacePath) checkOverlaps([workspacePath, ...writableRoots, ...readOnlyMounts].map(throughImageLinks));

  const schema = run.schema ?? config.schema;
  const validator = schema ? compileSchema(schema) : undefined;
  const extraArgs = run.extraArgs ?? config.extraArgs ?? [];
  checkExtraArgs(extraArgs);

  const modelsSource = run.models ?? config.models;
  const modelsJson = typeof modelsSource === "string" ? readModelsFile(modelsSource) : modelsSource;
  const untrustedConfig = checkConfigOrigins(
    {
      policy: typeof policySource === "string" && !isNamedPolicy(policySource) ? policySource : undefined,
      models: typeof modelsSource === "string" ? modelsSource : undefined,
      // Field by field: a call's `engines: undefined` (a wrapper forwarding its own option) must not
      // hide the agent's engines file from this check (review, session 27).
      schema: run.configFiles?.schema ?? config.configFiles?.schema,
      prompt: run.configFiles?.prompt ?? config.configFiles?.prompt,
      engines: run.configFiles?.engines ?? config.configFiles?.engines,
    },
    [cwd, ...writableRoots],
    modelsJson,
    {
      strict:
        run.refuseWorkspaceConfig ??
        config.refuseWorkspaceConfig ??
        hostEnv.SANDBOX_RUN_REFUSE_WORKSPACE_CONFIG === "1",
      allow:
        run.allowWorkspaceConfig ?? config.allowWorkspaceConfig ?? hostEnv.SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG === "1",
    },
  );
  const warnings = [...untrustedConfig];
  if (validator?.uncheckedFormats.length)
    warnings.push(
      `the schema names formats the host does not know and so does not check: ${validator.uncheckedFormats.map((f) => JSON.stringify(f)).join(", ")} (it checks date-time, date, time, duration, email, idn-email, hostname, idn-hostname, ipv4, ipv6, uri, uri-reference, iri, iri-reference, uuid, uri-template, json-pointer, relative-json-pointer, regex and a few more; a typo?)`,
    );

  const timeoutMs = run.timeoutMs ?? config.timeoutMs ?? policy.limits.timeoutSeconds * 1000;
  // A string ("5000", straight from process.env) passed the comparisons and failed deep in the plan.
  if (typeof timeoutMs !== "number")
    throw usageError(
      `Timeout must be a number of milliseconds, got ${JSON.stringify(timeoutMs)} (${typeof timeoutMs}).`,
      "Pass timeoutMs as a number (Number(process.env.X) for a variable).",
    );
  if (!(timeoutMs > 0)) throw usageError(`Timeout must be positive, got ${timeoutMs} ms.`, "Pass a positive timeout.");
  if (timeoutMs > MAX_TIMEOUT_SECONDS * 1000) {
    throw usageError(
      `Timeout ${timeoutMs} ms is longer than a run may last (${MAX_TIMEOUT_SECONDS} s, a day).`,
      "Pass a timeout of at most a day; split longer work into several runs.",
    );
  }

  // The turn budget always has a value: the policy's (limits.maxTurns) unless the call names one.
  const budgets = {
    maxCostUsd: run.maxCostUsd ?? config.maxCostUsd,
    maxTurns: run.maxTurns ?? config.maxTurns ?? policy.limits.maxTurns,
  };
  if (budgets.maxCostUsd !== undefined && !(typeof budgets.maxCostUsd === "number" && budgets.maxCostUsd > 0)) {
    throw usageError(`The cost budget must be a positive number of dollars, got ${budgets.maxCostUsd}.`);
  }
  if (budgets.maxTurns !== undefined && !(Number.isInteger(budgets.maxTurns) && budgets.maxTurns > 0)) {
    throw usageError(`The turn budget must be a positive whole number, got ${budgets.maxTurns}.`);
  }

  const routing = planProviderRouting({
    model,
    modelsJson,
    env: hostEnv,
    gatewayBaseUrl: `http://127.0.0.1:${GATEWAY_PORT}`,
  });
  const image = run.image ?? config.image ?? policy.image ?? (hostEnv.SANDBOX_RUN_IMAGE || undefined);
  const workspaceMode = (run.workspaceMode ??
    config.workspaceMode ??
    policy.workspaceMode ??
    (hostEnv.SANDBOX_RUN_WORKSPACE || undefined)) as WorkspaceMode | undefined;
  if (workspaceMode !== undefined && !WORKSPACE_MODES.includes(workspaceMode)) {
    throw usageError(
      `Unknown workspace mode "${workspaceMode}".`,
      "Use bind or copy (--workspace, or SANDBOX_RUN_WORKSPACE).",
    );
  }

  const handBack = resolveHandBack(run.handBack ?? config.handBack ?? policy.handBack ?? "apply", {
    policy,
    writableRoots,
    workspaceMode,
  });
  // Lending the git directory too is advice for an apply hand-back only: branch and patch refuse writable roots.
  const gitOutside = gitDirOutsideWarning(cwd, [cwd, ...writableRoots, ...readOnlyMounts], {
    mayLend: handBack === "apply",
  });
  if (gitOutside) warnings.push(gitOutside);
  // branch and patch: the sandbox works on a copy, never on the working tree (a read-only
  // workspace brings nothing back, so it keeps whatever mode it has).
  const effectiveMode = handBack !== "apply" && policy.workspace === "read-write" ? "copy" : workspaceMode;
  // What the sandbox may write and the host keeps: a branch or patch leaves the working tree as it is.
  if (purpose === "call")
    refuseOwnInstallationIn([
      ...(policy.workspace === "read-write" && handBack === "apply" ? [cwd] : []),
      ...writableRoots,
    ]);

  return {
    prompt,
    cwd,
    ...(workspacePath ? { workspacePath } : {}),
    writableRoots,
    readOnlyMounts,
    model,
    schema,
    validator,
    policy,
    hostEnv,
    sandboxEnv,
    modelsJson,
    timeoutMs,
    extraArgs,
    budgets,
    routing,
    image,
    warnings,
    untrustedConfig,
    workspaceMode: effectiveMode,
    handBack,
  };
}

/**
 * Refuses a run whose sandbox may write sandbox-run's own code, policies and image context, its
 * dependencies or its Node (util/own-installation.ts): the next call, and this process's later
 * ones, would run what the sandbox left there.
 */
function refuseOwnInstallationIn(writable: readonly string[]): void {
  if (writable.length === 0) return;
  const { packageRoot, folders } = ownInstallation();
  for (const folder of folders)
    for (const tree of writable) {
      const holds = atOrBelow(folder, tree);
      if (!holds && !atOrBelow(tree, folder)) continue;
      throw usageError(
        holds
          ? `sandbox-run runs from ${packageRoot}${folder === packageRoot ? "" : ` and loads code from ${folder}`}, ${folder === tree ? "" : `which lies inside ${tree}, `}a folder this run lets the sandbox write: the sandbox could change sandbox-run itself (its code, its built-in policies, the runner image it builds), what it loads or the Node running it, and your next call would run that.`
          : `sandbox-run runs from ${packageRoot}, and ${tree}, a folder this run lets the sandbox write, lies inside ${folder}, where it loads code from: the sandbox could change what sandbox-run loads, and your next call would run that.`,
        INSTALL_OUTSIDE,
      );
    }
  // How the caller started it, which the next start goes through again (review, session 26).
  for (const launch of launchPaths()) {
    const tree = writable.find((t) => passesThrough(launch.path, [t]));
    if (tree === undefined) continue;
    throw usageError(
      launch.how === "package-manager"
        ? `sandbox-run was started through a package manager (npx, npm run, yarn or pnpm) in ${launch.path}, inside ${tree}, a folder this run lets the sandbox write: the package manager takes sandbox-run, node and their options from that project's node_modules/.bin and .npmrc, which the sandbox could change for your next call.`
        : launch.how === "preload"
          ? `Node preloads ${launch.path} into sandbox-run (--require, --import or --loader, from NODE_OPTIONS or the command line; a package name is looked up in node_modules of the working directory and the folders above it), inside ${tree}, a folder this run lets the sandbox write: the sandbox could change it for your next call. Start sandbox-run from a folder outside that tree (--cwd names the workspace), or preload by an absolute path outside it.`
          : `sandbox-run was started as ${launch.path}, inside ${tree}, a folder this run lets the sandbox write: the sandbox could change what your next call starts.`,
      INSTALL_OUTSIDE,
    );
  }
}

const INSTALL_OUTSIDE =
  "Install sandbox-run outside the folders it runs on (npm install -g sandbox-run, or into a tools folder of its own) and start it directly, not through npx, npm run, yarn or pnpm in the project it runs on; or bring the changes back as a branch or patch (--hand-back branch), or run read-only.";

/** The hand-back mode, checked against what else the run asks for. */
function resolveHandBack(
  mode: string,
  context: { policy: Policy; writableRoots: string[]; workspaceMode?: WorkspaceMode },
): HandBackMode {
  if (!(HAND_BACK_MODES as readonly string[]).includes(mode)) {
    throw usageError(`Unknown hand-back mode "${mode}".`, "Use apply, branch or patch (--hand-back).");
  }
  const handBack = mode as HandBackMode;
  if (handBack === "apply") return handBack;
  // Before the read-only return: with a read-only workspace the writable directories' checked
  // changes were dropped without a word (review, session 25).
  if (context.writableRoots.length > 0) {
    throw usageError(
      `Hand-back "${handBack}" covers the workspace only, and extra writable directories were given (${context.writableRoots.join(", ")}).`,
      'Drop the writable directories, or use hand-back "apply".',
    );
  }
  if (context.policy.workspace === "read-only") return handBack;
  if (context.workspaceMode === "bind") {
    throw usageError(
      `Hand-back "${handBack}" cannot use the bind workspace mode: the sandbox would write the working tree itself.`,
      `Drop --workspace bind (or SANDBOX_RUN_WORKSPACE, or the policy's workspaceMode): "${handBack}" runs in copy mode.`,
    );
  }
  return handBack;
}

/**
 * Config files inside the trees the run sandboxes. A policy, models or engines file there (or a
 * file an engines file names) is refused unless the caller allows it: it sets the boundary and
 * where the keys go. A schema or prompt file is a warning. Strict mode refuses every one. A
 * models file in there may never run a command on the host, allowed or not.
 */
function checkConfigOrigins(
  files: ConfigFiles,
  roots: string[],
  modelsJson: unknown,
  mode: { strict: boolean; allow: boolean },
): string[] {
  const { strict } = mode;
  const inside = configInsideRoots(files, roots);
  refuseLinksOut(inside);
  const models = inside.find((i) => i.what === "models");
  if (models && modelsJsonHasCommands(modelsJson)) {
    throw usageError(
      `The models file ${models.file} lies inside ${models.root}, which this run sandboxes, and holds "!command" values: sandbox-run never runs commands from such a file.`,
      "Keep the models file outside the workspace (e.g. in the CI job's own checkout), or use $VARIABLE references instead of commands.",
    );
  }
  if (inside.length > 0 && strict) {
    throw usageError(
      `Refusing configuration from inside the sandboxed trees: ${inside.map(describeInside).join("; ")}.`,
      "Read the policy, models, schema, prompt and engines file from a trusted place (the base branch, the CI job's own files), not from the change under test.",
    );
  }
  const boundary = inside.filter((i) => i.what === "policy" || i.what === "models" || i.what === "engines");
  if (boundary.length > 0 && !mode.allow) {
    // The hint's first step by what was refused: a built-in policy does not help with a models or
    // engines file (review, session 31).
    const policyRefused = boundary.some((i) => i.what === "policy");
    const first = policyRefused
      ? "Name a policy that ships with sandbox-run (--policy read-only, workspace-write, npm-install, pr-fix) or read the file"
      : "Read the file";
    throw usageError(
      `Refusing configuration from inside the sandboxed trees: ${boundary.map(describeInside).join("; ")}.`,
      `${first} from a place the tree under test cannot change (your home, the CI job's own checkout); if you wrote that tree yourself and trust it, pass --allow-workspace-config (or SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG=1).`,
    );
  }
  return inside.map(describeInside);
}

/** How each kind of folder is named, for the hint of a link that leads out of its folder. */
const ROLES = {
  cwd: { what: "cwd", nameIt: (f: string) => `--cwd ${f}` },
  writable: { what: "writable directory", nameIt: (f: string) => `--writable ${f}` },
  readOnly: { what: "read-only mount", nameIt: (f: string) => `${f} in the policy's readOnlyMounts` },
} satisfies Record<string, FolderRole>;

/**
 * The folders a run mounts, checked again once it holds its trees (container-pi-agent.ts): between
 * its plan and that moment another run's sandbox may have changed a tree they lie in (a batch's
 * task on `.` put a link where `services/` was, and the next task's `services/lib` led to /usr/lib).
 * Each must still be the folder planned, reached through no link.
 */
export function recheckFolders(run: Pick<ResolvedRun, "cwd" | "writableRoots" | "readOnlyMounts">): void {
  const folders: Array<[string, FolderRole]> = [
    [run.cwd, ROLES.cwd],
    ...run.writableRoots.map((d): [string, FolderRole] => [d, ROLES.writable]),
    ...run.readOnlyMounts.map((d): [string, FolderRole] => [d, ROLES.readOnly]),
  ];
  for (const [planned, role] of folders) {
    const now = realFolder(planned, role);
    if (now !== planned)
      throw usageError(
        `The ${role.what} ${planned} changed while this run waited for another run on the same trees: it now leads to ${now}.`,
        "Check what the earlier run left in that tree, then run this one again.",
      );
  }
}

/**
 * A folder as the caller gave it: a string, or a `file:` URL (`new URL(".", import.meta.url)`);
 * anything else (a Buffer, a number) is refused by name rather than failing as a TypeError.
 */
function folderText(given: unknown, what: string): string {
  if (typeof given === "string") return given;
  if (given instanceof URL && given.protocol === "file:") return fileURLToPath(given);
  throw usageError(
    `The ${what} must be a path (a string or a file: URL), not ${given === null ? "null" : given instanceof URL ? `a ${given.protocol} URL` : Buffer.isBuffer(given) ? "a Buffer" : typeof given}.`,
    "Pass the directory's path as text.",
  );
}

/**
 * The real path of a folder to mount: links on the way must stay inside their folder; trees the
 * sandbox may hold (`lent`: the workspace, writable directories) are never the host's own.
 */
function canonicalDirectory(given: string, role: FolderRole, lent: boolean): string {
  const what = role.what;
  const input = folderText(given, what);
  // path.resolve("") is the process's folder: an unset variable (`--writable "$CACHE_DIR"`) lent it (review, session 33).
  if (input.trim() === "")
    throw usageError(`The ${what} is empty.`, "Pass a directory (an empty value is not taken for the current one).");
  const real = realFolder(path.resolve(input), role);
  if (!fs.statSync(real).isDirectory()) {
    throw usageError(`The ${what} ${real} is not a directory.`, "Pass a directory, not a file.");
  }
  if (FORBIDDEN_EXACT.includes(real) || FORBIDDEN_TREES.some((t) => real === t || real.startsWith(`${t}/`))) {
    throw usageError(
      `The ${what} ${real} cannot be mounted: it is ${real === "/" ? "the root of the host" : "a system path the sandbox needs for itself"}.`,
      "Pass a project directory instead.",
    );
  }
  const problem = lent ? lentFolderProblem(real) : readOnlyFolderProblem(real);
  if (problem)
    throw usageError(
      `The ${what} ${real} ${problem}.`,
      /run folders/.test(problem)
        ? "Pass a project directory instead, or point TMPDIR at a folder outside it (sandbox-run keeps its run folders there)."
        : /your home's tools/.test(problem)
          ? "Pass a project directory instead; for a tool's cache, give the run a folder of its own outside your home's dot-folders (e.g. --writable /var/tmp/pip-cache with PIP_CACHE_DIR=/var/tmp/pip-cache in its environment)."
          : "Pass a project directory instead.",
    );
  const replaceable = othersMayReplace(real);
  if (replaceable)
    throw usageError(
      `The ${what} ${real} ${replaceable.dir === real ? "is a folder that" : `lies in ${replaceable.dir}, which`} ${replaceable.why}: another user could replace the ${what} with a link between sandbox-run's checks and the container's start, and the sandbox would get where the link leads.`,
      replaceable.owner
        ? `Use a copy of your own (cp -a it into a folder of yours), or run sandbox-run as that folder's owner.`
        : `Move the ${what} into a folder only you and root can change, or take the others' write access away (chmod o-w ${replaceable.dir}; chmod +t for a shared folder such as /tmp).`,
    );
  return real;
}

/** The sandbox-side workspace path, checked like a mount target; undefined when it is the host path. */
/**
 * A warm pool's template lends no tree (a warm sandbox's workspace is WARM_PATHS.workspace whatever
 * the host folder), so its shape does not hang on the process's folder: a service started in `/`
 * (systemd's default) failed to shape its pool (review, session 30). The agent's own cwd, when it
 * names one, is checked as a call's; without one a path that overlaps no tree stands in.
 */
function shapeCwd(configured: string | undefined): string {
  return configured === undefined ? SHAPE_CWD : canonicalDirectory(configured, ROLES.cwd, true);
}
const SHAPE_CWD = "/nonexistent/sandbox-run-warm-shape";

function sandboxWorkspacePath(requested: string | undefined, cwd: string): string | undefined {
  if (requested === undefined || requested === cwd) return undefined;
  if (!path.posix.isAbsolute(requested) || path.posix.normalize(requested).replace(/\/+$/, "") !== requested) {
    throw usageError(
      `The workspace path ${JSON.stringify(requested)} is not an absolute, normalised path.`,
      'Pass a path such as "/workspace" (no "..", no trailing slash).',
    );
  }
  // Besides the sandbox's own paths, none of the image's system trees: a record (replay) names this
  // path. Judged as the image resolves it too: its links (/var/run -> /run) would otherwise carry a
  // name past the list, onto the folder of the run's sockets.
  const trees = [...FORBIDDEN_TREES, "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/run", "/boot"];
  const inImage = throughImageLinks(requested);
  if (
    [requested, inImage].some((p) => FORBIDDEN_EXACT.includes(p) || trees.some((t) => p === t || p.startsWith(`${t}/`)))
  ) {
    throw usageError(
      `The workspace cannot appear at ${requested} inside the sandbox: the sandbox needs that path for itself.`,
      'Pass a project path such as "/workspace" instead.',
    );
  }
  return requested;
}

/** Links in the runner image's tree (Debian's: usr-merge, /var/run and /var/lock into /run, the mail spool). */
const IMAGE_LINKS: ReadonlyArray<[string, string]> = [
  ["/var/run", "/run"],
  ["/var/lock", "/run/lock"],
  ["/var/spool/mail", "/var/mail"],
  ["/bin", "/usr/bin"],
  ["/sbin", "/usr/sbin"],
  ["/lib", "/usr/lib"],
  ["/lib64", "/usr/lib64"],
];

/** `p` with a leading image link replaced by its target (absolute, normalised input). */
function throughImageLinks(p: string): string {
  for (const [link, target] of IMAGE_LINKS) {
    if (p === link || p.startsWith(`${link}/`)) return target + p.slice(link.length);
  }
  return p;
}

function checkOverlaps(paths: string[]): void {
  for (let i = 0; i < paths.length; i++) {
    for (let j = i + 1; j < paths.length; j++) {
      const a = paths[i]!;
      const b = paths[j]!;
      // By identity too: a bind mount makes two names one folder.
      if (treesOverlapOnDisk(a, b)) {
        throw usageError(
          `The mounted directories ${a} and ${b} overlap.`,
          "Pass directories that are neither equal nor inside one another (the workspace is mounted already).",
        );
      }
    }
  }
}

function readModelsFile(file: string): unknown {
  return readConfigJson(file, "models", "Pass the path of a Pi models.json file.");
}
