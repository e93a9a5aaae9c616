// The host-side egress proxy of network mode "allowlist". The container still has no network
// interface; this HTTP proxy listens on a per-run unix socket that is bind-mounted into it
// (the launcher forwards 127.0.0.1:18081 to it and HTTP(S)_PROXY point there). It speaks:
//   CONNECT host:port            -> a byte tunnel (HTTPS stays end-to-end), or, for the hosts
//                                   of the run's secrets only, TLS terminated here (`interception`)
//   GET http://host/path (etc.)  -> a forwarded plain-HTTP request
// For each, in this order: spell the host canonically (util/host-name.ts), ask `filter(host, port)`
// (the proxy holds no policy), resolve the name on the host (no DNS leaves the sandbox), refuse
// when any resolved address is in a refused range (`guard`), and connect to the address that
// was checked, so a second DNS answer cannot point the connection somewhere else (rebinding).
// Every decision is reported. What one run's proxy holds is bounded: connections (each holds at
// most one upstream socket: a connection's pipelined requests go one at a time; tunnels and
// relays stream with backpressure, so no body is buffered whole) and TLS-terminated connections,
// which cost more (a TLS and an HTTP/2 session each).
import dns from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { usageError } from "../errors.js";
import { listenOnUnixSocket, unixSocketCloser } from "../http/unix-socket-server.js";
import { canonicalHost } from "../util/host-name.js";
import { type AddressGuard, createAddressGuard } from "./address-guard.js";
import type { EgressFilter } from "./domain-filter.js";
import { createEgressAdmission } from "./egress-admission.js";
import { refuseResponse, refuseSocket } from "./http-refusal.js";
import { forwardPlainRequest } from "./plain-request.js";
import { createRequestTurns } from "./request-turns.js";
import { spliceTunnel } from "./tunnel.js";

export type { EgressDecision, Resolver } from "./egress-types.js";

import type { EgressDecision, Resolver } from "./egress-types.js";
import { limitedResolver } from "./limited-resolver.js";

/** Where an admitted tunnel goes. */
export interface TunnelTarget {
  host: string;
  port: number;
  address: string;
}

/** TLS termination and secret injection for the hosts of a run's secrets (secret-interception.ts). */
export interface Interception {
  /** Whether a CONNECT to this canonical host and port is terminated instead of tunnelled. */
  terminates(host: string, port: number): boolean;
  /** Takes over an admitted CONNECT socket (the 200 is written already). */
  terminate(client: net.Socket, target: TunnelTarget, report: (decision: EgressDecision) => void): void;
  /** Why a plain-HTTP request may not go out (it carries a placeholder), or undefined. */
  refusePlain(url: string, headers: http.IncomingHttpHeaders): { reason: string; secret: string } | undefined;
  close(): void;
}

interface EgressProxyOptions {
  socketPath: string;
  filter: EgressFilter;
  onDecision?(decision: EgressDecision): void;
  /** Host name -> addresses; default the host's resolver (all addresses). */
  resolve?: Resolver;
  /** Default: refused ranges plus this host's own addresses (see address-guard.ts). */
  guard?: AddressGuard;
  /** Time allowed to open the upstream TCP connection. */
  connectTimeoutMs?: number;
  /** Where tests, and only tests, send "port 443 of this name" (a local server's port). */
  upstreamPort?: (host: string, port: number) => number;
  /** Secrets: TLS termination for their hosts; absent, every CONNECT is a plain tunnel. */
  interception?: Interception;
  /** Connections from the sandbox open at once (default 128); more are closed as they arrive. */
  maxConnections?: number;
  /** Of those, TLS-terminated ones (default 16); more CONNECTs to a secret's host get 503. */
  maxTerminated?: number;
}

export interface EgressProxy {
  readonly socketPath: string;
  close(): Promise<void>;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 15_000;
/**
 * Package managers open a few dozen connections at most (npm's maxsockets 15, pip's pools of 10,
 * yarn's 50); each connection here costs two file descriptors and two sockets' buffers.
 */
const DEFAULT_MAX_CONNECTIONS = 128;
/** git and a registry client need one or two connections to a secret's host; each costs a TLS and an HTTP/2 session. */
const DEFAULT_MAX_TERMINATED = 16;

const defaultResolve: Resolver = (host) => dns.lookup(host, { all: true, verbatim: true });

// One closure on purpose: the server, its socket set and its close share one lifetime; the
// decisions themselves live in egress-admission.ts and the interception in secret-interception.ts.
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const { socketPath, interception } = options;
  if (!path.isAbsolute(socketPath))
    throw usageError(`Egress proxy socket path must be absolute, got ${JSON.stringify(socketPath)}`);
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const upstreamPort = options.upstreamPort ?? ((_host: string, port: number) => port);
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

  // Aborted at close(): lookups of this proxy still waiting for a slot are dropped.
  const closing = new AbortController();
  /** Aborts when `emitter` (the client's response or socket) closes, or the proxy does. */
  const lookupSignal = (emitter: NodeJS.EventEmitter) => {
    const left = new AbortController();
    emitter.once("close", () => left.abort(new Error("the client left")));
    return AbortSignal.any([left.signal, closing.signal]);
  };
  const admit = createEgressAdmission({
    filter: options.filter,
    resolve: limitedResolver(options.resolve ?? defaultResolve),
    guard: options.guard ?? createAddressGuard(),
    terminates: (host, port) => interception?.terminates(host, port) ?? false,
    report,
  });

  const maxTerminated = options.maxTerminated ?? DEFAULT_MAX_TERMINATED;
  let terminated = 0;
  // A connection's pipelined requests are handled one after another (request-turns.ts).
  const inTurn = createRequestTurns();
  const server = http.createServer((req, res) =>
    inTurn(req.socket, (done) => {
      try {
        forward(req, res, done);
      } catch {
        res.destroy(); // nothing the sandbox sends may end the controller (review, session 45)
      }
    }),
  );

  /** One plain-HTTP proxy request; `done` once its answer and its upstream socket are closed. */
  const forward = (req: http.IncomingMessage, res: http.ServerResponse, done: () => void) => {
    let upstreamClosed: Promise<void> = Promise.resolve();
    res.once("close", () => void upstreamClosed.then(done));
    const method = req.method ?? "GET";
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      return refuseResponse(
        res,
        400,
        "only absolute-form proxy requests (GET http://host/path) and CONNECT are accepted",
      );
    }
    if (url.protocol !== "http:") {
      return refuseResponse(res, 400, `${url.protocol} URLs go through CONNECT, not a plain proxy request`);
    }
    if (url.username || url.password) return refuseResponse(res, 400, "URLs with credentials are not forwarded");
    const port = Number(url.port || 80);
    // A placeholder in clear text is refused before anything else: secrets only travel over TLS.
    const carries = interception?.refusePlain(req.url ?? "", req.headers);
    if (carries) {
      const host = canonicalHost(url.hostname).host ?? url.hostname;
      report({ action: "denied", host, port, method, reason: carries.reason, secret: carries.secret });
      return refuseResponse(res, 403, carries.reason);
    }
    req.pause();
    void admit(url.hostname, port, method, lookupSignal(res))
      .then((admitted) => {
        if ("status" in admitted) return refuseResponse(res, admitted.status, admitted.reason);
        // The client went away while the name was checked: nothing goes out for it.
        if (res.destroyed) return;
        const { host, address } = admitted;
        upstreamClosed = forwardPlainRequest(req, res, {
          url,
          host,
          port: upstreamPort(host, port),
          address,
          connectTimeoutMs,
          track,
          onUpstreamError: (reason) => report({ action: "failed", host, port, method, reason, address }),
        });
      })
      .catch(() => res.destroy());
  };

  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    client.on("error", () => client.destroy());
    const parsed = parseAuthority(req.url ?? "");
    if (!parsed)
      return refuseSocket(client, 400, `CONNECT needs host:port, got ${JSON.stringify((req.url ?? "").slice(0, 100))}`);
    const { port } = parsed;
    void admit(parsed.host, port, "CONNECT", lookupSignal(client))
      .then((admitted) => {
        if ("status" in admitted) return refuseSocket(client, admitted.status, admitted.reason);
        if (client.destroyed) return;
        const target = { host: admitted.host, port, address: admitted.address };
        // Bytes the client sent after the CONNECT head belong to the tunnel.
        if (head.length > 0) client.unshift(head);
        if (interception?.terminates(target.host, port)) {
          if (terminated >= maxTerminated)
            return refuseSocket(client, 503, `${maxTerminated} connections to secrets' hosts are open already`);
          terminated++;
          client.once("close", () => terminated--);
          client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          return interception.terminate(client, { ...target, port: upstreamPort(target.host, port) }, (d) =>
            report({ ...d, port }),
          );
        }
        openTunnel(client, { ...target, port: upstreamPort(target.host, port) }, (code) => {
          const reason = `could not reach ${target.host}:${port} (${code})`;
          report({ action: "failed", host: target.host, port, method: "CONNECT", reason, address: target.address });
          return reason;
        });
      })
      .catch(() => client.destroy());
  });

  const openTunnel = (client: net.Socket, target: TunnelTarget, onFailure: (code: string) => string) => {
    const upstream = net.connect({ host: target.address, port: target.port, allowHalfOpen: true });
    track(upstream);
    const timer = setTimeout(() => upstream.destroy(new Error("connect timeout")), connectTimeoutMs);
    const failed = (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      refuseSocket(client, 502, onFailure(error.code ?? error.message));
    };
    upstream.once("error", failed);
    client.once("close", () => upstream.connecting && upstream.destroy());
    upstream.once("connect", () => {
      clearTimeout(timer);
      upstream.off("error", failed);
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      spliceTunnel(client, upstream);
    });
  };

  // WebSocket and other upgrades over plain HTTP are not proxied (HTTPS WebSockets use CONNECT).
  server.on("upgrade", (_req: http.IncomingMessage, socket: net.Socket) =>
    refuseSocket(socket, 403, "protocol upgrades over plain HTTP are not proxied"),
  );
  // Past this, Node closes a new connection as it is accepted: one file descriptor for a moment.
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  server.on("connection", (socket: net.Socket) => track(socket));
  server.on("clientError", (_error, socket: net.Socket) => socket.destroy());

  await listenOnUnixSocket(server, socketPath, "egress proxy");

  return {
    socketPath,
    close: unixSocketCloser(server, sockets, socketPath, () => {
      closing.abort(new Error("the egress proxy closed"));
      interception?.close();
    }),
  };
}

/** "host:port" or "[v6]:port" -> parts; undefined when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/@]+)):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (match[1] ?? match[2])!, port };
}
