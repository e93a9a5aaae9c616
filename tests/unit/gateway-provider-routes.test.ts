import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import {
  ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY,
  SANDBOX_PLACEHOLDER_API_KEY,
  planProviderRouting,
  type ProviderRoutingInput,
} from "../../src/gateway/provider-routes.js";

const GATEWAY = "http://127.0.0.1:18080";
const ANTHROPIC_KEY = "sk-ant-api03-REAL-anthropic-key-0123456789";
const ANTHROPIC_OAUTH = "sk-ant-oat01-REAL-oauth-token-0123456789";
const OPENAI_KEY = "sk-proj-REAL-openai-key-0123456789abcdef";
const CUSTOM_KEY = "custom-REAL-secret-key-0123456789";

function plan(input: Partial<ProviderRoutingInput> & { model: string }) {
  return planProviderRouting({ env: {}, gatewayBaseUrl: GATEWAY, ...input });
}

function usageErrorOf(fn: () => unknown): SandboxRunError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxRunError);
    expect((error as SandboxRunError).code).toBe("usage");
    return error as SandboxRunError;
  }
  throw new Error("expected a usage error");
}

function expectNoSecrets(value: unknown, secrets: string[]) {
  const serialized = JSON.stringify(value);
  for (const secret of secrets) expect(serialized).not.toContain(secret);
}

describe("planProviderRouting: built-in providers", () => {
  it("routes anthropic through the gateway with the API key as x-api-key", () => {
    const routing = plan({ model: "anthropic/claude-sonnet-4-5", env: { ANTHROPIC_API_KEY: ANTHROPIC_KEY } });
    expect(routing.routes).toEqual([
      {
        id: "anthropic",
        upstreamBaseUrl: "https://api.anthropic.com",
        api: "anthropic-messages",
        headers: { "x-api-key": ANTHROPIC_KEY },
      },
    ]);
    expect(routing.selectedRouteId).toBe("anthropic");
    expect(routing.containerModelsJson).toEqual({
      providers: { anthropic: { baseUrl: `${GATEWAY}/anthropic`, apiKey: SANDBOX_PLACEHOLDER_API_KEY } },
    });
    expectNoSecrets(routing.containerModelsJson, [ANTHROPIC_KEY]);
    expect(routing.credentialEnvNames).toEqual(
      expect.arrayContaining(["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"]),
    );
  });

  it("sends an Anthropic OAuth token as Bearer and gives Pi an OAuth-shaped placeholder", () => {
    const routing = plan({
      model: "anthropic/claude-sonnet-4-5",
      env: { ANTHROPIC_OAUTH_TOKEN: ANTHROPIC_OAUTH, ANTHROPIC_API_KEY: ANTHROPIC_KEY },
    });
    // Pi reads ANTHROPIC_OAUTH_TOKEN before ANTHROPIC_API_KEY.
    expect(routing.routes[0]?.headers).toEqual({ authorization: `Bearer ${ANTHROPIC_OAUTH}` });
    const entry = routing.containerModelsJson.providers.anthropic as Record<string, unknown>;
    expect(entry.apiKey).toBe(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY);
    expect(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY).toContain("sk-ant-oat");
    expect(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY).toContain(SANDBOX_PLACEHOLDER_API_KEY);
    expectNoSecrets(routing.containerModelsJson, [ANTHROPIC_OAUTH, ANTHROPIC_KEY]);
  });

  it("prefers ANTHROPIC_AUTH_TOKEN and sends it as Authorization: Bearer only", () => {
    const routing = plan({
      model: "anthropic/claude-haiku-4-5",
      env: { ANTHROPIC_AUTH_TOKEN: "auth-token-REAL-0123456789", ANTHROPIC_API_KEY: ANTHROPIC_KEY },
    });
    expect(routing.routes[0]?.headers).toEqual({ authorization: "Bearer auth-token-REAL-0123456789" });
    expectNoSecrets(routing.containerModelsJson, ["auth-token-REAL-0123456789", ANTHROPIC_KEY]);
  });

  it("routes openai (openai-responses on api.openai.com/v1) with Authorization: Bearer", () => {
    const routing = plan({
      model: "openai/gpt-5",
      env: { OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY },
    });
    // Only the selected built-in is routed: the anthropic key is not carried at all.
    expect(routing.routes).toEqual([
      {
        id: "openai",
        upstreamBaseUrl: "https://api.openai.com/v1",
        api: "openai-responses",
        headers: { authorization: `Bearer ${OPENAI_KEY}` },
      },
    ]);
    expect(routing.containerModelsJson.providers).toEqual({
      openai: { baseUrl: `${GATEWAY}/openai`, apiKey: SANDBOX_PLACEHOLDER_API_KEY },
    });
    expectNoSecrets(routing, [ANTHROPIC_KEY]);
    expectNoSecrets(routing.containerModelsJson, [OPENAI_KEY]);
  });

  it("routes OpenAI-compatible built-ins and google with their verified endpoints", () => {
    const groq = plan({ model: "groq/llama-3.1-8b-instant", env: { GROQ_API_KEY: "gsk-REAL-0123456789abcdef" } });
    expect(groq.routes[0]).toMatchObject({
      upstreamBaseUrl: "https://api.groq.com/openai/v1",
      api: "openai-completions",
      headers: { authorization: "Bearer gsk-REAL-0123456789abcdef" },
    });
    const google = plan({ model: "google/gemini-2.5-pro", env: { GEMINI_API_KEY: "gemini-REAL-0123456789" } });
    expect(google.routes[0]).toMatchObject({
      upstreamBaseUrl: "https://generativelanguage.googleapis.com/v1beta",
      api: "google-generative-ai",
      headers: { "x-goog-api-key": "gemini-REAL-0123456789" },
    });
    const mistral = plan({ model: "mistral/codestral-2508", env: { MISTRAL_API_KEY: "mistral-REAL-0123456789" } });
    expect(mistral.routes[0]).toMatchObject({
      upstreamBaseUrl: "https://api.mistral.ai",
      api: "mistral-conversations",
      headers: { authorization: "Bearer mistral-REAL-0123456789" },
    });
  });

  it("fails with a usage error naming the variable when the selected built-in has no key", () => {
    const error = usageErrorOf(() => plan({ model: "openai/gpt-5", env: { OPENAI_API_KEY: "" } }));
    expect(error.shortMessage).toContain('No API key for provider "openai"');
    expect(error.hint).toContain("OPENAI_API_KEY");
    const anthropic = usageErrorOf(() => plan({ model: "anthropic/claude-sonnet-4-5" }));
    expect(anthropic.hint).toContain("ANTHROPIC_API_KEY");
  });

  it("routes a built-in through a models.json baseUrl override, keeping the env key", () => {
    const routing = plan({
      model: "openai/gpt-5",
      env: { OPENAI_API_KEY: OPENAI_KEY },
      modelsJson: { providers: { openai: { baseUrl: "https://proxy.corp.example/openai/v1" } } },
    });
    expect(routing.routes).toEqual([
      {
        id: "openai",
        upstreamBaseUrl: "https://proxy.corp.example/openai/v1",
        api: "openai-responses",
        headers: { authorization: `Bearer ${OPENAI_KEY}` },
      },
    ]);
    expect(routing.containerModelsJson.providers.openai).toEqual({
      baseUrl: `${GATEWAY}/openai`,
      apiKey: SANDBOX_PLACEHOLDER_API_KEY,
    });
  });

  it("rejects unknown providers, malformed model ids and un-routable built-ins", () => {
    const unknown = usageErrorOf(() => plan({ model: "nosuch/model-1" }));
    expect(unknown.shortMessage).toContain('Unknown model provider "nosuch"');
    expect(unknown.hint).toContain("models.json");
    const malformed = usageErrorOf(() => plan({ model: "gpt-5" }));
    expect(malformed.hint).toContain("provider");
    const openrouter = usageErrorOf(() => plan({ model: "openrouter/some/model", env: { OPENROUTER_API_KEY: "x" } }));
    expect(openrouter.shortMessage).toContain("cannot be routed");
  });
});

describe("planProviderRouting: custom providers from models.json", () => {
  it("routes a key-less local provider without credential headers but with a placeholder key", () => {
    const modelsJson = {
      providers: {
        ollama: {
          baseUrl: "http://127.0.0.1:11434/v1",
          api: "openai-completions",
          models: [{ id: "qwen2.5-coder:7b", contextWindow: 32768 }],
        },
      },
    };
    const routing = plan({ model: "ollama/qwen2.5-coder:7b", modelsJson });
    expect(routing.routes).toEqual([
      { id: "ollama", upstreamBaseUrl: "http://127.0.0.1:11434/v1", api: "openai-completions", headers: {} },
    ]);
    expect(routing.containerModelsJson.providers.ollama).toEqual({
      api: "openai-completions",
      baseUrl: `${GATEWAY}/ollama`,
      apiKey: SANDBOX_PLACEHOLDER_API_KEY,
      models: [{ id: "qwen2.5-coder:7b", contextWindow: 32768 }],
    });
  });

  it("resolves $ENV, ${ENV} and literal values on the host and keeps them out of the container", () => {
    const modelsJson = {
      providers: {
        corp: {
          baseUrl: "https://llm.corp.example/v1",
          api: "openai-completions",
          apiKey: "$CORP_KEY",
          headers: { "X-Team": "team-${TEAM_ID}", "X-Price": "$$5" },
          models: [{ id: "corp-chat" }],
        },
        claude: {
          baseUrl: "https://claude-proxy.example",
          api: "anthropic-messages",
          apiKey: "literal-REAL-anthropic-proxy-key",
          models: [{ id: "proxied-sonnet" }],
        },
      },
    };
    const env = { CORP_KEY: CUSTOM_KEY, TEAM_ID: "42" };
    const routing = plan({ model: "corp/corp-chat", modelsJson, env });
    const corp = routing.routes.find((r) => r.id === "corp");
    expect(corp?.headers).toEqual({ authorization: `Bearer ${CUSTOM_KEY}`, "x-team": "team-42", "x-price": "$5" });
    // anthropic-messages: the key goes in x-api-key, as Pi's Anthropic client sends it.
    const claude = routing.routes.find((r) => r.id === "claude");
    expect(claude).toEqual({
      id: "claude",
      upstreamBaseUrl: "https://claude-proxy.example",
      api: "anthropic-messages",
      headers: { "x-api-key": "literal-REAL-anthropic-proxy-key" },
    });
    const container = routing.containerModelsJson.providers;
    expect(container.corp).toEqual({
      api: "openai-completions",
      baseUrl: `${GATEWAY}/corp`,
      apiKey: SANDBOX_PLACEHOLDER_API_KEY,
      models: [{ id: "corp-chat" }],
    });
    expect(container.claude).toMatchObject({ baseUrl: `${GATEWAY}/claude`, apiKey: SANDBOX_PLACEHOLDER_API_KEY });
    expectNoSecrets(routing.containerModelsJson, [
      CUSTOM_KEY,
      "literal-REAL-anthropic-proxy-key",
      "team-42",
      "$CORP_KEY",
    ]);
    expect(JSON.stringify(routing.containerModelsJson)).not.toContain('"headers"');
    expect(routing.credentialEnvNames).toEqual(expect.arrayContaining(["CORP_KEY", "TEAM_ID", "OPENAI_API_KEY"]));
  });

  it("adds Authorization: Bearer when authHeader is true", () => {
    const routing = plan({
      model: "gw/m1",
      env: { GW_KEY: CUSTOM_KEY },
      modelsJson: {
        providers: {
          gw: {
            baseUrl: "https://gw.example",
            api: "anthropic-messages",
            apiKey: "$GW_KEY",
            authHeader: true,
            models: [{ id: "m1" }],
          },
        },
      },
    });
    expect(routing.routes[0]?.headers).toEqual({ "x-api-key": CUSTOM_KEY, authorization: `Bearer ${CUSTOM_KEY}` });
    expect((routing.containerModelsJson.providers.gw as Record<string, unknown>).authHeader).toBe(true);
  });

  it("gives models with their own baseUrl, api or headers their own route", () => {
    const modelsJson = {
      providers: {
        "My.Provider": {
          baseUrl: "https://main.example/v1",
          api: "openai-completions",
          apiKey: "$MAIN_KEY",
          models: [
            { id: "plain" },
            { id: "elsewhere", baseUrl: "https://other.example/v1" },
            { id: "Claude Like", api: "anthropic-messages" },
            { id: "with-header", headers: { "X-Model-Key": "$MODEL_KEY" } },
            { id: "same-base", baseUrl: "https://main.example/v1" },
          ],
        },
      },
    };
    const env = { MAIN_KEY: CUSTOM_KEY, MODEL_KEY: "model-REAL-secret-0123456789" };
    const routing = plan({ model: "My.Provider/elsewhere", modelsJson, env });
    expect(routing.routes).toEqual([
      {
        id: "my-provider",
        upstreamBaseUrl: "https://main.example/v1",
        api: "openai-completions",
        headers: { authorization: `Bearer ${CUSTOM_KEY}` },
      },
      {
        id: "my-provider--elsewhere",
        upstreamBaseUrl: "https://other.example/v1",
        api: "openai-completions",
        headers: { authorization: `Bearer ${CUSTOM_KEY}` },
      },
      {
        id: "my-provider--claude-like",
        upstreamBaseUrl: "https://main.example/v1",
        api: "anthropic-messages",
        headers: { "x-api-key": CUSTOM_KEY },
      },
      {
        id: "my-provider--with-header",
        upstreamBaseUrl: "https://main.example/v1",
        api: "openai-completions",
        headers: { authorization: `Bearer ${CUSTOM_KEY}`, "x-model-key": "model-REAL-secret-0123456789" },
      },
    ]);
    expect(routing.selectedRouteId).toBe("my-provider--elsewhere");
    for (const route of routing.routes) expect(route.id).toMatch(/^[a-z0-9_-]+$/);
    const entry = routing.containerModelsJson.providers["My.Provider"] as {
      baseUrl: string;
      models: Array<Record<string, unknown>>;
    };
    expect(entry.baseUrl).toBe(`${GATEWAY}/my-provider`);
    expect(entry.models).toEqual([
      { id: "plain" },
      { id: "elsewhere", baseUrl: `${GATEWAY}/my-provider--elsewhere` },
      { id: "Claude Like", api: "anthropic-messages", baseUrl: `${GATEWAY}/my-provider--claude-like` },
      { id: "with-header", baseUrl: `${GATEWAY}/my-provider--with-header` },
      { id: "same-base" },
    ]);
    expectNoSecrets(routing.containerModelsJson, [
      CUSTOM_KEY,
      "model-REAL-secret-0123456789",
      "other.example",
      "main.example",
    ]);
  });

  it("runs !command values on the host for the selected provider only", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "gw-routes-"));
    const marker = path.join(dir, "ran");
    try {
      const routing = plan({
        model: "vault/m",
        env: { PATH: process.env.PATH },
        modelsJson: {
          providers: {
            vault: {
              baseUrl: "https://vault-llm.example/v1",
              api: "openai-completions",
              apiKey: "!printf '%s' cmd-REAL-secret-0123456789",
              models: [{ id: "m" }],
            },
            other: {
              baseUrl: "https://other-llm.example/v1",
              api: "openai-completions",
              apiKey: `!touch ${marker}; echo other-secret`,
              models: [{ id: "o" }],
            },
          },
        },
      });
      expect(routing.routes.find((r) => r.id === "vault")?.headers).toEqual({
        authorization: "Bearer cmd-REAL-secret-0123456789",
      });
      // The other provider's command is not run: no credentials, and Pi inside sees it as unconfigured.
      expect(existsSync(marker)).toBe(false);
      expect(routing.routes.find((r) => r.id === "other")?.headers).toEqual({});
      expect(routing.containerModelsJson.providers.other).not.toHaveProperty("apiKey");
      expectNoSecrets(routing.containerModelsJson, ["cmd-REAL-secret-0123456789", "printf", "touch"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports unresolvable credentials of the selected provider, and tolerates them elsewhere", () => {
    const modelsJson = {
      providers: {
        a: { baseUrl: "https://a.example/v1", api: "openai-completions", apiKey: "$A_KEY", models: [{ id: "m" }] },
        b: { baseUrl: "https://b.example/v1", api: "openai-completions", apiKey: "$B_KEY", models: [{ id: "m" }] },
      },
    };
    const error = usageErrorOf(() => plan({ model: "a/m", modelsJson, env: { B_KEY: "b" } }));
    expect(error.shortMessage).toContain("A_KEY");
    expect(error.hint).toContain("Set A_KEY");
    const routing = plan({ model: "b/m", modelsJson, env: { B_KEY: CUSTOM_KEY } });
    expect(routing.routes.find((r) => r.id === "a")?.headers).toEqual({});
    expect(routing.containerModelsJson.providers.a).not.toHaveProperty("apiKey");
    expect(routing.routes.find((r) => r.id === "b")?.headers).toEqual({ authorization: `Bearer ${CUSTOM_KEY}` });

    const failing = usageErrorOf(() =>
      plan({
        model: "c/m",
        env: { PATH: process.env.PATH },
        modelsJson: {
          providers: {
            c: { baseUrl: "https://c.example", api: "openai-completions", apiKey: "!exit 3", models: [{ id: "m" }] },
          },
        },
      }),
    );
    expect(failing.shortMessage).toContain("exited with status 3");
  });

  it("rejects a model the custom provider does not define", () => {
    const error = usageErrorOf(() =>
      plan({
        model: "ollama/llama3",
        modelsJson: {
          providers: {
            ollama: { baseUrl: "http://127.0.0.1:11434/v1", api: "openai-completions", models: [{ id: "qwen" }] },
          },
        },
      }),
    );
    expect(error.shortMessage).toContain('Model "llama3" is not defined');
    expect(error.hint).toContain("ollama/qwen");
  });

  it("rejects APIs the gateway cannot police and per-model header overrides", () => {
    const api = usageErrorOf(() =>
      plan({
        model: "br/m",
        modelsJson: {
          providers: {
            br: { baseUrl: "https://bedrock.example", api: "bedrock-converse-stream", models: [{ id: "m" }] },
          },
        },
      }),
    );
    expect(api.shortMessage).toContain("bedrock-converse-stream");
    expect(api.hint).toContain("openai-completions");
    const overrides = usageErrorOf(() =>
      plan({
        model: "openai/gpt-5",
        env: { OPENAI_API_KEY: OPENAI_KEY },
        modelsJson: { providers: { openai: { modelOverrides: { "gpt-5": { headers: { "X-Key": "$SECRET" } } } } } },
      }),
    );
    expect(overrides.shortMessage).toContain("providers.openai.modelOverrides.gpt-5.headers");
  });

  it("validates the models.json shape and reports path: message", () => {
    const error = usageErrorOf(() =>
      plan({
        model: "x/m",
        modelsJson: { providers: { x: { baseUrl: "not a url", apiKey: 7, models: [{ name: "no id" }] } } },
      }),
    );
    expect(error.shortMessage).toContain("Invalid models.json");
    expect(error.shortMessage).toMatch(/providers\.x\.baseUrl: .*http/);
    expect(error.shortMessage).toMatch(/providers\.x\.apiKey: /);
    expect(error.shortMessage).toMatch(/providers\.x\.models\.0\.id: /);
    const notObject = usageErrorOf(() => plan({ model: "x/m", modelsJson: { providers: [] } }));
    expect(notObject.shortMessage).toMatch(/providers: /);
  });

  it("never leaves a real key in the container models.json, whatever the mix", () => {
    const env = {
      OPENAI_API_KEY: OPENAI_KEY,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      CORP_KEY: CUSTOM_KEY,
      HDR: "header-REAL-secret-0123456789",
    };
    const routing = plan({
      model: "anthropic/claude-sonnet-4-5",
      env,
      modelsJson: {
        providers: {
          openai: { apiKey: "$OPENAI_API_KEY", headers: { "OpenAI-Organization": "$HDR" } },
          anthropic: { headers: { "x-extra": "$HDR" } },
          corp: {
            baseUrl: "https://corp.example/v1",
            api: "openai-responses",
            apiKey: "$CORP_KEY",
            models: [{ id: "c1", headers: { Authorization: "Bearer $HDR" } }],
          },
        },
      },
    });
    const serialized = JSON.stringify(routing.containerModelsJson);
    for (const secret of Object.values(env)) expect(serialized).not.toContain(secret);
    const keys = JSON.stringify(
      Object.values(routing.containerModelsJson.providers).map((p) => (p as Record<string, unknown>).apiKey),
    );
    expect(keys).not.toMatch(/REAL/);
    // ...while the routes carry them.
    const routesText = JSON.stringify(routing.routes);
    for (const secret of Object.values(env)) expect(routesText).toContain(secret);
  });
});
