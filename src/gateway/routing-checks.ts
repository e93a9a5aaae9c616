// The planner's inputs read and checked, and the usage errors it gives: each says what is wrong
// in the caller's terms (the model reference, the models.json field) and what to do about it.
import { usageError } from "../errors.js";
import { SUPPORTED_GATEWAY_APIS } from "./api-paths.js";
import { isCommandConfigValue } from "./config-value.js";
import { configValuesOf, type ModelsJsonProvider } from "./models-json-schema.js";
import {
  ANTHROPIC_AUTH_TOKEN_ENV,
  BUILTIN_PROVIDERS,
  type BuiltinProvider,
  OTHER_BUILTIN_KEY_ENV,
} from "./provider-catalog.js";

export function refuseCommandValues(
  providers: Record<string, ModelsJsonProvider>,
  refuse: { file?: string; because: string },
): void {
  const commands = configValuesOf(providers).filter((v) => isCommandConfigValue(v.value));
  if (commands.length === 0) return;
  const file = refuse.file ? `The models file ${refuse.file}` : "models.json";
  throw usageError(
    `${file} sets ${commands.map((c) => c.where).join(", ")} to a !command, which would run on this host; refused because ${refuse.because}.`,
    'Use a models file outside the workspace, or give the value as "$VARIABLE" and set that variable in the environment sandbox-run runs in.',
  );
}

export function checkNoModelOverrideHeaders(config: ModelsJsonProvider, where: string): void {
  for (const [overrideId, override] of Object.entries(config.modelOverrides ?? {})) {
    if (override.headers && Object.keys(override.headers).length > 0) {
      throw usageError(
        `models.json ${where}.modelOverrides.${overrideId}.headers: per-model header overrides cannot be carried by the sandbox's model gateway`,
        `Move these headers to ${where}.headers, or define the model under ${where}.models with its own "headers".`,
      );
    }
  }
}

export function unknownProvider(providerId: string, model: string) {
  if (Object.hasOwn(OTHER_BUILTIN_KEY_ENV, providerId)) {
    return usageError(
      `Pi's built-in provider "${providerId}" cannot be routed through the sandbox's model gateway`,
      `Use one of ${Object.keys(BUILTIN_PROVIDERS).join(", ")}, or define the model in models.json under "providers.${providerId}" with "baseUrl", "api" (${SUPPORTED_GATEWAY_APIS.join(", ")}) and "models".`,
    );
  }
  return usageError(
    `Unknown model provider "${providerId}" (model "${model}")`,
    `Use a built-in provider (${Object.keys(BUILTIN_PROVIDERS).join(", ")}) or define "${providerId}" under "providers" in models.json.`,
  );
}

export function undefinedModel(providerId: string, modelId: string, config: ModelsJsonProvider, where: string) {
  const models = config.models ?? [];
  if (models.length === 0) {
    return usageError(`models.json ${where} defines no models`, `Add the model "${modelId}" to ${where}.models.`);
  }
  return usageError(
    `Model "${modelId}" is not defined for provider "${providerId}" in models.json`,
    Object.hasOwn(OTHER_BUILTIN_KEY_ENV, providerId)
      ? `Pi's built-in "${providerId}" models cannot be routed through the sandbox's model gateway; define the model under ${where}.models with "baseUrl" and "api".`
      : `Use one of: ${models.map((m) => `${providerId}/${m.id}`).join(", ")}, or add it to ${where}.models.`,
  );
}

export function noKey(providerId: string, model: string, builtin: BuiltinProvider) {
  const names =
    providerId === "anthropic"
      ? ["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", ANTHROPIC_AUTH_TOKEN_ENV]
      : builtin.envVars;
  const error = usageError(
    `No API key for provider "${providerId}" (model "${model}")`,
    `Set ${names[0]}${names.length > 1 ? ` (or ${names.slice(1).join(" / ")})` : ""} in the environment sandbox-run runs in, or set providers.${providerId}.apiKey in models.json.`,
  );
  // What a dry run needs to show the plan anyway (it names the variable, never a value).
  return Object.assign(error, { missingKeyEnv: names[0]! });
}

export function parseModelRef(model: string): { providerId: string; modelId: string } {
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

export function parseGatewayBase(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw usageError(`Invalid gateway base URL ${JSON.stringify(value)}`, 'Use e.g. "http://127.0.0.1:18080".');
  }
  return value.replace(/\/+$/, "");
}
