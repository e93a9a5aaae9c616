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

export function refuseSocket(socket: net.Socket, status: number, reason: string): void {
  if (socket.destroyed) return;
  const body = refusalBody(reason);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
