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

  /** Ends the stream; false when its reader did not take the rest within `waitMs` (the stream is then destroyed). */
  close(waitMs = CLOSE_WAIT_MS): Promise<boolean> {
    const stream = this.stream;
    if (stream.destroyed) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        stream.destroy();
        resolve(false);
      }, waitMs);
      timer.unref?.();
      stream.end(() => {
        clearTimeout(timer);
        resolve(true);
      });
      stream.once("error", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
