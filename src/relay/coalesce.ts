// Joins small chunks into larger ones before they reach HTTP/2. Node's HTTP/2 over a stream that is
// not a socket (here: an exec's stdio) pays a fixed cost per chunk it is handed, so 64 KiB pipe
// reads cap a session at well under 100 MB/s; chunks joined up to 1 MiB (or whatever arrived
// within one turn of the event loop) run about three times faster. Small exchanges, like a model
// request, are delayed by one setImmediate at most.
import { Transform } from "node:stream";

const FLUSH_BYTES = 1024 * 1024;

export function coalesce(): Transform {
  let parts: Buffer[] = [];
  let size = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (size === 0) return;
    stream.push(parts.length === 1 ? parts[0] : Buffer.concat(parts, size));
    parts = [];
    size = 0;
  };
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      parts.push(chunk);
      size += chunk.length;
      if (size >= FLUSH_BYTES) flush();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
      callback();
    },
    flush(callback) {
      flush();
      callback();
    },
  });
  return stream;
}
