// Ends the sandbox's TLS on the host for one CONNECT tunnel to a secret's host: the client gets
// a certificate for the tunnel's host from the run's CA, whatever server name it asked for (a
// different SNI then fails the client's own check, and the header rewriter refuses to inject),
// and its requests are handed over one by one, over HTTP/2 or HTTP/1.1 as ALPN decided. Node's
// HTTP/2 server (with HTTP/1.1 allowed) does the TLS handshake itself: a socket upgraded to TLS
// by hand loses the bytes read before the HTTP/2 session takes over its handle. What one
// connection holds is bounded either way: HTTP/2 by its streams, HTTP/1.1 by handing over one
// request at a time (request-turns.ts), however many the client pipelines.
import type http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import type tls from "node:tls";
import { canonicalHost } from "../util/host-name.js";
import type { HostCertificate } from "./cert-cache.js";
import { createRequestTurns } from "./request-turns.js";

export type TerminatedRequest = http.IncomingMessage | http2.Http2ServerRequest;
export type TerminatedResponse = http.ServerResponse | http2.Http2ServerResponse;

export interface TlsSession {
  /** The server name the client sent (canonical), if any. */
  sni?: string;
  protocol: "h2" | "http/1.1";
}

interface TerminatorOptions {
  certificate: HostCertificate;
  onRequest(req: TerminatedRequest, res: TerminatedResponse, session: TlsSession): void;
  /** The connection ended (or its handshake failed): release what belongs to the tunnel. */
  onClose(): void;
}

const MAX_STREAMS = 32;
const MAX_SESSION_MEMORY_MB = 4;

export function terminateTls(client: net.Socket, options: TerminatorOptions): void {
  const inTurn = createRequestTurns();
  const server = http2.createSecureServer(
    {
      ...options.certificate,
      allowHTTP1: true,
      minVersion: "TLSv1.2",
      // Bounded per connection (the proxy bounds the connections): streams at once, and nghttp2's
      // own buffers (Node's default is 10 MB per session; flow control keeps real use far below).
      settings: { maxConcurrentStreams: MAX_STREAMS },
      maxSessionMemory: MAX_SESSION_MEMORY_MB,
    },
    (req: TerminatedRequest, res: TerminatedResponse) => {
      // For HTTP/2 this is a proxy to the session's TLS socket; either way it has the SNI.
      const socket = req.socket as tls.TLSSocket & { servername?: string | false };
      const servername = socket.servername;
      const session: TlsSession = {
        sni: typeof servername === "string" ? canonicalHost(servername).host : undefined,
        protocol: req.httpVersionMajor === 2 ? "h2" : "http/1.1",
      };
      if (session.protocol === "h2") return serve(req, res, session);
      // The next pipelined request is handed over once this one's answer is closed.
      inTurn(socket, (done) => {
        res.once("close", done);
        serve(req, res, session);
      });
    },
  );
  // Nothing the sandbox sends may throw out of a listener: uncaught, it would end the controller
  // and every run of it (review, session 45, in the relay's HTTP/2 server).
  const serve = (req: TerminatedRequest, res: TerminatedResponse, session: TlsSession) => {
    try {
      options.onRequest(req, res, session);
    } catch {
      client.destroy();
    }
  };
  // A failed handshake (the client did not trust the certificate, another protocol) ends here.
  server.on("tlsClientError", () => client.destroy());
  server.on("sessionError", () => client.destroy());
  client.once("close", () => options.onClose());
  server.emit("connection", client);
}
