// A byte tunnel between the sandbox's CONNECT socket and the upstream. Each direction ends on
// its own: a FIN from one side becomes a FIN to the other, and the opposite direction stays
// open until its own end. Clients that half-close (send the request, shut down writing, read
// the answer) and servers that do (send the answer, close, then read what is still coming)
// both work. Only an error, or the proxy's own close, ends both directions at once.
import type net from "node:net";

export function spliceTunnel(client: net.Socket, upstream: net.Socket): void {
  // pipe() ends the destination when the source ends: that is the half-close hand-over. Both
  // sockets must allow half-open connections, or Node ends the write side of a socket as soon as
  // its read side sees FIN (what tore tunnels down early before).
  client.allowHalfOpen = true;
  upstream.allowHalfOpen = true;
  upstream.pipe(client);
  client.pipe(upstream);
  const destroyBoth = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", destroyBoth);
  upstream.on("error", destroyBoth);
  // A socket closed without an orderly end in both directions (reset, destroyed) takes the
  // other one with it; an orderly close means the other side is finishing on its own.
  client.on("close", (hadError) => hadError && upstream.destroy());
  upstream.on("close", (hadError) => hadError && client.destroy());
}
