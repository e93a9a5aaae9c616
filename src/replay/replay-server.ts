// The model, played back: a host-side HTTP server that answers the n-th generation request with the
// n-th response of a recording, byte for byte (at full speed, or with the recorded timing). The run's
// gateway route points here instead of at the provider, so everything between Pi and this server
// (the gateway's policing, budgets, exchange records, the result's provenance) is exactly as in a
// live run, and no request leaves the host.
//
// Before answering, the request's conversation (the api codec's neutral form: no ids, cache markers
// or other volatile fields) is compared with the recorded one. A difference is a divergence: strict
// replay stops at the first (the caller trips the run), lenient replay reports it and answers anyway.
// Some divergences end any replay: the recording has no more generations, or the one due was not
// stored whole (the record's size cap).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { codecFor, type ModelRequest } from "../gateway/apis/api-codec.js";
import { firstDifference } from "../gateway/apis/conversation-diff.js";
import { isGenerationRequest } from "../gateway/api-paths.js";
import { readRequestBody } from "../gateway/request-body.js";
import { loadBytes, type RecordedExchange } from "../record/record-format.js";

export type ReplayMode = "strict" | "lenient";
export type ReplaySpeed = "fast" | "recorded";

export interface Divergence {
  /** The generation (1, 2, ...) whose request differed. */
  generation: number;
  /** What differs, in one line (e.g. `tool result of call 2 (bash) differs: recorded "ok", now "FAIL"`). */
  difference: string;
  /** The replay cannot go on whatever the mode (no recorded answer to give). */
  fatal: boolean;
}

export interface ReplayServerOptions {
  /** The recorded generations, in the order the gateway forwarded them. */
  exchanges: readonly RecordedExchange[];
  /** The Pi api of the run's route (what the requests are parsed as). */
  api: string;
  mode: ReplayMode;
  speed?: ReplaySpeed;
  /**
   * Compare the model, system prompt and tools too (default). Off when the caller changed them on
   * purpose (another policy offers other tools): then only the messages count, and a different
   * context is reported once through onContextDifference.
   */
  compareContext?: boolean;
  /** Called for every divergence, as it happens (before the request is answered). */
  onDivergence(divergence: Divergence): void;
  onContextDifference?(difference: string): void;
}

export interface ReplayReport {
  /** Generations answered from the recording. */
  answered: number;
  /** Generations in the recording. */
  recorded: number;
  divergences: Divergence[];
  /** With compareContext off: how the model, system prompt or tools differ from the recording, if they do. */
  contextDifference?: string;
}

export interface ReplayServer {
  /** The upstream base URL for the run's gateway route. */
  readonly baseUrl: string;
  report(): ReplayReport;
  close(): Promise<void>;
}

const BASE_PATH = "/replay";
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;
/** Response headers not replayed: the body is re-framed here (and was never compressed). */
const NOT_REPLAYED = new Set(["content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"]);

export async function startReplayServer(options: ReplayServerOptions): Promise<ReplayServer> {
  const codec = codecFor(options.api);
  if (!codec) throw new Error(`replay: no codec for api ${options.api}`);
  const exchanges = options.exchanges;
  const divergences: Divergence[] = [];
  const open = new Set<http.ServerResponse>();
  const timers = new Set<NodeJS.Timeout>();
  let generations = 0;
  let answered = 0;
  let stopped = false;
  let contextDifference: string | undefined;

  const diverge = (divergence: Divergence) => {
    divergences.push(divergence);
    try {
      options.onDivergence(divergence);
    } catch {
      // The caller's reaction must not break the server.
    }
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const read = await readRequestBody(req, MAX_REQUEST_BYTES);
    if (!read.ok) return res.destroy();
    const url = new URL(req.url ?? "/", "http://replay");
    const subpath = url.pathname.startsWith(`${BASE_PATH}/`) ? url.pathname.slice(BASE_PATH.length) : url.pathname;
    if (!isGenerationRequest(options.api, req.method ?? "", subpath)) {
      return sendError(res, 404, `sandbox-run replay answers only generation requests, not ${req.method} ${subpath}`);
    }
    const generation = ++generations;
    if (stopped) return sendError(res, 409, "sandbox-run replay stopped at an earlier divergence");
    const recorded = exchanges[generation - 1];
    if (!recorded) {
      stopped = true;
      diverge({
        generation,
        difference: `the run asked for generation ${generation}, but the recording holds ${exchanges.length}`,
        fatal: true,
      });
      return sendError(res, 409, "sandbox-run replay: the recording has no more model replies");
    }

    const now = parseBody(codec, subpath, read.body);
    const before = recordedRequest(codec, recorded);
    let difference: string | undefined;
    if ("problem" in before) difference = `the recorded request ${generation} cannot be compared: ${before.problem}`;
    else if (!now.ok) difference = `the request cannot be read as a conversation: ${now.reason}`;
    else if (options.compareContext !== false) difference = firstDifference(before.request, now.request);
    else {
      const context = firstDifference({ ...before.request, messages: [] }, { ...now.request, messages: [] });
      if (context && contextDifference === undefined) {
        contextDifference = context;
        try {
          options.onContextDifference?.(context);
        } catch {
          // as for divergences
        }
      }
      const { model, system, tools } = before.request;
      difference = firstDifference(before.request, { ...now.request, model, system, tools });
    }
    if (difference) {
      const fatal = options.mode === "strict";
      if (fatal) stopped = true;
      diverge({ generation, difference, fatal });
      if (fatal) return sendError(res, 409, `sandbox-run replay diverged at generation ${generation}: ${difference}`);
    }

    const unplayable = unplayableReason(recorded);
    if (unplayable) {
      stopped = true;
      diverge({ generation, difference: `the recorded reply ${generation} ${unplayable}`, fatal: true });
      return sendError(res, 409, `sandbox-run replay cannot answer generation ${generation}`);
    }
    answered++;
    if (!recorded.response) {
      // The upstream never answered in the recording: the gateway tells Pi so (502), as it did then.
      return res.destroy();
    }
    play(res, recorded, options.speed ?? "fast", timers);
  };

  const server = http.createServer((req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${address.port}${BASE_PATH}`,
    report: () => ({
      answered,
      recorded: exchanges.length,
      divergences: [...divergences],
      ...(contextDifference !== undefined ? { contextDifference } : {}),
    }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const res of open) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes the recorded response: status, headers, then the chunks as they came. */
function play(res: http.ServerResponse, recorded: RecordedExchange, speed: ReplaySpeed, timers: Set<NodeJS.Timeout>) {
  const response = recorded.response!;
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (!NOT_REPLAYED.has(name.toLowerCase())) headers[name] = value;
  }
  const chunks = response.chunks.map((chunk) => ({ atMs: chunk.atMs, data: loadBytes(chunk) }));
  if (speed === "fast") {
    res.writeHead(response.status, headers);
    for (const chunk of chunks) res.write(chunk.data);
    res.end();
    return;
  }
  const started = Date.now();
  const at = (ms: number, step: () => void) => {
    const timer = setTimeout(
      () => {
        timers.delete(timer);
        if (!res.destroyed) step();
      },
      Math.max(0, ms - (Date.now() - started)),
    );
    timers.add(timer);
  };
  at(recorded.headersMs ?? 0, () => {
    res.writeHead(response.status, headers);
    res.flushHeaders();
  });
  for (const chunk of chunks) at(chunk.atMs, () => res.write(chunk.data));
  at(Math.max(recorded.headersMs ?? 0, chunks.at(-1)?.atMs ?? 0), () => res.end());
}

/** Why a recorded reply cannot be given back whole, or undefined when it can. */
function unplayableReason(recorded: RecordedExchange): string | undefined {
  if (recorded.omitted) return `was not stored (${recorded.omitted})`;
  if (recorded.response?.bodyTruncated) return "was cut at the record's size cap";
  return undefined;
}

type Codec = NonNullable<ReturnType<typeof codecFor>>;

function parseBody(
  codec: Codec,
  subpath: string,
  body: Buffer,
): { ok: true; request: ModelRequest } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, reason: "the body is not JSON" };
  }
  return codec.parseRequest(subpath, value);
}

/** The recorded request in neutral form, parsed by today's codec (so both sides are read alike). */
function recordedRequest(codec: Codec, recorded: RecordedExchange): { request: ModelRequest } | { problem: string } {
  if (recorded.omitted || !recorded.request)
    return { problem: `it was not stored (${recorded.omitted ?? "no request"})` };
  if (recorded.request.bodyTruncated) return { problem: "its body was cut at the record's size cap" };
  // The recorded path names the route first: /<route>/<path below the provider's base URL>.
  const subpath = recorded.path.replace(/^\/[^/]*/, "");
  const parsed = parseBody(codec, subpath, loadBytes(recorded.request.body));
  return parsed.ok ? { request: parsed.request } : { problem: parsed.reason };
}

function sendError(res: http.ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: { type: "sandbox_run_replay", message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
