// How the egress proxy says no: a short plain-text body naming the proxy and the reason, on an
// HTTP response or, for CONNECT (where Node hands over the raw socket), written by hand.
import type http from "node:http";
import type net from "node:net";

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  403: "Forbidden",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
};

export function refusalBody(reason: string): string {
  return `sandbox-run egress proxy: ${reason}\n`;
}

export function refuseResponse(res: http.ServerResponse, status: number, reason: string): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  const body = refusalBody(reason);
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  res.end(body);
}

/** How long a refused raw socket stays open for its answer to be read before it is closed. */
const REFUSED_SOCKET_LINGER_MS = 1_000;

export function refuseSocket(socket: net.Socket, status: number, reason: string): void {
  if (socket.destroyed) return;
  const body = refusalBody(reason);
  // Whatever the client still sends is read and dropped, and the socket is closed soon whether
  // or not the client closes its end: a refused socket must not stay open, unread, for as long
  // as the sandbox holds it (Node's server keeps its half open after our end()).
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), REFUSED_SOCKET_LINGER_MS);
  socket.once("close", () => clearTimeout(timer));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
