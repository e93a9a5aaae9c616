// A model service whose replies follow a script, speaking the wire formats of the Pi APIs the
// gateway routes, each at its own base URL (baseUrlFor(api); baseUrl is openai-completions).
// It stands in for a model provider (none is reachable on CI machines) in the tests, the
// benchmark and `sandbox-run demo`. The model id in the request picks the script; the number
// of assistant replies already in the conversation picks the step, so the server keeps no
// per-conversation state and many runs can share it.
//
// Every request is recorded with what was sent back (status, headers, the raw bytes), so tests
// can check what a client sent and feed the exact reply bytes to a parser.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { codecFor, type ModelRequest } from "../gateway/apis/api-codec.js";
import { anthropicMessagesWire } from "./anthropic-messages-wire.js";
import { googleGenerativeAiWire } from "./google-generative-ai-wire.js";
import { mistralConversationsWire } from "./mistral-conversations-wire.js";
import { openAiCompletionsWire } from "./openai-completions-wire.js";
import { openAiResponsesWire } from "./openai-responses-wire.js";
import { type ChatRequest, pickStep, type Script, type ScriptedApi, type ScriptStep } from "./script.js";
import { sendJson, type WireFormat } from "./wire-format.js";

export type { ChatRequest, Script, ScriptContext, ScriptedApi, ScriptStep } from "./script.js";
export { SCRIPTED_APIS } from "./script.js";

/** Most response bytes kept per request (an endless reply would grow without end). */
const MAX_RECORDED_RESPONSE_BYTES = 1024 * 1024;

interface RecordedResponse {
  status: number;
  headers: http.OutgoingHttpHeaders;
  /** The body as written, chunk by chunk (at most 1 MiB; see `bodyTruncated`). */
  chunks: Buffer[];
  bodyTruncated: boolean;
  /** The reply was written to its end (false while it streams, or if the client left). */
  ended: boolean;
}

export interface RecordedRequest {
  api: ScriptedApi;
  /** The model the request named (Google: from the URL path). */
  model: string | undefined;
  /** The request path, with its query string. */
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The parsed JSON body: an openai-completions ChatRequest, or the other API's own shape. */
  body: ChatRequest;
  /** The request in neutral form (the api codec's reading), when it could be read. */
  conversation?: ModelRequest;
  response: RecordedResponse;
}

export interface ScriptedModelServer {
  /** Base URL for an `openai-completions` provider, ending in /v1. */
  readonly baseUrl: string;
  /** Base URL for a provider of the given Pi `api` (the models.json `baseUrl`). */
  baseUrlFor(api: ScriptedApi): string;
  readonly requests: RecordedRequest[];
  /** What the scripts threw (each answered with a 400 naming it). */
  readonly scriptErrors: readonly Error[];
  setScript(modelId: string, script: Script): void;
  close(): Promise<void>;
}

interface ScriptedModelServerOptions {
  scripts?: Record<string, Script>;
  host?: string;
  port?: number;
}

const WIRES: readonly WireFormat[] = [
  openAiResponsesWire,
  anthropicMessagesWire,
  googleGenerativeAiWire,
  mistralConversationsWire,
  // Last: its base path "/v1" is also the fallback for any other path (as before it had peers).
  openAiCompletionsWire,
];

export function scriptedBaseUrlFor(origin: string, api: ScriptedApi): string {
  const wire = WIRES.find((w) => w.api === api);
  if (!wire) throw new Error(`the scripted model server does not speak ${api}`);
  return `${origin}${wire.basePath}`;
}

export async function startScriptedModelServer(options: ScriptedModelServerOptions = {}): Promise<ScriptedModelServer> {
  const scripts = new Map<string, Script>(Object.entries(options.scripts ?? {}));
  const requests: RecordedRequest[] = [];
  const openResponses = new Set<http.ServerResponse>();
  const scriptErrors: Error[] = [];
  let seq = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://scripted");
      const { wire, subpath } = routeOf(url.pathname);
      const kind = wire.route(req.method ?? "GET", subpath);
      if (kind === "list-models" && wire.modelList) return sendJson(res, 200, wire.modelList([...scripts.keys()]));
      if (kind !== "generate") return sendJson(res, 404, wire.errorBody(404, `no route ${req.method} ${req.url}`));
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        return sendJson(res, 400, wire.errorBody(400, "body is not JSON"));
      }
      const model = wire.modelOf(subpath, body);
      const recorded: RecordedRequest = {
        api: wire.api,
        model,
        path: req.url ?? "",
        headers: req.headers,
        body: body as ChatRequest,
        response: { status: 0, headers: {}, chunks: [], bodyTruncated: false, ended: false },
      };
      requests.push(recorded);
      recordResponse(res, recorded.response);
      const script = model === undefined ? undefined : scripts.get(model);
      if (!script) return sendJson(res, 404, wire.errorBody(404, `unknown scripted model ${model}`));
      const parsed = codecFor(wire.api)!.parseRequest(subpath, body);
      if (!parsed.ok) return sendJson(res, 400, wire.errorBody(400, `unreadable request: ${parsed.reason}`));
      const conversation = parsed.request;
      recorded.conversation = conversation;
      const turn = conversation.messages.filter((m) => m.role === "assistant").length;
      let step: ScriptStep;
      try {
        step = pickStep(script, body as ChatRequest, turn, { api: wire.api, conversation });
        if (!step || typeof step !== "object") throw new TypeError(`turn ${turn} gave ${String(step)}, not a step`);
      } catch (error) {
        // A script that throws (a failed expect() inside it, a typo) is answered at once with its
        // error and kept for the caller: the request left unanswered made the run wait for its
        // timeout, 900 s by default, then blame the model server (review, session 30). 400: Pi
        // does not retry it.
        const failure = error instanceof Error ? error : new Error(String(error));
        scriptErrors.push(failure);
        return sendJson(res, 400, wire.errorBody(400, `the scripted model's script failed: ${failure.message}`));
      }
      if ("httpStatus" in step) {
        return sendJson(
          res,
          step.httpStatus,
          wire.errorBody(step.httpStatus, step.body ?? `scripted failure ${step.httpStatus}`),
        );
      }
      openResponses.add(res);
      res.on("close", () => openResponses.delete(res));
      wire.writeReply(res, { model: model!, step, stream: wire.streams(subpath, body), seq: ++seq });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve);
  });
  const address = server.address() as AddressInfo;
  const origin = `http://${address.address}:${address.port}`;

  return {
    baseUrl: scriptedBaseUrlFor(origin, "openai-completions"),
    baseUrlFor: (api) => scriptedBaseUrlFor(origin, api),
    requests,
    scriptErrors,
    setScript: (modelId, script) => void scripts.set(modelId, script),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of openResponses) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function routeOf(pathname: string): { wire: WireFormat; subpath: string } {
  for (const wire of WIRES) {
    if (pathname.startsWith(`${wire.basePath}/`)) return { wire, subpath: pathname.slice(wire.basePath.length) };
  }
  // Any other path is read as openai-completions by its last segments, as the server always did.
  const suffix = /\/(chat\/completions|models)$/.exec(pathname)?.[0] ?? pathname;
  return { wire: openAiCompletionsWire, subpath: suffix };
}

/** Keeps what is sent back on `res` (status, headers, body bytes) in `into`. */
function recordResponse(res: http.ServerResponse, into: RecordedResponse): void {
  let kept = 0;
  const keep = (chunk: unknown, encoding?: unknown) => {
    if (chunk === undefined || chunk === null || typeof chunk === "function") return;
    const bytes = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk as string, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
    if (kept + bytes.length > MAX_RECORDED_RESPONSE_BYTES) {
      into.bodyTruncated = true;
      return;
    }
    kept += bytes.length;
    into.chunks.push(Buffer.from(bytes));
  };
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => http.ServerResponse;
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => http.ServerResponse;
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    into.status = status;
    const headers = rest.find((arg) => typeof arg === "object" && arg !== null);
    if (headers) into.headers = { ...(headers as http.OutgoingHttpHeaders) };
    return writeHead(status, ...rest);
  }) as typeof res.writeHead;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    keep(chunk, rest[0]);
    return write(chunk, ...rest);
  }) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    keep(chunk, rest[0]);
    into.ended = true;
    return end(chunk, ...rest);
  }) as typeof res.end;
}
