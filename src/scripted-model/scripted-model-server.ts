// An OpenAI-compatible chat-completions server whose replies follow a script.
// It stands in for a model service (none is reachable on CI machines) in the tests,
// the benchmark and `sandbox-run demo`. The model id in the request picks the script;
// the number of assistant messages already in the conversation picks the step, so the
// server keeps no per-conversation state and many runs can share it.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ToolCallStep {
  toolCalls: Array<{ name: string; arguments: unknown }>;
}
export interface TextStep {
  text: string;
}
/** Fail the request with an HTTP status (the provider is "down"). */
export interface ErrorStep {
  httpStatus: number;
  body?: string;
}
/** Stream chunks forever (a model that never stops talking). */
export interface EndlessStep {
  endless: true;
}
export type ScriptStep = ToolCallStep | TextStep | ErrorStep | EndlessStep;

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string;
}
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: Array<{ function?: { name?: string } }>;
  stream?: boolean;
}
export interface RecordedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: ChatRequest;
}

/** A script: a fixed list of steps, or a function of the request and turn index. */
export type Script = ScriptStep[] | ((request: ChatRequest, turn: number) => ScriptStep);

export interface ScriptedModelServer {
  /** Base URL for an `openai-completions` provider, ending in /v1. */
  readonly baseUrl: string;
  readonly requests: RecordedRequest[];
  setScript(modelId: string, script: Script): void;
  close(): Promise<void>;
}

export interface ScriptedModelServerOptions {
  scripts?: Record<string, Script>;
  host?: string;
  port?: number;
}

export async function startScriptedModelServer(options: ScriptedModelServerOptions = {}): Promise<ScriptedModelServer> {
  const scripts = new Map<string, Script>(Object.entries(options.scripts ?? {}));
  const requests: RecordedRequest[] = [];
  const openResponses = new Set<http.ServerResponse>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "GET" && req.url?.endsWith("/models")) {
        const data = [...scripts.keys()].map((id) => ({ id, object: "model" }));
        return sendJson(res, 200, { object: "list", data });
      }
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        return sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
      }
      let body: ChatRequest;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
      } catch {
        return sendJson(res, 400, { error: { message: "body is not JSON" } });
      }
      requests.push({ path: req.url, headers: req.headers, body });
      const script = scripts.get(body.model);
      if (!script) {
        return sendJson(res, 404, { error: { message: `unknown scripted model ${body.model}` } });
      }
      const turn = body.messages.filter((m) => m.role === "assistant").length;
      const step = pickStep(script, body, turn);
      openResponses.add(res);
      res.on("close", () => openResponses.delete(res));
      reply(res, body, step);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve);
  });
  const address = server.address() as AddressInfo;
  const baseUrl = `http://${address.address}:${address.port}/v1`;

  return {
    baseUrl,
    requests,
    setScript: (modelId, script) => void scripts.set(modelId, script),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of openResponses) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function pickStep(script: Script, request: ChatRequest, turn: number): ScriptStep {
  if (typeof script === "function") return script(request, turn);
  return script[turn] ?? { text: "Done." };
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

let callCounter = 0;

function reply(res: http.ServerResponse, request: ChatRequest, step: ScriptStep): void {
  if ("httpStatus" in step) {
    sendJson(res, step.httpStatus, { error: { message: step.body ?? `scripted failure ${step.httpStatus}` } });
    return;
  }
  const id = `chatcmpl-${++callCounter}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: object, finish: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: request.model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const usage = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };

  if (request.stream === false) {
    const message =
      "text" in step
        ? { role: "assistant", content: step.text }
        : "toolCalls" in step
          ? { role: "assistant", content: null, tool_calls: toolCallsOf(step) }
          : { role: "assistant", content: "" };
    sendJson(res, 200, {
      id,
      object: "chat.completion",
      created,
      model: request.model,
      choices: [{ index: 0, message, finish_reason: "toolCalls" in step ? "tool_calls" : "stop" }],
      usage,
    });
    return;
  }

  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (value: unknown) => res.write(`data: ${JSON.stringify(value)}\n\n`);
  send(chunk({ role: "assistant", content: "" }, null));

  if ("endless" in step) {
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      send(chunk({ content: "and on " }, null));
    }, 5);
    res.on("close", () => clearInterval(timer));
    return;
  }
  if ("text" in step) {
    send(chunk({ content: step.text }, null));
    send(chunk({}, "stop"));
  } else {
    toolCallsOf(step).forEach((call, index) => {
      send(chunk({ tool_calls: [{ index, ...call }] }, null));
    });
    send(chunk({}, "tool_calls"));
  }
  send({ id, object: "chat.completion.chunk", created, model: request.model, choices: [], usage });
  res.end("data: [DONE]\n\n");
}

function toolCallsOf(step: ToolCallStep) {
  return step.toolCalls.map((call, i) => ({
    id: `call_${callCounter}_${i}`,
    type: "function",
    function: {
      name: call.name,
      arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
    },
  }));
}
