// Credentials of a planned route: where each header's value comes from (plan time, no side
// effect), and their resolution when the run starts (resolveRouteCredentials, the only place a
// models.json `!command` runs). A plan therefore runs nothing and holds no value from the
// environment or a command (a literal key stays what it is: part of the models file), so
// --dry-run and agent.plan() can be called on any models file.
//
// The header rules follow Pi 1.6.0: the key goes where the route's api sends keys, then the
// credential source's own headers, then models.json headers (provider, then model), then
// `authHeader: true` (Authorization: Bearer <key>).
import { usageError } from "../errors.js";
import { type ConfigEnv, type ConfigValueResult, isCommandConfigValue, resolveConfigValue } from "./config-value.js";
import { isCredentialHeader } from "./credential-headers.js";
import type { GatewayRoute } from "./gateway-routes.js";

export type CredentialSource =
  /** A host variable Pi itself reads for the provider (OPENAI_API_KEY, ...). */
  | { kind: "env"; name: string }
  /** A models.json value: a literal, a "$VAR" template, or a "!command" run when the run starts. */
  | { kind: "config"; where: string; value: string };

export interface CredentialHeader {
  /** Lower-case header name. */
  name: string;
  /** Text in front of the value ("Bearer "). */
  prefix?: string;
  source: CredentialSource;
}

/** How the route's api sends a key; "anthropic" depends on the key (OAuth tokens go as Bearer). */
type KeyStyle = "bearer" | "x-api-key" | "x-goog-api-key" | "anthropic";

export interface RouteCredentials {
  apiKey?: { source: CredentialSource; style: KeyStyle };
  /** Further headers in Pi's precedence (later ones win). */
  headers: CredentialHeader[];
  /** models.json `authHeader: true`. */
  bearerToo: boolean;
  /**
   * Anthropic: whether the sandbox got the OAuth-shaped placeholder (Pi shapes its requests by
   * the key). Decided at plan time from the key when it is known then; a command's key must match.
   */
  anthropicOAuth?: boolean;
}

/** A route as planned: the credentials are sources, not values. */
export interface PlannedRoute {
  /** First path segment, [a-z0-9_-]+. */
  id: string;
  upstreamBaseUrl: string;
  /** Pi api name. */
  api: string;
  /** The run's model id as the upstream sees it; the gateway pins every request to it. */
  model: string;
  credentials: RouteCredentials;
}

interface CredentialResolution {
  /** The host environment the run resolves variables in (and runs commands with). */
  env: ConfigEnv;
  /** Timeout for models.json `!command` values; Pi's own is 10 s. */
  commandTimeoutMs?: number;
}

export const ANTHROPIC_OAUTH_MARKER = "sk-ant-oat";

export function keyStyleFor(api: string): KeyStyle {
  if (api === "anthropic-messages") return "anthropic";
  if (api === "google-generative-ai") return "x-goog-api-key";
  return "bearer"; // openai-completions, openai-responses, mistral-conversations
}

/** Every source of a route's credentials. */
function credentialSources(credentials: RouteCredentials): CredentialSource[] {
  return [...(credentials.apiKey ? [credentials.apiKey.source] : []), ...credentials.headers.map((h) => h.source)];
}

export function hasCredential(credentials: RouteCredentials): boolean {
  return credentials.apiKey !== undefined || credentials.headers.some((h) => isCredentialHeader(h.name));
}

/**
 * Where each header's value comes from, without any value: for --dry-run and run records
 * ("$OPENAI_API_KEY", "models.json providers.x.apiKey (command, run when the run starts)").
 */
export function describeRouteCredentials(route: PlannedRoute): Record<string, string> {
  const out: Record<string, string> = {};
  const { apiKey, headers, bearerToo } = route.credentials;
  if (apiKey) {
    const name =
      apiKey.style === "anthropic"
        ? route.credentials.anthropicOAuth
          ? "authorization"
          : "x-api-key"
        : apiKey.style === "bearer"
          ? "authorization"
          : apiKey.style;
    out[name] = describeSource(apiKey.source);
  }
  for (const header of headers) out[header.name] = describeSource(header.source);
  if (bearerToo && apiKey) out.authorization = describeSource(apiKey.source);
  return out;
}

function describeSource(source: CredentialSource): string {
  if (source.kind === "env") return `$${source.name}`;
  if (isCommandConfigValue(source.value)) return `models.json ${source.where} (command, run when the run starts)`;
  return `models.json ${source.where}`;
}

/**
 * Plan-time check: every value that needs no command resolves (variables are set). Returns those
 * values (to keep them out of the sandbox's models.json); commands are not run.
 */
export function checkResolvableWithoutCommands(routes: readonly PlannedRoute[], env: ConfigEnv): string[] {
  const values: string[] = [];
  for (const route of routes) {
    for (const source of credentialSources(route.credentials)) {
      if (source.kind === "config" && isCommandConfigValue(source.value)) continue;
      values.push(resolveOrThrow(source, { env, runCommands: false }));
    }
  }
  return values;
}

/**
 * The routes the gateway gets, with real header values: called once when the run starts (never by
 * a plan or a dry run). Runs models.json `!command` values on the host, with a timeout. Throws a
 * usage error naming the field when a value cannot be resolved, or when a resolved value also
 * appears in the sandbox's models.json.
 */
export function resolveRouteCredentials(
  routing: { routes: readonly PlannedRoute[]; containerModelsJson: unknown },
  options: CredentialResolution,
): GatewayRoute[] {
  const resolveOptions = { env: options.env, runCommands: true, commandTimeoutMs: options.commandTimeoutMs };
  const routes = routing.routes.map((route): GatewayRoute => {
    const value = (source: CredentialSource) => resolveOrThrow(source, resolveOptions);
    const { apiKey: keySpec, headers: headerSpecs, bearerToo } = route.credentials;
    const headers: Record<string, string> = {};
    const key = keySpec ? value(keySpec.source) : undefined;
    if (keySpec && key !== undefined) {
      const oauth = key.includes(ANTHROPIC_OAUTH_MARKER);
      if (keySpec.style === "anthropic" && oauth !== (route.credentials.anthropicOAuth ?? false)) {
        throw usageError(
          `The Anthropic key from ${describeSource(keySpec.source)} is ${oauth ? "" : "not "}an OAuth token, unlike what the run was planned with`,
          "Give OAuth tokens through ANTHROPIC_OAUTH_TOKEN (or a literal/$VAR apiKey), so the sandbox's placeholder matches the key before the run starts.",
        );
      }
      if (keySpec.style === "bearer" || (keySpec.style === "anthropic" && oauth))
        headers.authorization = `Bearer ${key}`;
      else headers[keySpec.style === "anthropic" ? "x-api-key" : keySpec.style] = key;
    }
    for (const header of headerSpecs) headers[header.name] = `${header.prefix ?? ""}${value(header.source)}`;
    if (bearerToo && key !== undefined) headers.authorization = `Bearer ${key}`;
    return { id: route.id, upstreamBaseUrl: route.upstreamBaseUrl, api: route.api, model: route.model, headers };
  });
  assertNoCredentialIn(
    routing.containerModelsJson,
    routes.flatMap((route) =>
      Object.entries(route.headers).flatMap(([name, value]) => (isCredentialHeader(name) ? [value] : [])),
    ),
  );
  return routes;
}

/**
 * A credential must never ride along in a field the sandbox sees (a model name, a URL, compat
 * settings). Short values ("ollama") are not secrets and are not checked.
 */
export function assertNoCredentialIn(containerModelsJson: unknown, values: readonly string[]): void {
  const serialized = JSON.stringify(containerModelsJson);
  for (const value of values) {
    const bare = value.replace(/^Bearer\s+/i, "");
    if (bare.length >= 16 && serialized.includes(bare)) {
      throw usageError(
        "A credential value from models.json also appears in a non-credential field",
        'Keep keys only in "apiKey" and "headers" (use "$NAME" references), not in names, ids, URLs or compat settings.',
      );
    }
  }
}

function resolveOrThrow(
  source: CredentialSource,
  options: { env: ConfigEnv; runCommands: boolean; commandTimeoutMs?: number },
): string {
  const result: ConfigValueResult =
    source.kind === "env"
      ? options.env[source.name]
        ? { ok: true, value: options.env[source.name] as string }
        : { ok: false, reason: `environment variable ${source.name} is not set`, missingEnv: [source.name] }
      : resolveConfigValue(source.value, options);
  if (result.ok) return result.value;
  const what = source.kind === "env" ? `$${source.name}` : `${source.where} from models.json`;
  throw usageError(
    `Cannot resolve ${what}: ${result.reason}`,
    result.missingEnv
      ? `Set ${result.missingEnv.join(", ")} in the environment sandbox-run runs in.`
      : "Fix the command so it prints the value and exits 0 within the timeout.",
  );
}
