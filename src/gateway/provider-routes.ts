// Plans how Pi inside the sandbox reaches its model through the host-side model gateway. Pure:
// reads the environment passed in, runs nothing (models.json `!command` values run only when the
// run starts, in resolveRouteCredentials).
//
// Inputs: the selected "provider/model", the caller's Pi models.json and the host environment.
// Outputs:
// - one gateway route: the run's model's upstream, api and credential sources. Only the run's
//   provider is routed, and only the route its model needs: code in the sandbox cannot spend
//   another provider's key, or reach another endpoint of this one;
// - the models.json Pi inside gets: only that provider, pointing at the gateway with a placeholder
//   key; headers are gone, so no secret enters the container;
// - the names of all environment variables that hold provider credentials, which the caller
//   must never forward into the sandbox.
//
// Verified against Pi 1.6.0 (@earendil-works/pi-ai dist/providers/*.js, dist/env-api-keys.js,
// pi-coding-agent dist/core/provider-composer.js and requests captured from the real CLI):
// a models.json entry `{ baseUrl, apiKey }` for a built-in provider keeps its built-in models
// and moves all of them to the new base URL; `apiKey` there wins over environment variables.
import { usageError } from "../errors.js";
import { isSupportedGatewayApi, RESERVED_ROUTE_ID, SUPPORTED_GATEWAY_APIS } from "./api-paths.js";
import { type ConfigEnv, configValueEnvNames, resolveConfigValue } from "./config-value.js";
import {
  configValuesOf,
  type ModelsJsonModel,
  type ModelsJsonProvider,
  parseModelsJson,
} from "./models-json-schema.js";
import {
  ANTHROPIC_AUTH_TOKEN_ENV,
  type BuiltinProvider,
  builtinProvider,
  OTHER_BUILTIN_KEY_ENV,
  PI_CREDENTIAL_ENV_NAMES,
} from "./provider-catalog.js";
import {
  ANTHROPIC_OAUTH_MARKER,
  assertNoCredentialIn,
  type CredentialHeader,
  type CredentialSource,
  checkResolvableWithoutCommands,
  hasCredential,
  keyStyleFor,
  type PlannedRoute,
  type RouteCredentials,
} from "./route-credentials.js";
import {
  checkNoModelOverrideHeaders,
  noKey,
  parseGatewayBase,
  parseModelRef,
  refuseCommandValues,
  undefinedModel,
  unknownProvider,
} from "./routing-checks.js";

export interface ProviderRoutingInput {
  /** "provider/id" selected for the run. */
  model: string;
  /** The caller's Pi models.json (parsed), optional. */
  modelsJson?: unknown;
  /** Host-side environment used for key lookup. */
  env: ConfigEnv;
  /** "http://127.0.0.1:18080" (what Pi inside sees). */
  gatewayBaseUrl: string;
  /**
   * Refuse every `!command` value in models.json with a usage error, e.g. for a models file that
   * lies inside the workspace (the sandboxed change would choose what runs on the host).
   * `file` names the models file, `because` says why, both in the message.
   */
  refuseCommands?: { file?: string; because: string };
}

export interface ProviderRouting {
  /** The run's route (one: the run's model's). Credentials are sources: see resolveRouteCredentials. */
  routes: PlannedRoute[];
  /** What Pi inside gets: only the run's provider; baseUrl -> gateway, apiKey -> placeholder, headers removed. */
  containerModelsJson: { providers: Record<string, unknown> };
  /** Env var names that hold credentials (must never be forwarded into the sandbox). */
  credentialEnvNames: string[];
  /** The route the run's model's requests take. */
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

export function planProviderRouting(input: ProviderRoutingInput): ProviderRouting {
  const gatewayBase = parseGatewayBase(input.gatewayBaseUrl);
  const { providerId, modelId } = parseModelRef(input.model);
  const providers = parseModelsJson(input.modelsJson);
  if (input.refuseCommands) refuseCommandValues(providers, input.refuseCommands);

  const configured = Object.hasOwn(providers, providerId) ? providers[providerId] : undefined;
  const builtin = builtinProvider(providerId);
  if (!configured && !builtin) throw unknownProvider(providerId, input.model);
  const config: ModelsJsonProvider = configured ?? {};
  const where = `providers.${providerId}`;
  checkNoModelOverrideHeaders(config, where);

  const model = config.models?.find((m) => m.id === modelId);
  const modelIndex = model ? (config.models ?? []).indexOf(model) : -1;
  if (!builtin && !model) throw undefinedModel(providerId, modelId, config, where);
  const { api, upstreamBaseUrl } = endpointOf(config, builtin, model, model ? `${where}.models.${modelIndex}` : where);

  const credentials = credentialsOf(providerId, config, builtin, model, modelIndex, api, input.env);
  if (builtin && !hasCredential(credentials)) throw noKey(providerId, input.model, builtin);

  const sanitized = sanitizeRouteId(providerId);
  const routeId = sanitized === RESERVED_ROUTE_ID ? "sandbox-run-provider" : sanitized;
  const route: PlannedRoute = { id: routeId, upstreamBaseUrl, api, model: modelId, credentials };
  const containerModelsJson = {
    providers: { [providerId]: containerEntry(config, model, `${gatewayBase}/${routeId}`, credentials) },
  };
  // Values that need no command are checked now, so a missing variable fails before Docker is touched.
  assertNoCredentialIn(containerModelsJson, checkResolvableWithoutCommands([route], input.env));

  return {
    routes: [route],
    containerModelsJson,
    credentialEnvNames: credentialEnvNames(providers),
    selectedRouteId: routeId,
  };
}

/** Route ids are the first path segment: [a-z0-9_-]+. */
function sanitizeRouteId(value: string): string {
  const cleaned = value
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48);
  return cleaned || "provider";
}

// ---------------------------------------------------------------------------------------------

function endpointOf(
  config: ModelsJsonProvider,
  builtin: BuiltinProvider | undefined,
  model: ModelsJsonModel | undefined,
  where: string,
): { api: string; upstreamBaseUrl: string } {
  // A built-in model keeps its built-in api; the configured api is the default only for models
  // defined in models.json.
  const providerBase = config.baseUrl ?? builtin?.baseUrl;
  const api = model ? (model.api ?? config.api ?? builtin?.api) : builtin?.api;
  const upstreamBaseUrl = model ? (model.baseUrl ?? providerBase) : providerBase;
  const label = model ? `models.json ${where} (${model.id})` : `models.json ${where}`;
  if (!api) {
    throw usageError(
      `${label}: no "api" specified`,
      `Set "api" on the model or its provider (one of ${SUPPORTED_GATEWAY_APIS.join(", ")}).`,
    );
  }
  if (!upstreamBaseUrl) {
    throw usageError(`${label}: no "baseUrl"`, `Set "baseUrl" on the provider or on the model.`);
  }
  if (!isSupportedGatewayApi(api)) {
    throw usageError(
      `models.json ${where}: api "${api}" cannot be routed through the sandbox's model gateway`,
      `Use one of: ${SUPPORTED_GATEWAY_APIS.join(", ")}.`,
    );
  }
  return { api, upstreamBaseUrl };
}

/** Where the run's credentials come from, in Pi's order of precedence. */
function credentialsOf(
  providerId: string,
  config: ModelsJsonProvider,
  builtin: BuiltinProvider | undefined,
  model: ModelsJsonModel | undefined,
  modelIndex: number,
  api: string,
  env: ConfigEnv,
): RouteCredentials {
  const where = `providers.${providerId}`;
  const headers: CredentialHeader[] = [];
  let key: CredentialSource | undefined;
  const firstSet = (names: readonly string[]) => names.find((name) => !!env[name]);
  if (config.apiKey !== undefined) {
    // Pi: a models.json apiKey beats the provider's environment variables.
    key = { kind: "config", where: `${where}.apiKey`, value: config.apiKey };
  } else if (!builtin && Object.hasOwn(OTHER_BUILTIN_KEY_ENV, providerId)) {
    const name = firstSet(OTHER_BUILTIN_KEY_ENV[providerId] ?? []);
    if (name) key = { kind: "env", name };
  } else if (builtin) {
    if (providerId === "anthropic" && env[ANTHROPIC_AUTH_TOKEN_ENV]) {
      // Pi sends ANTHROPIC_AUTH_TOKEN as Authorization: Bearer, before any API key variable.
      headers.push({
        name: "authorization",
        prefix: "Bearer ",
        source: { kind: "env", name: ANTHROPIC_AUTH_TOKEN_ENV },
      });
    } else {
      const name = firstSet(builtin.envVars);
      if (name) key = { kind: "env", name };
    }
  }
  const configHeaders = (record: Record<string, string> | undefined, at: string) => {
    for (const [name, value] of Object.entries(record ?? {})) {
      headers.push({ name: name.toLowerCase(), source: { kind: "config", where: `${at}.headers.${name}`, value } });
    }
  };
  configHeaders(config.headers, where);
  configHeaders(model?.headers, `${where}.models.${modelIndex}`);

  const style = keyStyleFor(api);
  const credentials: RouteCredentials = {
    ...(key ? { apiKey: { source: key, style } } : {}),
    headers,
    bearerToo: config.authHeader ?? false,
  };
  if (style === "anthropic" && key) credentials.anthropicOAuth = knownValue(key, env)?.includes(ANTHROPIC_OAUTH_MARKER);
  return credentials;
}

/** A source's value when it is known without running anything. */
function knownValue(source: CredentialSource, env: ConfigEnv): string | undefined {
  if (source.kind === "env") return env[source.name];
  const result = resolveConfigValue(source.value, { env, runCommands: false });
  return result.ok ? result.value : undefined;
}

/** The run's provider as Pi inside sees it: through the gateway, with a placeholder key, without headers. */
function containerEntry(
  config: ModelsJsonProvider,
  model: ModelsJsonModel | undefined,
  gatewayUrl: string,
  credentials: RouteCredentials,
): Record<string, unknown> {
  const { headers: _h, apiKey: _k, models: _m, modelOverrides, baseUrl: _b, ...rest } = config;
  const entry: Record<string, unknown> = { ...rest, baseUrl: gatewayUrl };
  entry.apiKey = credentials.anthropicOAuth ? ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY : SANDBOX_PLACEHOLDER_API_KEY;
  if (model) {
    // Only the run's model: every other one would need a route of its own.
    const { headers: _mh, baseUrl: _mb, ...modelRest } = model;
    entry.models = [modelRest];
  }
  if (modelOverrides) {
    entry.modelOverrides = Object.fromEntries(
      Object.entries(modelOverrides).map(([id, { headers: _oh, ...override }]) => [id, override]),
    );
  }
  return entry;
}

function credentialEnvNames(providers: Record<string, ModelsJsonProvider>): string[] {
  const names = new Set<string>(PI_CREDENTIAL_ENV_NAMES);
  for (const { value } of configValuesOf(providers)) for (const name of configValueEnvNames(value)) names.add(name);
  return [...names].sort();
}

export { PI_CREDENTIAL_ENV_NAMES } from "./provider-catalog.js";
