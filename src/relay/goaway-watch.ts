// Node's HTTP/2 gives no event when it ends a session itself over bytes it could not read (a frame
// too large, a bad header block): nghttp2 answers with a GOAWAY and waits for the peer to hang up.
// The relay's peer is in the sandbox, so its hanging up (and the exec ending) can arrive after the
// container's exit, or never. Watching this side's own output for that GOAWAY names the failure at
// once. The controller is the server: its output is frames from the first byte (no preface).
import { Transform } from "node:stream";

const HEADER_BYTES = 9;
const GOAWAY = 0x7;
/** A GOAWAY's payload starts with the last stream id (4 bytes), then the error code (4 bytes). */
const GOAWAY_CODE_END = 8;

/**
 * A pass-through for this side's outgoing HTTP/2 frames that calls `onGoaway` with the error code
 * of each GOAWAY this side sends.
 */
export function watchOutgoingGoaway(onGoaway: (errorCode: number) => void): Transform {
  let header = Buffer.alloc(0);
  let payloadLeft = 0;
  /** The GOAWAY payload's first bytes, while one is being read. */
  let goaway: Buffer | undefined;
  const read = (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (payloadLeft === 0) {
        const take = Math.min(HEADER_BYTES - header.length, chunk.length - at);
        header = Buffer.concat([header, chunk.subarray(at, at + take)]);
        at += take;
        if (header.length < HEADER_BYTES) return;
        payloadLeft = header.readUIntBE(0, 3);
        goaway = header[3] === GOAWAY ? Buffer.alloc(0) : undefined;
        header = Buffer.alloc(0);
        continue;
      }
      const take = Math.min(payloadLeft, chunk.length - at);
      if (goaway && goaway.length < GOAWAY_CODE_END) {
        goaway = Buffer.concat([goaway, chunk.subarray(at, at + Math.min(take, GOAWAY_CODE_END - goaway.length))]);
        if (goaway.length === GOAWAY_CODE_END) onGoaway(goaway.readUInt32BE(4));
      }
      payloadLeft -= take;
      at += take;
    }
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      read(chunk);
      done(null, chunk);
    },
  });
}
