// Which requests the model gateway lets through, per Pi `api`. Everything else is refused.
//
// The paths are relative to a provider's baseUrl and were checked against Pi 1.6.0 (the SDK
// calls in @earendil-works/pi-ai and requests captured from the real `pi` CLI):
//   openai-completions     POST <base>/chat/completions                  (OpenAI SDK chat.completions.create)
//   openai-responses       POST <base>/responses                         (OpenAI SDK responses.create)
//   anthropic-messages     POST <base>/v1/messages?beta=true             (Anthropic SDK beta.messages.create)
//   mistral-conversations  POST <base>/v1/chat/completions               (Pi's own fetch)
//   google-generative-ai   POST <base>/models/<id>:streamGenerateContent?alt=sse (x-goog-api-key)
// Token counting (Anthropic's count_tokens, Google's countTokens) is not among them: Pi never
// asks for it, and its bodies were parsed, forwarded with the key and counted by no budget.
// The query string must be one Pi sends for that request (none, or the one shown): a query is
// what an OpenAI-compatible proxy may read before the checked body (LiteLLM takes `?model=` over
// the body's model), so one the sandbox chose never travels with the key (review, session 45).

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
  /** The query string (with its "?") Pi may send besides none. */
  query?: string;
}

const GOOGLE_GENERATE = /^\/models\/[A-Za-z0-9][A-Za-z0-9._-]*:(?:streamGenerateContent|generateContent)$/;

const ALLOWED: Record<string, readonly AllowedRequest[]> = {
  "openai-completions": [
    { method: "POST", path: "/chat/completions", generates: true },
    { method: "GET", path: "/models" },
  ],
  "openai-responses": [
    { method: "POST", path: "/responses", generates: true },
    { method: "GET", path: "/models" },
  ],
  "anthropic-messages": [{ method: "POST", path: "/v1/messages", generates: true, query: "?beta=true" }],
  "mistral-conversations": [{ method: "POST", path: "/v1/chat/completions", generates: true }],
  "google-generative-ai": [{ method: "POST", path: GOOGLE_GENERATE, generates: true, query: "?alt=sse" }],
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

/**
 * Whether `query` (with its "?", or "") is one Pi sends with the allowed request `method pathname`:
 * none, or the one its API uses (exactly: no reordering, no second parameter).
 */
export function isAllowedQuery(api: string, method: string, pathname: string, query: string): boolean {
  const allowed = findAllowed(api, method, pathname);
  return allowed !== undefined && (query === "" || query === allowed.query);
}

/** The query strings allowed with `method pathname`, for error messages. */
export function describeAllowedQueries(api: string, method: string, pathname: string): string {
  const query = findAllowed(api, method, pathname)?.query;
  return query ? `none or ${query}` : "none";
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
