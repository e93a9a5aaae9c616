// A request body forwarded over HTTP/1.1 is framed again, whatever its method: with its
// Content-Length where it came with one, else chunked. The framing the client chose (chunked, or a
// length its Connection header names) is hop-by-hop and dropped; Node's client then writes the body
// of a GET, HEAD, DELETE, OPTIONS or TRACE with no length as raw bytes after the head (it chunks only
// the other methods by default), and the next hop reads them as a request of its own: inside a
// secret's tunnel, one that took the sandbox's next request, with its injected token, as the rest of
// its head (review, session 44). So a body is framed, and a request without one sends none.
import type http from "node:http";
import { pipeline, type Readable, Transform } from "node:stream";

/**
 * Whether an HTTP/1.x request carries a body: only Content-Length or Transfer-Encoding say so
 * (RFC 9112 §6.3; Node's parser reads no body without them).
 */
export function http1RequestHasBody(headers: http.IncomingHttpHeaders): boolean {
  return headers["content-length"] !== undefined || headers["transfer-encoding"] !== undefined;
}

/**
 * The headers to send a request with over HTTP/1.1: `transfer-encoding: chunked` added where it has
 * a body and no Content-Length is left among `headers`.
 */
export function framedRequestHeaders<T extends Record<string, unknown>>(headers: T, hasBody: boolean): T {
  if (!hasBody || headers["content-length"] !== undefined) return headers;
  return { ...headers, "transfer-encoding": "chunked" };
}

/**
 * Sends `body` on `request`, whose headers are framedRequestHeaders(headers, hasBody): no body where
 * there is none (what the client sent anyway is drained), and with a Content-Length exactly that many
 * bytes: a body that runs past it or ends short fails the request (its socket is destroyed, never
 * reused) instead of reaching the next hop unframed. (Node's parsers already hold a body to its
 * length; this does not rely on them. Node's own strictContentLength throws out of the write: in a
 * pipe, an uncaught exception.) A body that fails fails the request.
 */
export function sendRequestBody(
  body: Readable,
  request: http.ClientRequest,
  headers: Record<string, unknown>,
  hasBody: boolean,
): void {
  if (!hasBody) {
    body.resume();
    request.end();
    return;
  }
  const length = headers["content-length"];
  const source = length === undefined ? body : pipeline(body, exactLength(Number(length)), () => {});
  source.once("error", (error) => request.destroy(error));
  source.pipe(request);
}

/** Passes `expected` bytes on, and fails on one more or on an end before them. */
function exactLength(expected: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > expected ? new Error(`the body runs past its Content-Length (${expected})`) : undefined, chunk);
    },
    flush(done) {
      done(seen !== expected ? new Error(`the body ended short of its Content-Length (${expected})`) : undefined);
    },
  });
}
