// The model, played back: a host-side HTTP server that answers the n-th generation request with the
// n-th response of a recording, byte for byte (at full speed, or with the recorded timing). The run's
// gateway route points here instead of at the provider, so everything between Pi and this server
// (the gateway's policing, budgets, exchange records, the result's provenance) is exactly as in a
// live run, and no request leaves the host. Which answer a request gets (and whether it diverges from
// the recording) is decided by the RecordingCursor; this module speaks HTTP.
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { isGenerationRequest } from "../gateway/api-paths.js";
import { codecFor } from "../gateway/apis/api-codec.js";
import { readRequestBody } from "../gateway/request-body.js";
import { loadBytes, type RecordedExchange } from "../record/record-format.js";
import {
  type Divergence,
  RecordingCursor,
  type ReplayMode,
  type ReplayReport,
  type ReplaySpeed,
} from "./recording-cursor.js";

export type { Divergence, ReplayMode, ReplayReport, ReplaySpeed } from "./recording-cursor.js";

interface ReplayServerOptions {
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

interface ReplayServer {
  /** The upstream base URL for the run's gateway route. */
  readonly baseUrl: string;
  report(): ReplayReport;
  close(): Promise<void>;
}

/**
 * The server listens on 127.0.0.1, where every local user can connect: its base path carries a
 * secret of this server's, so only the run's gateway, which is given it, takes recorded answers
 * (another local user consumed them before, failing the replay or, lenient, skipping a recorded step).
 */
const basePath = () => `/replay-${crypto.randomBytes(16).toString("hex")}`;
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;
/** Response headers not replayed: the body is re-framed here (and was never compressed). */
const NOT_REPLAYED = new Set(["content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"]);

export async function startReplayServer(options: ReplayServerOptions): Promise<ReplayServer> {
  const BASE_PATH = basePath();
  const codec = codecFor(options.api);
  if (!codec) throw new Error(`replay: no codec for api ${options.api}`);
  const cursor = new RecordingCursor({ ...options, codec });
  const open = new Set<http.ServerResponse>();
  const timers = new Set<NodeJS.Timeout>();

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const read = await readRequestBody(req, MAX_REQUEST_BYTES);
    if (!read.ok) return res.destroy();
    const url = new URL(req.url ?? "/", "http://replay");
    if (!url.pathname.startsWith(`${BASE_PATH}/`)) return sendError(res, 404, "not a path of this replay");
    const subpath = url.pathname.slice(BASE_PATH.length);
    if (!isGenerationRequest(options.api, req.method ?? "", subpath)) {
      return sendError(res, 404, `sandbox-run replay answers only generation requests, not ${req.method} ${subpath}`);
    }
    const answer = cursor.next(subpath, read.body);
    if (answer.kind === "refuse") return sendError(res, 409, answer.message);
    // The upstream never answered in the recording: the gateway tells Pi so (502), as it did then.
    if (answer.kind === "no-response") return res.destroy();
    play(res, answer.exchange, options.speed ?? "fast", timers);
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
    report: () => cursor.report(),
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
  // One step after the other, each at its recorded time (never before the one before it): the
  // order of the chunks is the recording's, whatever the timers do.
  const steps: Array<{ at: number; run: () => void }> = [
    {
      at: recorded.headersMs ?? 0,
      run: () => {
        res.writeHead(response.status, headers);
        res.flushHeaders();
      },
    },
    ...chunks.map((chunk) => ({ at: chunk.atMs, run: () => void res.write(chunk.data) })),
    { at: 0, run: () => void res.end() },
  ];
  const started = performance.now();
  let next = 0;
  let due = 0;
  const tick = () => {
    while (next < steps.length && !res.destroyed) {
      due = Math.max(due, steps[next]!.at);
      const wait = due - (performance.now() - started);
      if (wait > 0) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          tick();
        }, wait);
        timers.add(timer);
        return;
      }
      // A step that throws (a header Node refuses, though the record's check passed it) ends this
      // answer, never the process: it runs from a timer, outside the request's catch.
      try {
        steps[next++]!.run();
      } catch {
        res.destroy();
        return;
      }
    }
  };
  tick();
}

function sendError(res: http.ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: { type: "sandbox_run_replay", message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
