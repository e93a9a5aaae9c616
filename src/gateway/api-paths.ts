// Which requests the model gateway lets through, per Pi `api`. Everything else is refused.
//
// The paths are relative to a provider's baseUrl and were checked against Pi 1.6.0 (the SDK
// calls in @earendil-works/pi-ai and requests captured from the real `pi` CLI):
//   openai-completions     POST <base>/chat/completions                  (OpenAI SDK chat.completions.create)
//   openai-responses       POST <base>/responses                         (OpenAI SDK responses.create)
//   anthropic-messages     POST <base>/v1/messages?beta=true             (Anthropic SDK beta.messages.create)
//   mistral-conversations  POST <base>/v1/chat/completions               (Pi's own fetch)
//   google-generative-ai   POST <base>/models/<id>:streamGenerateContent?alt=sse (x-goog-api-key)
// The query string is not part of the match; it is forwarded unchanged.

/**
 * The path segment of the gateway's own endpoints; never a route. (Here rather than in
 * gateway-routes.ts so that planning a route does not load the codecs.)
 */
export const RESERVED_ROUTE_ID = "__sandbox-run";

interface AllowedRequest {
  method: "GET" | "POST";
  path: string | RegExp;
  /** Asks the model for output (one per agent turn, and what costs tokens). */
  generates?: boolean;
}

const GOOGLE_GENERATE = /^\/models\/[A-Za-z0-9][A-Za-z0-9._-]*:(?:streamGenerateContent|generateContent)$/;
const GOOGLE_COUNT_TOKENS = /^\/models\/[A-Za-z0-9][A-Za-z0-9._-]*:countTokens$/;

const ALLOWED: Record<string, readonly AllowedRequest[]> = {
  "openai-completions": [
    { method: "POST", path: "/chat/completions", generates: true },
    { method: "GET", path: "/models" },
  ],
  "openai-responses": [
    { method: "POST", path: "/responses", generates: true },
    { method: "GET", path: "/models" },
  ],
  "anthropic-messages": [
    { method: "POST", path: "/v1/messages", generates: true },
    { method: "POST", path: "/v1/messages/count_tokens" },
  ],
  "mistral-conversations": [{ method: "POST", path: "/v1/chat/completions", generates: true }],
  "google-generative-ai": [
    { method: "POST", path: GOOGLE_GENERATE, generates: true },
    { method: "POST", path: GOOGLE_COUNT_TOKENS },
  ],
};

/** The Pi `api` names the gateway knows how to police. */
export const SUPPORTED_GATEWAY_APIS: readonly string[] = Object.freeze(Object.keys(ALLOWED));

export function isSupportedGatewayApi(api: string): boolean {
  return Object.hasOwn(ALLOWED, api);
}

/**
 * Whether `method pathname` (relative to the route's upstream base, no query string) is a model
 * API request for `api`. Matching is exact: no normalisation, so `..`, `//`, `%2f` and friends
 * never match.
 */
export function isAllowedModelRequest(api: string, method: string, pathname: string): boolean {
  return findAllowed(api, method, pathname) !== undefined;
}

/** Whether an allowed request asks the model for output (what a turn budget counts). */
export function isGenerationRequest(api: string, method: string, pathname: string): boolean {
  return findAllowed(api, method, pathname)?.generates === true;
}

function findAllowed(api: string, method: string, pathname: string): AllowedRequest | undefined {
  const allowed = Object.hasOwn(ALLOWED, api) ? ALLOWED[api] : undefined;
  return allowed?.find(
    (entry) =>
      entry.method === method && (typeof entry.path === "string" ? entry.path === pathname : entry.path.test(pathname)),
  );
}

/** Human-readable list of the allowed requests for `api`, for error messages. */
export function describeAllowedRequests(api: string): string {
  const allowed = Object.hasOwn(ALLOWED, api) ? ALLOWED[api] : undefined;
  if (!allowed) return "none";
  return allowed
    .map((entry) => `${entry.method} ${typeof entry.path === "string" ? entry.path : entry.path.source}`)
    .join(", ");
}
