// Strict JSONL framing for Pi's stdout: records end at an LF byte and nowhere else.
// readline is wrong here because it also breaks on U+2028/U+2029, which Pi writes raw
// inside JSON strings. Bytes are decoded only once a line is complete, so a multibyte
// character split across chunks survives, and a line longer than maxLineBytes is reported
// the moment it passes the limit and then skipped instead of buffered, so a runaway record
// can neither exhaust host memory nor keep the host reading it.

interface JsonlReaderOptions {
  /** Longest record kept, counting every byte before the LF (a trailing CR included). */
  maxLineBytes: number;
  /**
   * One record's text: trailing CR stripped, no LF. Empty lines are skipped. `bytes` are the same
   * record undecoded, valid only during the call (the reader reuses its buffer).
   */
  onLine(line: string, bytes: Uint8Array): void;
  /**
   * Called once per over-long line, as soon as it passes maxLineBytes, with the bytes seen so
   * far (more than maxLineBytes); the rest of that line, up to its LF, is skipped unseen.
   */
  onOversizeLine(bytesSoFar: number): void;
}

const LF = 0x0a;
const CR = 0x0d;
const EMPTY = Buffer.alloc(0);
/** The scratch buffer starts at this size and is kept between lines up to it. */
const SCRATCH_KEEP_BYTES = 256 * 1024;

/**
 * Feed it stdout chunks in order. A line inside one chunk is decoded straight from it; the
 * start of a line that continues in a later chunk is copied into a scratch buffer reused from
 * line to line. So a record costs no Buffer allocation of its own (the host's memory follows
 * what it keeps, not what the sandbox prints), and a few bytes held from a large chunk never
 * keep the whole chunk alive.
 */
export class JsonlReader {
  readonly #options: JsonlReaderOptions;
  // The unfinished line's bytes are #scratch[0, #pendingBytes).
  #scratch: Buffer = EMPTY;
  #pendingBytes = 0;
  // True while skipping the rest of an over-long line (already reported).
  #skipping = false;

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
    if (this.#skipping || this.#pendingBytes > 0) this.#finish(EMPTY, 0, 0);
  }

  #hold(tail: Buffer): void {
    if (this.#skipping) return;
    const length = this.#pendingBytes + tail.length;
    if (length > this.#options.maxLineBytes) {
      this.#skipping = true;
      this.#release();
      this.#options.onOversizeLine(length);
    } else {
      this.#append(tail, 0, tail.length);
    }
  }

  #append(source: Buffer, start: number, end: number): void {
    const needed = this.#pendingBytes + (end - start);
    if (needed > this.#scratch.length) {
      // Grow by doubling, never past the line limit (a line that needs more is dropped first).
      const size = Math.max(
        needed,
        Math.min(Math.max(this.#scratch.length * 2, SCRATCH_KEEP_BYTES), this.#options.maxLineBytes),
      );
      const grown = Buffer.allocUnsafe(size);
      this.#scratch.copy(grown, 0, 0, this.#pendingBytes);
      this.#scratch = grown;
    }
    source.copy(this.#scratch, this.#pendingBytes, start, end);
    this.#pendingBytes = needed;
  }

  /** Forgets the unfinished line; a scratch buffer grown for a long line is given back. */
  #release(): void {
    this.#pendingBytes = 0;
    if (this.#scratch.length > SCRATCH_KEEP_BYTES) this.#scratch = EMPTY;
  }

  /** The current line ends with chunk[start, end); end is the LF position (or the end of input). */
  #finish(chunk: Buffer, start: number, end: number): void {
    if (this.#skipping) {
      this.#skipping = false;
      return;
    }
    const length = this.#pendingBytes + (end - start);
    if (length > this.#options.maxLineBytes) {
      this.#release();
      this.#options.onOversizeLine(length);
      return;
    }
    let line = chunk;
    if (this.#pendingBytes > 0) {
      this.#append(chunk, start, end);
      line = this.#scratch;
      start = 0;
      end = length;
    }
    if (end > start && line[end - 1] === CR) end--;
    if (end <= start) {
      if (line === this.#scratch) this.#release();
      return;
    }
    const bytes = line.subarray(start, end);
    const text = bytes.toString("utf8");
    // Released before onLine so a listener that throws leaves the reader ready for the next line
    // (`bytes` still holds the released buffer until onLine returns).
    if (line === this.#scratch) this.#release();
    this.#options.onLine(text, bytes);
  }
}
