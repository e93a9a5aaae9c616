import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import {
  ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY,
  type ProviderRouting,
  type ProviderRoutingInput,
  planProviderRouting,
  SANDBOX_PLACEHOLDER_API_KEY,
} from "../../src/gateway/provider-routes.js";
import { describeRouteCredentials, resolveRouteCredentials } from "../../src/gateway/route-credentials.js";

const GATEWAY = "http://127.0.0.1:18080";
const ANTHROPIC_KEY = "sk-ant-api03-REAL-anthropic-key-0123456789";
const ANTHROPIC_OAUTH = "sk-ant-oat01-REAL-oauth-token-0123456789";
const OPENAI_KEY = "sk-proj-REAL-openai-key-0123456789abcdef";
const CUSTOM_KEY = "custom-REAL-secret-key-0123456789";

function plan(input: Partial<ProviderRoutingInput> & { model: string }) {
  return planProviderRouting({ env: {}, gatewayBaseUrl: GATEWAY, ...input });
}

/** The routes as the gateway gets them when the run starts: credentials resolved. */
function resolved(routing: ProviderRouting, env: Record<string, string | undefined> = {}) {
  return resolveRouteCredentials(routing, { env });
}

/** Plans and resolves in the same environment, as a run does. */
function routesOf(input: Partial<ProviderRoutingInput> & { model: string }) {
  return resolved(plan(input), input.env ?? {});
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
    const env = { ANTHROPIC_API_KEY: ANTHROPIC_KEY };
    const routing = plan({ model: "anthropic/claude-sonnet-4-5", env });
    expect(resolved(routing, env)).toEqual([
      {
        id: "anthropic",
        upstreamBaseUrl: "https://api.anthropic.com",
        api: "anthropic-messages",
        model: "claude-sonnet-4-5",
        headers: { "x-api-key": ANTHROPIC_KEY },
      },
    ]);
    expect(routing.selectedRouteId).toBe("anthropic");
    expect(routing.containerModelsJson).toEqual({
      providers: { anthropic: { baseUrl: `${GATEWAY}/anthropic`, apiKey: SANDBOX_PLACEHOLDER_API_KEY } },
    });
    // The plan itself names where the key comes from, not the key.
    expectNoSecrets(routing, [ANTHROPIC_KEY]);
    expect(describeRouteCredentials(routing.routes[0]!)).toEqual({ "x-api-key": "$ANTHROPIC_API_KEY" });
    expect(routing.credentialEnvNames).toEqual(
      expect.arrayContaining(["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"]),
    );
  });

  it("sends an Anthropic OAuth token as Bearer and gives Pi an OAuth-shaped placeholder", () => {
    const env = { ANTHROPIC_OAUTH_TOKEN: ANTHROPIC_OAUTH, ANTHROPIC_API_KEY: ANTHROPIC_KEY };
    const routing = plan({ model: "anthropic/claude-sonnet-4-5", env });
    // Pi reads ANTHROPIC_OAUTH_TOKEN before ANTHROPIC_API_KEY.
    expect(resolved(routing, env)[0]?.headers).toEqual({ authorization: `Bearer ${ANTHROPIC_OAUTH}` });
    const entry = routing.containerModelsJson.providers.anthropic as Record<string, unknown>;
    expect(entry.apiKey).toBe(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY);
    expect(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY).toContain("sk-ant-oat");
    expect(ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY).toContain(SANDBOX_PLACEHOLDER_API_KEY);
    expectNoSecrets(routing, [ANTHROPIC_OAUTH, ANTHROPIC_KEY]);
  });

  it("prefers ANTHROPIC_AUTH_TOKEN and sends it as Authorization: Bearer only", () => {
    const env = { ANTHROPIC_AUTH_TOKEN: "auth-token-REAL-0123456789", ANTHROPIC_API_KEY: ANTHROPIC_KEY };
    const routing = plan({ model: "anthropic/claude-haiku-4-5", env });
    expect(resolved(routing, env)[0]?.headers).toEqual({ authorization: "Bearer auth-token-REAL-0123456789" });
    expectNoSecrets(routing, ["auth-token-REAL-0123456789", ANTHROPIC_KEY]);
  });

  it("routes openai (openai-responses on api.openai.com/v1) with Authorization: Bearer, and nothing else", () => {
    const env = { OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY };
    const routing = plan({ model: "openai/gpt-5", env });
    // Only the run's provider is routed: the anthropic key is not carried at all.
    const routes = resolved(routing, env);
    expect(routes).toEqual([
      {
        id: "openai",
        upstreamBaseUrl: "https://api.openai.com/v1",
        api: "openai-responses",
        model: "gpt-5",
        headers: { authorization: `Bearer ${OPENAI_KEY}` },
      },
    ]);
    expect(routing.containerModelsJson.providers).toEqual({
      openai: { baseUrl: `${GATEWAY}/openai`, apiKey: SANDBOX_PLACEHOLDER_API_KEY },
    });
    expectNoSecrets(routes, [ANTHROPIC_KEY]);
    expectNoSecrets(routing, [ANTHROPIC_KEY, OPENAI_KEY]);
  });

  it("routes OpenAI-compatible built-ins and google with their verified endpoints", () => {
    expect(
      routesOf({ model: "groq/llama-3.1-8b-instant", env: { GROQ_API_KEY: "gsk-REAL-0123456789abcdef" } })[0],
    ).toMatchObject({
      upstreamBaseUrl: "https://api.groq.com/openai/v1",
      api: "openai-completions",
      model: "llama-3.1-8b-instant",
      headers: { authorization: "Bearer gsk-REAL-0123456789abcdef" },
    });
    expect(
      routesOf({ model: "google/gemini-2.5-pro", env: { GEMINI_API_KEY: "gemini-REAL-0123456789" } })[0],
    ).toMatchObject({
      upstreamBaseUrl: "https://generativelanguage.googleapis.com/v1beta",
      api: "google-generative-ai",
      headers: { "x-goog-api-key": "gemini-REAL-0123456789" },
    });
    expect(
      routesOf({ model: "mistral/codestral-2508", env: { MISTRAL_API_KEY: "mistral-REAL-0123456789" } })[0],
    ).toMatchObject({
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
    expect(resolved(routing, { OPENAI_API_KEY: OPENAI_KEY })).toEqual([
      {
        id: "openai",
        upstreamBaseUrl: "https://proxy.corp.example/openai/v1",
        api: "openai-responses",
        model: "gpt-5",
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
          models: [{ id: "qwen2.5-coder:7b", contextWindow: 32768 }, { id: "other" }],
        },
      },
    };
    const routing = plan({ model: "ollama/qwen2.5-coder:7b", modelsJson });
    expect(resolved(routing)).toEqual([
      {
        id: "ollama",
        upstreamBaseUrl: "http://127.0.0.1:11434/v1",
        api: "openai-completions",
        model: "qwen2.5-coder:7b",
        headers: {},
      },
    ]);
    // Only the run's model: any other would need a route of its own.
    expect(routing.containerModelsJson.providers.ollama).toEqual({
      api: "openai-completions",
      baseUrl: `${GATEWAY}/ollama`,
      apiKey: SANDBOX_PLACEHOLDER_API_KEY,
      models: [{ id: "qwen2.5-coder:7b", contextWindow: 32768 }],
    });
  });

  it("resolves $ENV, ${ENV} and literal values, routes only the run's provider and keeps them out of the container", () => {
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
    const routes = resolved(routing, env);
    expect(routes).toEqual([
      {
        id: "corp",
        upstreamBaseUrl: "https://llm.corp.example/v1",
        api: "openai-completions",
        model: "corp-chat",
        headers: { authorization: `Bearer ${CUSTOM_KEY}`, "x-team": "team-42", "x-price": "$5" },
      },
    ]);
    expectNoSecrets(routes, ["literal-REAL-anthropic-proxy-key", "claude-proxy.example"]);
    expect(routing.containerModelsJson.providers).toEqual({
      corp: {
        api: "openai-completions",
        baseUrl: `${GATEWAY}/corp`,
        apiKey: SANDBOX_PLACEHOLDER_API_KEY,
        models: [{ id: "corp-chat" }],
      },
    });
    expectNoSecrets(routing.containerModelsJson, [CUSTOM_KEY, "team-42", "$CORP_KEY"]);
    expect(routing.credentialEnvNames).toEqual(expect.arrayContaining(["CORP_KEY", "TEAM_ID", "OPENAI_API_KEY"]));

    // The other provider, when it is the run's: anthropic-messages sends the key as x-api-key.
    const claude = routesOf({ model: "claude/proxied-sonnet", modelsJson });
    expect(claude).toEqual([
      {
        id: "claude",
        upstreamBaseUrl: "https://claude-proxy.example",
        api: "anthropic-messages",
        model: "proxied-sonnet",
        headers: { "x-api-key": "literal-REAL-anthropic-proxy-key" },
      },
    ]);
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
    expect(resolved(routing, { GW_KEY: CUSTOM_KEY })[0]?.headers).toEqual({
      "x-api-key": CUSTOM_KEY,
      authorization: `Bearer ${CUSTOM_KEY}`,
    });
    expect((routing.containerModelsJson.providers.gw as Record<string, unknown>).authHeader).toBe(true);
  });

  it("routes the run's model with its own baseUrl, api and headers, and no other model", () => {
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
          ],
        },
      },
    };
    const env = { MAIN_KEY: CUSTOM_KEY, MODEL_KEY: "model-REAL-secret-0123456789" };
    const route = (id: string) => {
      const routing = plan({ model: `My.Provider/${id}`, modelsJson, env });
      expect(routing.routes).toHaveLength(1);
      expect(routing.selectedRouteId).toBe("my-provider");
      const entry = routing.containerModelsJson.providers["My.Provider"] as Record<string, unknown>;
      expect(entry.baseUrl).toBe(`${GATEWAY}/my-provider`);
      expectNoSecrets(routing.containerModelsJson, [
        CUSTOM_KEY,
        "model-REAL-secret-0123456789",
        "other.example",
        "main.example",
      ]);
      return { route: resolved(routing, env)[0], models: entry.models };
    };
    expect(route("elsewhere")).toEqual({
      route: {
        id: "my-provider",
        upstreamBaseUrl: "https://other.example/v1",
        api: "openai-completions",
        model: "elsewhere",
        headers: { authorization: `Bearer ${CUSTOM_KEY}` },
      },
      models: [{ id: "elsewhere" }],
    });
    expect(route("Claude Like")).toEqual({
      route: {
        id: "my-provider",
        upstreamBaseUrl: "https://main.example/v1",
        api: "anthropic-messages",
        model: "Claude Like",
        headers: { "x-api-key": CUSTOM_KEY },
      },
      models: [{ id: "Claude Like", api: "anthropic-messages" }],
    });
    expect(route("with-header").route?.headers).toEqual({
      authorization: `Bearer ${CUSTOM_KEY}`,
      "x-model-key": "model-REAL-secret-0123456789",
    });
  });

  it("runs !command values only when the run starts, and only the run's provider's", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "gw-routes-"));
    const ran = path.join(dir, "ran");
    const other = path.join(dir, "other-ran");
    try {
      const env = { PATH: process.env.PATH };
      const routing = plan({
        model: "vault/m",
        env,
        modelsJson: {
          providers: {
            vault: {
              baseUrl: "https://vault-llm.example/v1",
              api: "openai-completions",
              apiKey: `!touch ${ran}; printf '%s' cmd-REAL-secret-0123456789`,
              models: [{ id: "m" }],
            },
            other: {
              baseUrl: "https://other-llm.example/v1",
              api: "openai-completions",
              apiKey: `!touch ${other}; echo other-secret`,
              models: [{ id: "o" }],
            },
          },
        },
      });
      // Planning (what --dry-run and agent.plan() do) runs nothing.
      expect(existsSync(ran)).toBe(false);
      expect(describeRouteCredentials(routing.routes[0]!)).toEqual({
        authorization: "models.json providers.vault.apiKey (command, run when the run starts)",
      });
      expect(routing.containerModelsJson.providers).not.toHaveProperty("other");
      expectNoSecrets(routing.containerModelsJson, ["cmd-REAL-secret-0123456789", "printf", "touch"]);

      const routes = resolved(routing, env);
      expect(existsSync(ran)).toBe(true);
      expect(routes[0]?.headers).toEqual({ authorization: "Bearer cmd-REAL-secret-0123456789" });
      expect(existsSync(other)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses every !command value when asked to, naming the file and why, and runs none", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "gw-routes-"));
    const marker = path.join(dir, "ran");
    try {
      const modelsJson = {
        providers: {
          local: { baseUrl: "http://127.0.0.1:1/v1", api: "openai-completions", models: [{ id: "m" }] },
          other: {
            baseUrl: "https://other.example/v1",
            api: "openai-completions",
            headers: { "X-Token": `!touch ${marker}` },
            models: [{ id: "o", headers: { "X-More": `!touch ${marker}` } }],
          },
        },
      };
      const refused = usageErrorOf(() =>
        plan({
          model: "local/m",
          modelsJson,
          refuseCommands: { file: "/ws/models.json", because: "it lies inside the workspace /ws" },
        }),
      );
      expect(refused.shortMessage).toContain("The models file /ws/models.json");
      expect(refused.shortMessage).toContain(
        "providers.other.headers.X-Token, providers.other.models.0.headers.X-More",
      );
      expect(refused.shortMessage).toContain("it lies inside the workspace /ws");
      expect(refused.hint).toContain("$VARIABLE");
      expect(existsSync(marker)).toBe(false);
      // Without the option the same file plans (and the other provider's commands never run).
      expect(plan({ model: "local/m", modelsJson }).routes).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports unresolvable credentials of the run's provider: variables when planning, commands when the run starts", () => {
    const modelsJson = {
      providers: {
        a: { baseUrl: "https://a.example/v1", api: "openai-completions", apiKey: "$A_KEY", models: [{ id: "m" }] },
        b: { baseUrl: "https://b.example/v1", api: "openai-completions", apiKey: "$B_KEY", models: [{ id: "m" }] },
      },
    };
    const error = usageErrorOf(() => plan({ model: "a/m", modelsJson, env: { B_KEY: "b" } }));
    expect(error.shortMessage).toContain("providers.a.apiKey");
    expect(error.shortMessage).toContain("A_KEY");
    expect(error.hint).toContain("Set A_KEY");
    expect(routesOf({ model: "b/m", modelsJson, env: { B_KEY: CUSTOM_KEY } })).toEqual([
      expect.objectContaining({ id: "b", headers: { authorization: `Bearer ${CUSTOM_KEY}` } }),
    ]);

    const failing = plan({
      model: "c/m",
      modelsJson: {
        providers: {
          c: { baseUrl: "https://c.example", api: "openai-completions", apiKey: "!exit 3", models: [{ id: "m" }] },
        },
      },
    });
    const atStart = usageErrorOf(() => resolved(failing, { PATH: process.env.PATH }));
    expect(atStart.shortMessage).toContain("providers.c.apiKey");
    expect(atStart.shortMessage).toContain("the command (exit) exited with status 3");
    // A command's text can carry a token of its own: only its program is named.
    const quoted = plan({
      model: "c/m",
      modelsJson: {
        providers: {
          c: {
            baseUrl: "https://c.example",
            api: "openai-completions",
            apiKey: "!/bin/sh -c 'exit 6' --header X-Vault-Token:hvs.REALVAULTTOKEN0123",
            models: [{ id: "m" }],
          },
        },
      },
    });
    const failed = usageErrorOf(() => resolved(quoted, { PATH: process.env.PATH }));
    expect(failed.shortMessage).toContain("the command (sh) exited with status 6");
    expect(JSON.stringify(failed)).not.toContain("REALVAULTTOKEN");
    expect(`${failed.shortMessage} ${failed.hint}`).not.toContain("REALVAULTTOKEN");
  });

  it("refuses a command's credential that also appears in the sandbox's models.json, and an OAuth token the plan did not expect", () => {
    const leaky = plan({
      model: "c/model-cmd-REAL-secret-0123456789",
      modelsJson: {
        providers: {
          c: {
            baseUrl: "https://c.example",
            api: "openai-completions",
            apiKey: "!printf cmd-REAL-secret-0123456789",
            models: [{ id: "model-cmd-REAL-secret-0123456789" }],
          },
        },
      },
    });
    expect(usageErrorOf(() => resolved(leaky, { PATH: process.env.PATH })).shortMessage).toContain(
      "also appears in a non-credential field",
    );
    const oauth = plan({
      model: "anthropic/claude-sonnet-4-5",
      modelsJson: { providers: { anthropic: { apiKey: `!printf ${ANTHROPIC_OAUTH}` } } },
    });
    expect((oauth.containerModelsJson.providers.anthropic as Record<string, unknown>).apiKey).toBe(
      SANDBOX_PLACEHOLDER_API_KEY,
    );
    expect(usageErrorOf(() => resolved(oauth, { PATH: process.env.PATH })).hint).toContain("ANTHROPIC_OAUTH_TOKEN");
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

  it("never leaves a real key in the container models.json, and routes only the run's provider's keys", () => {
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
    expect(Object.keys(routing.containerModelsJson.providers)).toEqual(["anthropic"]);
    const routesText = JSON.stringify(resolved(routing, env));
    expect(routesText).toContain(ANTHROPIC_KEY);
    expect(routesText).toContain("header-REAL-secret-0123456789");
    expect(routesText).not.toContain(OPENAI_KEY);
    expect(routesText).not.toContain(CUSTOM_KEY);
  });
});
