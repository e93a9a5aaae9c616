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
  // On the copy-in's path, frame after frame: two fixed buffers, nothing allocated per frame.
  const header = Buffer.alloc(HEADER_BYTES);
  const goaway = Buffer.alloc(GOAWAY_CODE_END);
  let headerHave = 0;
  let payloadLeft = 0;
  /** Bytes of a GOAWAY's payload start still to read; -1 when the frame is no GOAWAY. */
  let goawayHave = -1;
  const read = (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (payloadLeft === 0 && headerHave < HEADER_BYTES) {
        const took = chunk.copy(header, headerHave, at, at + HEADER_BYTES - headerHave);
        headerHave += took;
        at += took;
        if (headerHave < HEADER_BYTES) return;
        headerHave = 0;
        payloadLeft = header.readUIntBE(0, 3);
        goawayHave = header[3] === GOAWAY ? 0 : -1;
        continue;
      }
      const take = Math.min(payloadLeft, chunk.length - at);
      if (goawayHave >= 0 && goawayHave < GOAWAY_CODE_END) {
        goawayHave += chunk.copy(goaway, goawayHave, at, at + Math.min(take, GOAWAY_CODE_END - goawayHave));
        if (goawayHave === GOAWAY_CODE_END) onGoaway(goaway.readUInt32BE(4));
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
