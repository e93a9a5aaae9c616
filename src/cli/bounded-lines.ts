// Lines to a stream whose reader may stop reading (--events to a FIFO or a pipe): a WriteStream
// buffers whatever it is given, and a reader that held the pipe open without reading grew the CLI
// to 450 MB before the output limit stopped the run, then held its exit for 30 s after the sandbox
// was gone (review, session 34). Past MAX_BUFFERED_BYTES waiting, lines are left out (said once),
// and the close waits for the reader at most CLOSE_WAIT_MS.
import type { Writable } from "node:stream";

export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
export const CLOSE_WAIT_MS = 10_000;

export class BoundedLines {
  #dropped = 0;

  constructor(
    private readonly stream: Writable,
    private readonly onFirstDrop: () => void,
    private readonly maxBufferedBytes = MAX_BUFFERED_BYTES,
  ) {}

  /** Lines left out because the reader did not keep up. */
  get dropped(): number {
    return this.#dropped;
  }

  write(line: string): void {
    if (this.stream.destroyed || this.stream.writableEnded) return;
    if (this.stream.writableLength > this.maxBufferedBytes) {
      if (this.#dropped++ === 0) this.onFirstDrop();
      return;
    }
    this.stream.write(line);
  }

  /**
   * Ends the stream; false when its reader took nothing of the rest for `waitMs` (the stream is
   * then destroyed). A reader that keeps reading, however slowly, gets it all.
   */
  close(waitMs = CLOSE_WAIT_MS): Promise<boolean> {
    const stream = this.stream;
    if (stream.destroyed) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      let left = stream.writableLength;
      let idleSince = Date.now();
      const tick = setInterval(
        () => {
          if (stream.writableLength < left) {
            left = stream.writableLength;
            idleSince = Date.now();
          } else if (Date.now() - idleSince >= waitMs) {
            clearInterval(tick);
            stream.destroy();
            resolve(false);
          }
        },
        Math.min(100, waitMs),
      );
      tick.unref?.();
      const done = () => {
        clearInterval(tick);
        resolve(true);
      };
      stream.end(done);
      stream.once("error", done);
    });
  }
}
