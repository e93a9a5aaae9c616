// What sandbox-run knows about Pi 1.6.0's built-in providers: the ones the gateway can carry
// (base URL, api, key variables), the key variables of the others, and every variable Pi reads a
// credential from. Data only.
//
// Copied from @earendil-works/pi-ai 1.6.0: providers/<id>.js and providers/data/<id>.json (every
// model of the routable providers shares one base URL and api) and dist/env-api-keys.js.

export interface BuiltinProvider {
  baseUrl: string;
  api: string;
  /** Env vars holding an API key, in Pi's lookup order. */
  envVars: string[];
}

/** Built-in Pi providers the gateway can carry. */
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

/** Pi sends this one as `Authorization: Bearer`, before any Anthropic key variable. */
export const ANTHROPIC_AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN";

/**
 * API-key variables of Pi 1.6.0's other built-in providers. They cannot be routed as built-ins
 * (mixed endpoints or APIs the gateway does not police), but models.json may define models under
 * their ids, and then Pi uses these keys.
 */
export const OTHER_BUILTIN_KEY_ENV: Readonly<Record<string, string[]>> = Object.freeze({
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

export function builtinProvider(providerId: string): BuiltinProvider | undefined {
  return Object.hasOwn(BUILTIN_PROVIDERS, providerId) ? BUILTIN_PROVIDERS[providerId] : undefined;
}
