// Joins small chunks into larger ones before they reach HTTP/2. Node's HTTP/2 over a stream that is
// not a socket (here: an exec's stdio) pays a fixed cost per chunk it is handed, so 64 KiB pipe
// reads cap a session well below what the link carries. A PassThrough with a 1 MiB buffer, read
// with read() (which returns everything buffered at once), hands on whatever arrived meanwhile as
// one chunk: no timer, no added latency, and its buffer is the backpressure bound.
import { PassThrough, Readable } from "node:stream";

const BUFFER_BYTES = 1024 * 1024;

export function coalesced(source: Readable): Readable {
  const buffer = source.pipe(new PassThrough({ highWaterMark: BUFFER_BYTES }));
  source.once("error", (error) => buffer.destroy(error));
  return Readable.from(buffer, { objectMode: false });
}
