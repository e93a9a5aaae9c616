// The proxy's own HTTPS client for one terminated tunnel: it talks to the address that was
// checked (never re-resolving the name), verifies the upstream's certificate for the host name
// with the host's normal trust (plus the host CA bundle where the policy says so), and speaks
// HTTP/2 when the sandbox's client did and the upstream offers it, HTTP/1.1 otherwise. Requests
// in flight are bounded: the agent's 8 sockets carry HTTP/1.1, and Node's agent queues the rest
// without limit, so past MAX_IN_FLIGHT a request is refused (`EBUSY`) instead of queued.
import http2 from "node:http2";
import https from "node:https";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream";
import tls from "node:tls";
import { framedRequestHeaders, sendRequestBody } from "../http/request-framing.js";
import type { HeaderValue } from "./header-rewriter.js";

interface UpstreamTarget {
  host: string;
  port: number;
  address: string;
  /** Trusted roots; undefined: Node's defaults (its bundled roots and NODE_EXTRA_CA_CERTS). */
  ca?: string[];
  connectTimeoutMs: number;
}

interface UpstreamRequest {
  method: string;
  path: string;
  authority: string;
  headers: Record<string, HeaderValue>;
  body: Readable;
  /** Whether the sandbox's request has a body (over HTTP/1.1 it is framed again: request-framing.ts). */
  hasBody: boolean;
}

interface UpstreamResponse {
  status: number;
  headers: Record<string, HeaderValue>;
  body: Readable;
}

/** The terminator's HTTP/2 streams per connection (an HTTP/1.1 connection sends one at a time). */
const MAX_IN_FLIGHT = 32;
const MAX_SOCKETS = 8;

export interface Upstream {
  request(request: UpstreamRequest): Promise<UpstreamResponse>;
  close(): void;
}

// One closure on purpose: the HTTP/2 session (or HTTP/1.1 agent) and its closed flag are the
// state every request shares.
export function createUpstream(target: UpstreamTarget, preferHttp2: boolean): Upstream {
  const agent = new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  let session: Promise<http2.ClientHttp2Session | undefined> | undefined;
  let closed = false;
  let inFlight = 0;

  const tlsOptions = () => ({
    host: target.address,
    port: target.port,
    servername: target.host,
    ca: target.ca,
    minVersion: "TLSv1.2" as const,
  });

  /** An HTTP/2 session when the upstream negotiates h2; undefined when it only speaks HTTP/1.1. */
  const http2Session = (): Promise<http2.ClientHttp2Session | undefined> =>
    new Promise((resolve, reject) => {
      const socket = tls.connect({ ...tlsOptions(), ALPNProtocols: ["h2", "http/1.1"] });
      const timer = setTimeout(() => socket.destroy(new Error("connect timeout")), target.connectTimeoutMs);
      socket.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      socket.once("secureConnect", () => {
        clearTimeout(timer);
        if (socket.alpnProtocol !== "h2") {
          socket.destroy();
          return resolve(undefined);
        }
        const s = http2.connect(`https://${target.host}:${target.port}`, { createConnection: () => socket });
        s.on("error", () => {});
        s.once("close", () => {
          session = undefined;
        });
        resolve(s);
      });
    });

  /** `onClose`: the exchange is over (answer read to its end, or failed). */
  const viaHttp1 = (request: UpstreamRequest, onClose: () => void): Promise<UpstreamResponse> =>
    new Promise((resolve, reject) => {
      const headers = framedRequestHeaders({ ...request.headers, host: request.authority }, request.hasBody);
      const req = https.request({
        ...tlsOptions(),
        agent,
        method: request.method,
        path: request.path,
        headers,
        setHost: false,
        timeout: target.connectTimeoutMs,
      });
      req.once("close", onClose);
      req.once("timeout", () => req.destroy(new Error("upstream timeout")));
      req.once("response", (res) => {
        req.setTimeout(0);
        resolve({ status: res.statusCode ?? 502, headers: definedHeaders(res.headers), body: res });
      });
      req.once("error", reject);
      sendRequestBody(request.body, req, headers, request.hasBody);
    });

  const viaHttp2 = (
    s: http2.ClientHttp2Session,
    request: UpstreamRequest,
    onClose: () => void,
  ): Promise<UpstreamResponse> =>
    new Promise((resolve, reject) => {
      const stream = s.request({
        ...request.headers,
        ":method": request.method,
        ":path": request.path,
        ":authority": request.authority,
        ":scheme": "https",
      });
      stream.once("close", onClose);
      stream.once("response", (headers) => {
        const status = Number(headers[":status"] ?? 502);
        const plain: Record<string, HeaderValue> = {};
        for (const [name, value] of Object.entries(headers)) {
          if (!name.startsWith(":") && value !== undefined) plain[name] = value as HeaderValue;
        }
        resolve({ status, headers: plain, body: stream });
      });
      stream.once("error", reject);
      pipeline(request.body, stream, () => {});
    });

  return {
    async request(request) {
      if (closed) throw new Error("the tunnel is closed");
      if (inFlight >= MAX_IN_FLIGHT) {
        throw Object.assign(new Error(`${MAX_IN_FLIGHT} requests to ${target.host} are in flight already`), {
          code: "EBUSY",
        });
      }
      inFlight++;
      let released = false;
      const release = () => {
        if (!released) inFlight--;
        released = true;
      };
      try {
        if (preferHttp2) {
          session ??= http2Session().catch((error) => {
            session = undefined;
            throw error;
          });
          const s = await session;
          if (s && !s.closed && !s.destroyed) return await viaHttp2(s, request, release);
        }
        return await viaHttp1(request, release);
      } catch (error) {
        release();
        throw error;
      }
    },
    close() {
      closed = true;
      agent.destroy();
      void session?.then((s) => s?.destroy()).catch(() => {});
    },
  };
}

function definedHeaders(headers: Record<string, HeaderValue | undefined>): Record<string, HeaderValue> {
  const out: Record<string, HeaderValue> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value;
  return out;
}
