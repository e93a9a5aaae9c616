// Takes a secret's value back out of what an upstream answers, so a server that echoes the
// request (a debugging endpoint, an error page quoting the Authorization header) cannot hand
// the value to the sandbox. It replaces exact byte sequences only: the value, its base64, and
// the exact header values the proxy produced; a server that transforms the value first (hex,
// reversed, split, encrypted) is out of its reach. Bodies are scanned as they stream, holding
// back just enough bytes to catch a match across chunk boundaries.
import { Transform, type TransformCallback } from "node:stream";

export interface Replacement {
  find: string;
  replace: string;
}

export function scrubText(text: string, replacements: readonly Replacement[]): string {
  let out = text;
  for (const { find, replace } of longestFirst(replacements)) {
    if (find !== "" && out.includes(find)) out = out.split(find).join(replace);
  }
  return out;
}

/** A byte stream with every occurrence of each `find` replaced; the longest match wins. */
export class ScrubStream extends Transform {
  private readonly needles: Array<{ find: Buffer; replace: Buffer }>;
  private readonly hold: number;
  private pending: Buffer = Buffer.alloc(0);

  constructor(replacements: readonly Replacement[]) {
    super();
    this.needles = longestFirst(replacements)
      .filter((r) => r.find !== "")
      .map((r) => ({ find: Buffer.from(r.find, "latin1"), replace: Buffer.from(r.replace, "latin1") }));
    this.hold = Math.max(0, ...this.needles.map((n) => n.find.length - 1));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.scan(this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk, false);
    done();
  }

  override _flush(done: TransformCallback): void {
    this.scan(this.pending, true);
    done();
  }

  private scan(buffer: Buffer, final: boolean): void {
    let position = 0;
    while (true) {
      let best: { at: number; needle: { find: Buffer; replace: Buffer } } | undefined;
      for (const needle of this.needles) {
        const at = buffer.indexOf(needle.find, position);
        // needles are longest first, so on a tie the longer one is kept
        if (at >= 0 && (best === undefined || at < best.at)) best = { at, needle };
      }
      if (!best) break;
      if (best.at > position) this.push(buffer.subarray(position, best.at));
      this.push(best.needle.replace);
      position = best.at + best.needle.find.length;
    }
    // What could still be the start of a match stays for the next chunk.
    const keepFrom = final ? buffer.length : Math.max(position, buffer.length - this.hold);
    if (keepFrom > position) this.push(buffer.subarray(position, keepFrom));
    this.pending = Buffer.from(buffer.subarray(keepFrom));
  }
}

function longestFirst(replacements: readonly Replacement[]): Replacement[] {
  return [...replacements].sort((a, b) => b.find.length - a.find.length);
}
