// Plans how Pi inside the sandbox reaches its model providers through the host-side model
// gateway. Pure apart from running models.json `!command` values (on the host, with a timeout)
// for the selected provider.
//
// Inputs: the selected "provider/model", the caller's Pi models.json and the host environment.
// Outputs:
// - the gateway routes (upstream base URL, Pi api, the real credential headers),
// - the models.json Pi inside gets: every routed provider points at the gateway and carries a
//   placeholder key; headers are gone, so no secret enters the container,
// - the names of all environment variables that hold provider credentials, which the caller
//   must never forward into the sandbox.
//
// Verified against Pi 1.6.0 (@earendil-works/pi-ai dist/providers/*.js, dist/env-api-keys.js,
// pi-coding-agent dist/core/provider-composer.js and requests captured from the real CLI):
// a models.json entry `{ baseUrl, apiKey }` for a built-in provider keeps its built-in models
// and moves all of them to the new base URL; `apiKey` there wins over environment variables.
import { z } from "zod";
import { usageError } from "../errors.js";
import { configValueEnvNames, resolveConfigValue, type ConfigEnv } from "./config-value.js";
import { SUPPORTED_GATEWAY_APIS, isSupportedGatewayApi } from "./api-paths.js";
import type { GatewayRoute } from "./model-gateway.js";

export interface ProviderRoutingInput {
  /** "provider/id" selected for the run. */
  model: string;
  /** The caller's Pi models.json (parsed), optional. */
  modelsJson?: unknown;
  /** Host-side environment used for key lookup (and for `!command` values). */
  env: Record<string, string | undefined>;
  /** "http://127.0.0.1:18080" (what Pi inside sees). */
  gatewayBaseUrl: string;
  /** Timeout for models.json `!command` values; Pi's own is 10 s. */
  commandTimeoutMs?: number;
}

export interface ProviderRouting {
  routes: GatewayRoute[];
  /** What Pi inside gets: baseUrl -> gateway, apiKey -> placeholder, headers removed. */
  containerModelsJson: { providers: Record<string, unknown> };
  /** Env var names that hold credentials (must never be forwarded into the sandbox). */
  credentialEnvNames: string[];
  /** The route the selected model's requests take. */
  selectedRouteId: string;
}

/** The API key Pi inside the sandbox sees; the gateway strips it. */
export const SANDBOX_PLACEHOLDER_API_KEY = "sandbox-run-placeholder";
/**
 * Placeholder used when the real Anthropic credential is an OAuth token: Pi switches the
 * request shape (Bearer auth, oauth betas, Claude Code identity) when the key contains
 * "sk-ant-oat", so the container's placeholder has to trigger the same switch.
 */
export const ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY = "sk-ant-oat01-sandbox-run-placeholder";
const ANTHROPIC_OAUTH_MARKER = "sk-ant-oat";

type CredentialStyle = "bearer" | "x-api-key" | "x-goog-api-key";

interface BuiltinProvider {
  baseUrl: string;
  api: string;
  /** Env vars holding an API key, in Pi's lookup order. */
  envVars: string[];
}

/**
 * Built-in Pi providers the gateway can carry. Base URL, api and key variables are copied from
 * @earendil-works/pi-ai 1.6.0 (providers/<id>.js and providers/data/<id>.json: every model of
 * these providers shares that one base URL and api).
 */
export const BUILTIN_PROVIDERS: Readonly<Record<string, BuiltinProvider>> = Object.freeze({
  anthropic: {
    baseUrl: "https://api.anthropic.com",
    api: "anthropic-messages",
    // ANTHROPIC_AUTH_TOKEN is handled first and separately (Authorization: Bearer).
    envVars: ["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
  },
  openai: { baseUrl: "https://api.openai.com/v1", api: "openai-responses", envVars: ["OPENAI_API_KEY"] },
  xai: { baseUrl: "https://api.x.ai/v1", api: "openai-responses", envVars: ["XAI_API_KEY"] },
  groq: { baseUrl: "https://api.groq.com/openai/v1", api: "openai-completions", envVars: ["GROQ_API_KEY"] },
  cerebras: { baseUrl: "https://api.cerebras.ai/v1", api: "openai-completions", envVars: ["CEREBRAS_API_KEY"] },
  deepseek: { baseUrl: "https://api.deepseek.com", api: "openai-completions", envVars: ["DEEPSEEK_API_KEY"] },
  together: { baseUrl: "https://api.together.ai/v1", api: "openai-completions", envVars: ["TOGETHER_API_KEY"] },
  nvidia: { baseUrl: "https://integrate.api.nvidia.com/v1", api: "openai-completions", envVars: ["NVIDIA_API_KEY"] },
  huggingface: { baseUrl: "https://router.huggingface.co/v1", api: "openai-completions", envVars: ["HF_TOKEN"] },
  moonshotai: { baseUrl: "https://api.moonshot.ai/v1", api: "openai-completions", envVars: ["MOONSHOT_API_KEY"] },
  mistral: { baseUrl: "https://api.mistral.ai", api: "mistral-conversations", envVars: ["MISTRAL_API_KEY"] },
  google: {
    baseUrl: "https://generativelanguage.googleapis.com/v1beta",
    api: "google-generative-ai",
    envVars: ["GEMINI_API_KEY"],
  },
});

const ANTHROPIC_AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN";

/**
 * API-key variables of Pi 1.6.0's other built-in providers (pi-ai dist/env-api-keys.js). They
 * cannot be routed as built-ins (mixed endpoints or APIs the gateway does not police), but
 * models.json may define models under their ids, and then Pi uses these keys.
 */
const OTHER_BUILTIN_KEY_ENV: Readonly<Record<string, string[]>> = Object.freeze({
  "amazon-bedrock": [],
  "ant-ling": ["ANT_LING_API_KEY"],
  azure: ["AZURE_OPENAI_API_KEY"],
  baseten: ["BASETEN_API_KEY"],
  "cloudflare-ai-gateway": ["CLOUDFLARE_API_KEY"],
  "cloudflare-workers-ai": ["CLOUDFLARE_API_KEY"],
  fireworks: ["FIREWORKS_API_KEY"],
  "github-copilot": ["COPILOT_GITHUB_TOKEN"],
  "google-vertex": ["GOOGLE_CLOUD_API_KEY"],
  "kimi-coding": ["KIMI_API_KEY"],
  meta: ["META_API_KEY"],
  minimax: ["MINIMAX_API_KEY"],
  "minimax-cn": ["MINIMAX_CN_API_KEY"],
  "moonshotai-cn": ["MOONSHOT_API_KEY"],
  "openai-codex": [],
  opencode: ["OPENCODE_API_KEY"],
  "opencode-go": ["OPENCODE_API_KEY"],
  openrouter: ["OPENROUTER_API_KEY"],
  "qwen-token-plan": ["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
  "qwen-token-plan-cn": ["QWEN_TOKEN_PLAN_TEAM_CN_API_KEY", "QWEN_TOKEN_PLAN_CN_API_KEY"],
  "qwen-token-plan-individual": ["QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
  "qwen-token-plan-individual-cn": ["QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY", "QWEN_TOKEN_PLAN_CN_API_KEY"],
  radius: ["RADIUS_API_KEY"],
  typesafe: ["TYPESAFE_API_KEY"],
  "vercel-ai-gateway": ["AI_GATEWAY_API_KEY"],
  xiaomi: ["XIAOMI_API_KEY"],
  "xiaomi-token-plan-ams": ["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
  "xiaomi-token-plan-cn": ["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
  "xiaomi-token-plan-sgp": ["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
  zai: ["ZAI_API_KEY"],
  "zai-coding-cn": ["ZAI_CODING_CN_API_KEY"],
});

/**
 * Every environment variable Pi 1.6.0 reads provider credentials from
 * (pi-ai dist/env-api-keys.js and the provider auth modules). None may enter the sandbox.
 */
export const PI_CREDENTIAL_ENV_NAMES: readonly string[] = Object.freeze([
  "AI_GATEWAY_API_KEY",
  "ANT_LING_API_KEY",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "ANTHROPIC_FEDERATION_RULE_ID",
  "ANTHROPIC_IDENTITY_TOKEN_FILE",
  "ANTHROPIC_OAUTH_TOKEN",
  "ANTHROPIC_ORGANIZATION_ID",
  "ANTHROPIC_SERVICE_ACCOUNT_ID",
  "ANTHROPIC_WORKSPACE_ID",
  "AWS_ACCESS_KEY_ID",
  "AWS_BEARER_TOKEN_BEDROCK",
  "AWS_CONTAINER_CREDENTIALS_FULL_URI",
  "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
  "AWS_PROFILE",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_WEB_IDENTITY_TOKEN_FILE",
  "AZURE_OPENAI_API_KEY",
  "BASETEN_API_KEY",
  "CEREBRAS_API_KEY",
  "CLOUDFLARE_API_KEY",
  "COPILOT_GITHUB_TOKEN",
  "DEEPSEEK_API_KEY",
  "FIREWORKS_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "GOOGLE_CLOUD_API_KEY",
  "GROQ_API_KEY",
  "HF_TOKEN",
  "KIMI_API_KEY",
  "META_API_KEY",
  "MINIMAX_API_KEY",
  "MINIMAX_CN_API_KEY",
  "MISTRAL_API_KEY",
  "MOONSHOT_API_KEY",
  "NVIDIA_API_KEY",
  "OPENAI_API_KEY",
  "OPENCODE_API_KEY",
  "OPENROUTER_API_KEY",
  "QWEN_TOKEN_PLAN_API_KEY",
  "QWEN_TOKEN_PLAN_CN_API_KEY",
  "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
  "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
  "QWEN_TOKEN_PLAN_TEAM_API_KEY",
  "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
  "RADIUS_API_KEY",
  "TOGETHER_API_KEY",
  "TYPESAFE_API_KEY",
  "XAI_API_KEY",
  "XIAOMI_API_KEY",
  "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
  "XIAOMI_TOKEN_PLAN_CN_API_KEY",
  "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
  "ZAI_API_KEY",
  "ZAI_CODING_CN_API_KEY",
]);

// ---------------------------------------------------------------------------------------------
// models.json shape (only the fields routing depends on are checked; the rest passes through).

const httpUrl = z.string().refine((value) => {
  try {
    const url = new URL(value);
    return (url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password;
  } catch {
    return false;
  }
}, "must be an absolute http(s) URL without credentials");
const headerRecord = z.record(z.string(), z.string());
const modelSchema = z.looseObject({
  id: z.string().min(1),
  api: z.string().min(1).optional(),
  baseUrl: httpUrl.optional(),
  headers: headerRecord.optional(),
});
const providerSchema = z.looseObject({
  baseUrl: httpUrl.optional(),
  api: z.string().min(1).optional(),
  apiKey: z.string().optional(),
  headers: headerRecord.optional(),
  authHeader: z.boolean().optional(),
  models: z.array(modelSchema).optional(),
  modelOverrides: z.record(z.string(), z.looseObject({ headers: headerRecord.optional() })).optional(),
});
const modelsJsonSchema = z.looseObject({ providers: z.record(z.string(), providerSchema).optional() });

type ProviderConfig = z.infer<typeof providerSchema>;
type ModelConfig = z.infer<typeof modelSchema>;

function parseModelsJson(value: unknown): Record<string, ProviderConfig> {
  if (value === undefined || value === null) return {};
  const result = modelsJsonSchema.safeParse(value);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "(root)";
      return `${where}: ${issue.message}`;
    });
    throw usageError(
      `Invalid models.json:\n${lines.join("\n")}`,
      "Fix the listed fields; Pi's docs/models-configuration.md describes every field.",
    );
  }
  return result.data.providers ?? {};
}

// ---------------------------------------------------------------------------------------------

interface ProviderCredentials {
  /** Resolved API key, if any. */
  apiKey?: string;
  /** Headers implied by the credential source itself (ANTHROPIC_AUTH_TOKEN). */
  authHeaders: Record<string, string>;
  /** Resolved provider-level headers from models.json. */
  headers: Record<string, string>;
  authHeader: boolean;
  /** False when a configured credential could not be resolved (non-selected providers only). */
  usable: boolean;
}

export function planProviderRouting(input: ProviderRoutingInput): ProviderRouting {
  const gatewayBase = parseGatewayBase(input.gatewayBaseUrl);
  const { providerId: selectedProvider, modelId: selectedModel } = parseModelRef(input.model);
  const providers = parseModelsJson(input.modelsJson);
  const env: ConfigEnv = input.env;

  const selectedConfig = Object.hasOwn(providers, selectedProvider) ? providers[selectedProvider] : undefined;
  const selectedBuiltin = builtinOf(selectedProvider);
  if (!selectedConfig && !selectedBuiltin) {
    if (Object.hasOwn(OTHER_BUILTIN_KEY_ENV, selectedProvider)) {
      throw usageError(
        `Pi's built-in provider "${selectedProvider}" cannot be routed through the sandbox's model gateway`,
        `Use one of ${Object.keys(BUILTIN_PROVIDERS).join(", ")}, or define the model in models.json under "providers.${selectedProvider}" with "baseUrl", "api" (${SUPPORTED_GATEWAY_APIS.join(", ")}) and "models".`,
      );
    }
    throw usageError(
      `Unknown model provider "${selectedProvider}" (model "${input.model}")`,
      `Use a built-in provider (${Object.keys(BUILTIN_PROVIDERS).join(", ")}) or define "${selectedProvider}" under "providers" in models.json.`,
    );
  }

  const routes: GatewayRoute[] = [];
  const usedRouteIds = new Set<string>();
  const containerProviders: Record<string, unknown> = {};
  const secrets = new Set<string>();
  let selectedRouteId: string | undefined;

  const providerIds = Object.keys(providers);
  if (!selectedConfig) providerIds.push(selectedProvider);

  for (const providerId of providerIds) {
    const selected = providerId === selectedProvider;
    const config: ProviderConfig = (Object.hasOwn(providers, providerId) ? providers[providerId] : undefined) ?? {};
    const builtin = builtinOf(providerId);
    const where = `providers.${providerId}`;

    for (const [overrideId, override] of Object.entries(config.modelOverrides ?? {})) {
      if (override.headers && Object.keys(override.headers).length > 0) {
        throw usageError(
          `models.json ${where}.modelOverrides.${overrideId}.headers: per-model header overrides cannot be carried by the sandbox's model gateway`,
          `Move these headers to ${where}.headers, or define the model under ${where}.models with its own "headers".`,
        );
      }
    }

    // The provider-level endpoint: built-in models keep their built-in api; the configured api
    // is the default only for models defined in models.json.
    const providerBase = config.baseUrl ?? builtin?.baseUrl;
    const providerApi = builtin ? builtin.api : config.api;
    const modelDefaultApi = config.api ?? builtin?.api;

    if (!builtin && !providerBase && (config.models ?? []).some((m) => !m.baseUrl)) {
      throw usageError(
        `models.json ${where}: "baseUrl" is required when defining custom models`,
        `Set ${where}.baseUrl or a "baseUrl" on every model.`,
      );
    }
    if (!builtin && (config.models?.length ?? 0) === 0) {
      if (selected) {
        throw usageError(
          `models.json ${where} defines no models`,
          `Add the model "${selectedModel}" to ${where}.models.`,
        );
      }
    }
    if (selected && !builtin && !(config.models ?? []).some((m) => m.id === selectedModel)) {
      throw usageError(
        `Model "${selectedModel}" is not defined for provider "${providerId}" in models.json`,
        Object.hasOwn(OTHER_BUILTIN_KEY_ENV, providerId)
          ? `Pi's built-in "${providerId}" models cannot be routed through the sandbox's model gateway; define the model under ${where}.models with "baseUrl" and "api".`
          : `Use one of: ${(config.models ?? []).map((m) => `${providerId}/${m.id}`).join(", ") || "(none)"}, or add it to ${where}.models.`,
      );
    }

    const mode: ResolveMode = {
      runCommands: selected,
      strict: selected,
      env,
      commandTimeoutMs: input.commandTimeoutMs,
    };
    const credentials = resolveProviderCredentials(providerId, config, builtin, mode);
    addSecrets(secrets, credentials.apiKey, credentials.authHeaders, credentials.headers);
    if (
      selected &&
      credentials.apiKey === undefined &&
      builtin &&
      !hasCredentialHeader({ ...credentials.authHeaders, ...credentials.headers })
    ) {
      const names =
        providerId === "anthropic"
          ? ["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", ANTHROPIC_AUTH_TOKEN_ENV]
          : builtin.envVars;
      throw usageError(
        `No API key for provider "${providerId}" (model "${input.model}")`,
        `Set ${names[0]}${names.length > 1 ? ` (or ${names.slice(1).join(" / ")})` : ""} in the environment sandbox-run runs in, or set ${where}.apiKey in models.json.`,
      );
    }

    // Routes, deduplicated by (upstream, api, headers) within the provider.
    const baseRouteId = uniqueRouteId(sanitizeRouteId(providerId), usedRouteIds);
    const routeByKey = new Map<string, string>();
    const addRoute = (upstreamBaseUrl: string, api: string, modelHeaders: Record<string, string>, suffix?: string) => {
      const headers = credentials.usable ? credentialHeaders(api, credentials, modelHeaders) : {};
      const key = JSON.stringify([upstreamBaseUrl, api, headers]);
      const existing = routeByKey.get(key);
      if (existing) return existing;
      const id =
        suffix === undefined ? baseRouteId : uniqueRouteId(`${baseRouteId}--${sanitizeRouteId(suffix)}`, usedRouteIds);
      usedRouteIds.add(id);
      routes.push({ id, upstreamBaseUrl, api, headers });
      routeByKey.set(key, id);
      return id;
    };

    let providerRouteId: string | undefined;
    if (providerBase && providerApi) {
      if (isSupportedGatewayApi(providerApi)) {
        providerRouteId = addRoute(providerBase, providerApi, {});
      } else if (selected && !(config.models ?? []).some((m) => m.id === selectedModel && m.api)) {
        throw unsupportedApi(where, providerApi);
      }
    }
    if (selected && !(config.models ?? []).some((m) => m.id === selectedModel)) selectedRouteId = providerRouteId;

    const containerModels: unknown[] = [];
    for (const [index, model] of (config.models ?? []).entries()) {
      const modelWhere = `${where}.models.${index}`;
      const api = model.api ?? modelDefaultApi;
      const base = model.baseUrl ?? providerBase;
      if (!api) {
        throw usageError(
          `models.json ${modelWhere} (${model.id}): no "api" specified`,
          `Set "api" on the model or on ${where} (one of ${SUPPORTED_GATEWAY_APIS.join(", ")}).`,
        );
      }
      if (!base) {
        throw usageError(
          `models.json ${modelWhere} (${model.id}): no "baseUrl"`,
          `Set ${where}.baseUrl or the model's "baseUrl".`,
        );
      }
      const isSelectedModel = selected && model.id === selectedModel;
      if (!isSupportedGatewayApi(api)) {
        if (isSelectedModel) throw unsupportedApi(modelWhere, api);
        continue; // unreachable inside the sandbox; leave it out
      }
      const modelHeaders = resolveHeaders(model.headers, `${modelWhere}.headers`, { ...mode, strict: isSelectedModel });
      if (modelHeaders === undefined) continue; // its headers cannot be resolved (yet): leave it out
      addSecrets(secrets, undefined, modelHeaders);
      const routeId = addRoute(base, api, modelHeaders, model.id);
      if (isSelectedModel) selectedRouteId = routeId;
      const { headers: _headers, ...rest } = model;
      containerModels.push(
        routeId === providerRouteId ? withoutKey(rest, "baseUrl") : { ...rest, baseUrl: `${gatewayBase}/${routeId}` },
      );
    }

    const { headers: _h, apiKey: _k, models: _m, modelOverrides, baseUrl: _b, ...providerRest } = config;
    const entry: Record<string, unknown> = { ...providerRest };
    if (providerRouteId) entry.baseUrl = `${gatewayBase}/${providerRouteId}`;
    if (credentials.usable) {
      entry.apiKey = credentials.apiKey?.includes(ANTHROPIC_OAUTH_MARKER)
        ? ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY
        : SANDBOX_PLACEHOLDER_API_KEY;
    }
    if (config.models) entry.models = containerModels;
    if (modelOverrides) {
      entry.modelOverrides = Object.fromEntries(
        Object.entries(modelOverrides).map(([id, override]) => [id, withoutKey(override, "headers")]),
      );
    }
    if (!providerRouteId && containerModels.length === 0) continue; // nothing reachable
    containerProviders[providerId] = entry;
  }

  if (!selectedRouteId) {
    // Defensive: every branch above either routes the selected model or throws.
    throw usageError(
      `Model "${input.model}" cannot be routed through the sandbox's model gateway`,
      "Check models.json for this provider.",
    );
  }

  const containerModelsJson = { providers: containerProviders };
  const serialized = JSON.stringify(containerModelsJson);
  for (const secret of secrets) {
    if (serialized.includes(secret)) {
      throw usageError(
        "A credential value from models.json also appears in a non-credential field",
        'Keep keys only in "apiKey" and "headers" (use "$NAME" references), not in names, ids, URLs or compat settings.',
      );
    }
  }

  return {
    routes,
    containerModelsJson,
    credentialEnvNames: credentialEnvNames(providers),
    selectedRouteId,
  };
}

// ---------------------------------------------------------------------------------------------

function builtinOf(providerId: string): BuiltinProvider | undefined {
  return Object.hasOwn(BUILTIN_PROVIDERS, providerId) ? BUILTIN_PROVIDERS[providerId] : undefined;
}

function parseModelRef(model: string): { providerId: string; modelId: string } {
  const slash = model.indexOf("/");
  const providerId = slash > 0 ? model.slice(0, slash) : "";
  const modelId = slash > 0 ? model.slice(slash + 1) : "";
  if (!providerId || !modelId) {
    throw usageError(
      `Model must be "provider/id", got ${JSON.stringify(model)}`,
      'Pass the provider and the model id, e.g. "anthropic/claude-sonnet-4-5" or "openai/gpt-5".',
    );
  }
  return { providerId, modelId };
}

function parseGatewayBase(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw usageError(`Invalid gateway base URL ${JSON.stringify(value)}`, 'Use e.g. "http://127.0.0.1:18080".');
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usageError(`Invalid gateway base URL ${JSON.stringify(value)}`, 'Use e.g. "http://127.0.0.1:18080".');
  }
  return value.replace(/\/+$/, "");
}

/** Route ids are the first path segment: [a-z0-9_-]+. */
export function sanitizeRouteId(value: string): string {
  const cleaned = value
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48);
  return cleaned || "provider";
}

function uniqueRouteId(candidate: string, used: Set<string>): string {
  const base = candidate === "__sandbox-run" ? "sandbox-run-provider" : candidate;
  if (!used.has(base)) return base;
  for (let n = 2; ; n++) {
    const next = `${base}-${n}`;
    if (!used.has(next)) return next;
  }
}

function unsupportedApi(where: string, api: string) {
  return usageError(
    `models.json ${where}: api "${api}" cannot be routed through the sandbox's model gateway`,
    `Use one of: ${SUPPORTED_GATEWAY_APIS.join(", ")}.`,
  );
}

interface ResolveMode {
  /** Run `!command` values (only for the selected provider: Pi runs them only when a request needs them). */
  runCommands: boolean;
  /** Throw a usage error instead of returning undefined when the value cannot be resolved. */
  strict: boolean;
  env: ConfigEnv;
  commandTimeoutMs?: number;
}

function resolveOne(raw: string, what: string, mode: ResolveMode): string | undefined {
  const result = resolveConfigValue(raw, mode);
  if (result.ok) return result.value;
  if (!mode.strict) return undefined;
  throw usageError(
    `Cannot resolve ${what} from models.json: ${result.reason}`,
    result.missingEnv
      ? `Set ${result.missingEnv.join(", ")} in the environment sandbox-run runs in.`
      : "Fix the command so it prints the value and exits 0 within the timeout.",
  );
}

/** Resolved headers, or undefined when a value could not be resolved (non-selected only). */
function resolveHeaders(
  headers: Record<string, string> | undefined,
  where: string,
  mode: ResolveMode,
): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const [name, raw] of Object.entries(headers ?? {})) {
    const value = resolveOne(raw, `${where}.${name}`, mode);
    if (value === undefined) return undefined;
    out[name.toLowerCase()] = value;
  }
  return out;
}

function resolveProviderCredentials(
  providerId: string,
  config: ProviderConfig,
  builtin: BuiltinProvider | undefined,
  mode: ResolveMode,
): ProviderCredentials {
  const where = `providers.${providerId}`;
  const env = mode.env;
  const credentials: ProviderCredentials = {
    authHeaders: {},
    headers: {},
    authHeader: config.authHeader ?? false,
    usable: true,
  };
  if (config.apiKey !== undefined) {
    // Pi: a models.json apiKey beats the provider's environment variables.
    const key = resolveOne(config.apiKey, `${where}.apiKey`, mode);
    if (key === undefined) credentials.usable = false;
    else credentials.apiKey = key;
  } else if (!builtin && Object.hasOwn(OTHER_BUILTIN_KEY_ENV, providerId)) {
    const found = (OTHER_BUILTIN_KEY_ENV[providerId] ?? []).map((name) => env[name]).find((value) => !!value);
    if (found) credentials.apiKey = found;
  } else if (builtin) {
    const authToken = providerId === "anthropic" ? env[ANTHROPIC_AUTH_TOKEN_ENV] : undefined;
    if (authToken) {
      // Pi sends ANTHROPIC_AUTH_TOKEN as Authorization: Bearer, before any API key variable.
      credentials.authHeaders.authorization = `Bearer ${authToken}`;
    } else {
      const found = builtin.envVars.map((name) => env[name]).find((value) => !!value);
      if (found) credentials.apiKey = found;
    }
  }
  const headers = resolveHeaders(config.headers, `${where}.headers`, mode);
  if (headers === undefined) credentials.usable = false;
  else credentials.headers = headers;
  if (!credentials.usable) {
    credentials.apiKey = undefined;
    credentials.authHeaders = {};
    credentials.headers = {};
  } else if (
    builtin &&
    credentials.apiKey === undefined &&
    !hasCredentialHeader({ ...credentials.authHeaders, ...credentials.headers })
  ) {
    // A built-in without any key is unavailable in Pi on the host; keep it that way inside.
    credentials.usable = false;
  }
  return credentials;
}

const CREDENTIAL_HEADERS = ["authorization", "x-api-key", "api-key", "x-goog-api-key", "cf-aig-authorization"];

/** Collects credential values long enough to be recognisable (short literals such as "ollama" are not secrets). */
function addSecrets(
  secrets: Set<string>,
  apiKey: string | undefined,
  ...headerSets: Array<Record<string, string>>
): void {
  const add = (value: string | undefined) => {
    if (!value) return;
    const bare = value.replace(/^Bearer\s+/i, "");
    if (bare.length >= 16) secrets.add(bare);
  };
  add(apiKey);
  for (const headers of headerSets) {
    for (const [name, value] of Object.entries(headers))
      if (CREDENTIAL_HEADERS.includes(name.toLowerCase())) add(value);
  }
}

function hasCredentialHeader(headers: Record<string, string>): boolean {
  return Object.keys(headers).some((name) => CREDENTIAL_HEADERS.includes(name.toLowerCase()));
}

function credentialStyle(api: string, apiKey: string): CredentialStyle {
  if (api === "anthropic-messages") return apiKey.includes(ANTHROPIC_OAUTH_MARKER) ? "bearer" : "x-api-key";
  if (api === "google-generative-ai") return "x-goog-api-key";
  return "bearer"; // openai-completions, openai-responses, mistral-conversations
}

/**
 * The headers the upstream must receive, in Pi's precedence: key header from the api, then
 * credential-source headers, then models.json headers (provider, then model), then
 * `authHeader: true` (Authorization: Bearer <key>).
 */
function credentialHeaders(
  api: string,
  credentials: ProviderCredentials,
  modelHeaders: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  const { apiKey } = credentials;
  if (apiKey) {
    const style = credentialStyle(api, apiKey);
    if (style === "bearer") out.authorization = `Bearer ${apiKey}`;
    else out[style] = apiKey;
  }
  Object.assign(out, credentials.authHeaders, credentials.headers, modelHeaders);
  if (credentials.authHeader && apiKey) out.authorization = `Bearer ${apiKey}`;
  return out;
}

function credentialEnvNames(providers: Record<string, ProviderConfig>): string[] {
  const names = new Set<string>(PI_CREDENTIAL_ENV_NAMES);
  const add = (raw: string | undefined) => {
    if (raw !== undefined) for (const name of configValueEnvNames(raw)) names.add(name);
  };
  for (const config of Object.values(providers)) {
    add(config.apiKey);
    for (const value of Object.values(config.headers ?? {})) add(value);
    for (const model of config.models ?? []) for (const value of Object.values(model.headers ?? {})) add(value);
    for (const override of Object.values(config.modelOverrides ?? {})) {
      for (const value of Object.values(override.headers ?? {})) add(value);
    }
  }
  return [...names].sort();
}

function withoutKey<T extends Record<string, unknown>>(value: T, key: string): Record<string, unknown> {
  const { [key]: _omitted, ...rest } = value;
  return rest;
}

export type { ModelConfig as ModelsJsonModel, ProviderConfig as ModelsJsonProvider };
