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

interface AllowedRequest {
  method: "GET" | "POST";
  path: string | RegExp;
}

const GOOGLE_MODEL_ACTION = /^\/models\/[A-Za-z0-9][A-Za-z0-9._-]*:(?:streamGenerateContent|generateContent|countTokens)$/;

const ALLOWED: Record<string, readonly AllowedRequest[]> = {
  "openai-completions": [
    { method: "POST", path: "/chat/completions" },
    { method: "GET", path: "/models" },
  ],
  "openai-responses": [
    { method: "POST", path: "/responses" },
    { method: "GET", path: "/models" },
  ],
  "anthropic-messages": [
    { method: "POST", path: "/v1/messages" },
    { method: "POST", path: "/v1/messages/count_tokens" },
  ],
  "mistral-conversations": [{ method: "POST", path: "/v1/chat/completions" }],
  "google-generative-ai": [{ method: "POST", path: GOOGLE_MODEL_ACTION }],
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
  const allowed = Object.hasOwn(ALLOWED, api) ? ALLOWED[api] : undefined;
  if (!allowed) return false;
  return allowed.some(
    (entry) =>
      entry.method === method &&
      (typeof entry.path === "string" ? entry.path === pathname : entry.path.test(pathname)),
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
