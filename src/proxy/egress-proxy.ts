// The host-side egress proxy of network mode "allowlist". The container still has no network
// interface; this HTTP proxy listens on a per-run unix socket that is bind-mounted into it
// (the launcher forwards 127.0.0.1:18081 to it and HTTP(S)_PROXY point there). It speaks:
//   CONNECT host:port            -> a byte tunnel (HTTPS stays end-to-end; no interception)
//   GET http://host/path (etc.)  -> a forwarded plain-HTTP request
// For each, in this order: ask `filter(host, port)` (the proxy holds no policy), resolve the
// name on the host (no DNS leaves the sandbox), refuse when any resolved address is in a
// refused range (`guard`), and connect to the address that was checked, so a second DNS
// answer cannot point the connection somewhere else (rebinding). Every decision is reported.
import dns from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { listenOnUnixSocket, unixSocketCloser } from "../http/unix-socket-server.js";
import { usageError } from "../errors.js";
import { createAddressGuard, type AddressGuard } from "./address-guard.js";
import type { EgressFilter } from "./domain-filter.js";

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export interface EgressDecision {
  /** allowed: the checks passed and a connection is being made; denied: a check refused it;
   *  failed: allowed, but the name did not resolve or the upstream could not be reached. */
  action: "allowed" | "denied" | "failed";
  host: string;
  port: number;
  /** "CONNECT" for tunnels, the HTTP method for plain requests. */
  method: string;
  reason: string;
  /** The address connected to (allowed) or refused (denied by address). */
  address?: string;
}

export interface EgressProxyOptions {
  socketPath: string;
  filter: EgressFilter;
  onDecision?(decision: EgressDecision): void;
  /** Host name -> addresses; default the host's resolver (all addresses). */
  resolve?: Resolver;
  /** Default: refused ranges plus this host's own addresses (see address-guard.ts). */
  guard?: AddressGuard;
  /** Time allowed to open the upstream TCP connection. */
  connectTimeoutMs?: number;
}

export interface EgressProxy {
  readonly socketPath: string;
  close(): Promise<void>;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 15_000;

const HOP_BY_HOP = HOP_BY_HOP_HEADERS;

const defaultResolve: Resolver = (host) => dns.lookup(host, { all: true, verbatim: true });

export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const { socketPath } = options;
  if (!path.isAbsolute(socketPath))
    throw usageError(`Egress proxy socket path must be absolute, got ${JSON.stringify(socketPath)}`);
  const resolve = options.resolve ?? defaultResolve;
  const guard = options.guard ?? createAddressGuard();
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };

  const report = (decision: EgressDecision) => {
    try {
      options.onDecision?.(decision);
    } catch {
      // A throwing observer must not take the proxy down.
    }
  };

  /** The checks every connection passes, in order; resolves with the address to connect to. */
  const admit = async (
    host: string,
    port: number,
    method: string,
  ): Promise<{ address: string } | { status: number; reason: string }> => {
    const verdict = options.filter(host, port);
    if (!verdict.allowed) {
      report({ action: "denied", host, port, method, reason: verdict.reason });
      return { status: 403, reason: verdict.reason };
    }
    let addresses: ResolvedAddress[];
    if (net.isIP(host)) addresses = [{ address: host, family: net.isIP(host) }];
    else {
      try {
        addresses = await resolve(host);
      } catch (error) {
        const reason = `${host} did not resolve (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
        report({ action: "failed", host, port, method, reason });
        return { status: 502, reason };
      }
    }
    if (addresses.length === 0) {
      report({ action: "failed", host, port, method, reason: `${host} has no addresses` });
      return { status: 502, reason: `${host} has no addresses` };
    }
    // Any refused address refuses the name: an allowed public name has no business resolving
    // into the host's networks, and picking "the good one" would reward a rebinding attempt.
    for (const { address } of addresses) {
      const refused = guard(address);
      if (refused) {
        const reason = `${host} resolves to ${address}, which is ${refused}`;
        report({ action: "denied", host, port, method, reason, address });
        return { status: 403, reason };
      }
    }
    const address = addresses[0]!.address;
    report({ action: "allowed", host, port, method, reason: verdict.reason, address });
    return { address };
  };

  const server = http.createServer((req, res) => {
    const method = req.method ?? "GET";
    let target: URL;
    try {
      target = new URL(req.url ?? "");
    } catch {
      return refuseResponse(
        res,
        400,
        "only absolute-form proxy requests (GET http://host/path) and CONNECT are accepted",
      );
    }
    if (target.protocol !== "http:") {
      return refuseResponse(res, 400, `${target.protocol} URLs go through CONNECT, not a plain proxy request`);
    }
    if (target.username || target.password) return refuseResponse(res, 400, "URLs with credentials are not forwarded");
    const host = target.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = Number(target.port || 80);
    req.pause();
    void admit(host, port, method).then((admitted) => {
      if ("status" in admitted) return refuseResponse(res, admitted.status, admitted.reason);
      const upstream = http.request({
        host: admitted.address,
        port,
        method,
        path: `${target.pathname}${target.search}`,
        headers: forwardHeaders(req.headers, target.host),
        setHost: false,
        agent: false,
        timeout: connectTimeoutMs,
      });
      upstream.once("socket", (s: net.Socket) => track(s));
      upstream.once("timeout", () => upstream.destroy(new Error("connect timeout")));
      upstream.on("response", (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, responseHeaders(upstreamRes.headers));
        upstream.setTimeout(0);
        upstreamRes.pipe(res);
        upstreamRes.on("error", () => res.destroy());
      });
      upstream.on("error", (error: NodeJS.ErrnoException) => {
        if (res.headersSent) return res.destroy();
        const reason = `could not reach ${host}:${port} (${error.code ?? error.message})`;
        report({ action: "failed", host, port, method, reason, address: admitted.address });
        refuseResponse(res, 502, reason);
      });
      res.on("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      req.pipe(upstream);
      req.resume();
    });
  });

  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    client.on("error", () => client.destroy());
    const parsed = parseAuthority(req.url ?? "");
    if (!parsed)
      return refuseSocket(client, 400, `CONNECT needs host:port, got ${JSON.stringify((req.url ?? "").slice(0, 100))}`);
    const { host, port } = parsed;
    void admit(host, port, "CONNECT").then((admitted) => {
      if ("status" in admitted) return refuseSocket(client, admitted.status, admitted.reason);
      if (client.destroyed) return;
      const upstream = net.connect({ host: admitted.address, port });
      track(upstream);
      const timer = setTimeout(() => upstream.destroy(new Error("connect timeout")), connectTimeoutMs);
      let tunnelled = false;
      upstream.once("connect", () => {
        clearTimeout(timer);
        tunnelled = true;
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on("error", (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (!tunnelled) {
          const reason = `could not reach ${host}:${port} (${error.code ?? error.message})`;
          report({ action: "failed", host, port, method: "CONNECT", reason, address: admitted.address });
          refuseSocket(client, 502, reason);
        } else client.destroy();
      });
      // Once tunnelled, either side closing ends both; before that, the refusal must flush.
      upstream.on("close", () => tunnelled && client.destroy());
      client.on("close", () => upstream.destroy());
    });
  });

  // WebSocket and other upgrades over plain HTTP are not proxied (HTTPS WebSockets use CONNECT).
  server.on("upgrade", (_req: http.IncomingMessage, socket: net.Socket) =>
    refuseSocket(socket, 403, "protocol upgrades over plain HTTP are not proxied"),
  );
  server.on("connection", (socket: net.Socket) => track(socket));
  server.on("clientError", (_error, socket: net.Socket) => socket.destroy());

  await listenOnUnixSocket(server, socketPath, "egress proxy");

  return { socketPath, close: unixSocketCloser(server, sockets, socketPath) };
}

/** "host:port" or "[v6]:port" -> parts; undefined when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/@]+)):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (match[1] ?? match[2])!, port };
}

function forwardHeaders(incoming: http.IncomingHttpHeaders, host: string): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || dropped.has(name) || name === "host") continue;
    out[name] = value;
  }
  out.host = host;
  return out;
}

function responseHeaders(incoming: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const dropped = connectionTokens(incoming);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || dropped.has(name)) continue;
    out[name] = value;
  }
  return out;
}

function connectionTokens(headers: http.IncomingHttpHeaders): Set<string> {
  const value = headers.connection;
  const list = Array.isArray(value) ? value : value ? [value] : [];
  return new Set(
    list
      .flatMap((v) => v.split(","))
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway" };

function refuseBody(reason: string): string {
  return `sandbox-run egress proxy: ${reason}\n`;
}

function refuseResponse(res: http.ServerResponse, status: number, reason: string): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  const body = refuseBody(reason);
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  res.end(body);
}

function refuseSocket(socket: net.Socket, status: number, reason: string): void {
  if (socket.destroyed) return;
  const body = refuseBody(reason);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
