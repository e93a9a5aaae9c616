// Strict JSONL framing for Pi's stdout: records end at an LF byte and nowhere else.
// readline is wrong here because it also breaks on U+2028/U+2029, which Pi writes raw
// inside JSON strings. Bytes are decoded only once a line is complete, so a multibyte
// character split across chunks survives, and a line longer than maxLineBytes is counted
// and skipped instead of buffered, so a runaway record cannot exhaust host memory.

export interface JsonlReaderOptions {
  /** Longest record kept, counting every byte before the LF (a trailing CR included). */
  maxLineBytes: number;
  /** One record's text: trailing CR stripped, no LF. Empty lines are skipped. */
  onLine(line: string): void;
  /** Called once per over-long line, when its LF arrives (or at end()), with its full length. */
  onOversizeLine(byteLength: number): void;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Feed it stdout chunks in order. Chunks are held by reference until their line completes,
 * so a caller must not reuse a chunk's memory after push() (Node streams never do).
 */
export class JsonlReader {
  readonly #options: JsonlReaderOptions;
  // The unfinished line as slices of the chunks it arrived in; joined once, when its LF comes.
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  // Set while discarding an over-long line: its length so far, or -1 when not discarding.
  #droppedBytes = -1;

  constructor(options: JsonlReaderOptions) {
    this.#options = options;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const lf = chunk.indexOf(LF, start);
      if (lf === -1) {
        if (start < chunk.length) this.#hold(chunk.subarray(start));
        return;
      }
      this.#finish(chunk, start, lf);
      start = lf + 1;
    }
  }

  /** Bytes held for the unfinished line; never more than maxLineBytes. */
  get bufferedBytes(): number {
    return this.#pendingBytes;
  }

  /** Emit the last line if the stream did not end with an LF. */
  end(): void {
    if (this.#droppedBytes >= 0 || this.#pendingBytes > 0) this.#finish(Buffer.alloc(0), 0, 0);
  }

  #hold(tail: Buffer): void {
    if (this.#droppedBytes >= 0) {
      this.#droppedBytes += tail.length;
    } else if (this.#pendingBytes + tail.length > this.#options.maxLineBytes) {
      this.#droppedBytes = this.#pendingBytes + tail.length;
      this.#pending = [];
      this.#pendingBytes = 0;
    } else {
      this.#pending.push(tail);
      this.#pendingBytes += tail.length;
    }
  }

  /** The current line ends with chunk[start, end); end is the LF position (or the end of input). */
  #finish(chunk: Buffer, start: number, end: number): void {
    if (this.#droppedBytes >= 0) {
      const total = this.#droppedBytes + (end - start);
      this.#droppedBytes = -1;
      return this.#options.onOversizeLine(total);
    }
    const length = this.#pendingBytes + (end - start);
    if (length > this.#options.maxLineBytes) {
      this.#pending = [];
      this.#pendingBytes = 0;
      return this.#options.onOversizeLine(length);
    }
    let line = chunk;
    if (this.#pendingBytes > 0) {
      this.#pending.push(chunk.subarray(start, end));
      line = Buffer.concat(this.#pending, length);
      start = 0;
      end = length;
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    if (end > start && line[end - 1] === CR) end--;
    if (end > start) this.#options.onLine(line.toString("utf8", start, end));
  }
}
