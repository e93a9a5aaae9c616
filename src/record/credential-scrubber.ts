// The credential values a run's gateway adds (resolved when the run starts), and their removal from
// anything a run record writes. The gateway's own records never carry them; this is the second line:
// an upstream that echoes a key in an error reaches the sandbox, Pi's events and the reply bytes,
// and none of that may put the key in a record.

/** Written where a credential value was found. */
export const SCRUBBED = "<credential removed by sandbox-run>";
/** Values shorter than this are not secrets worth searching for (e.g. "ollama"). */
const MIN_SECRET_LENGTH = 8;

export class CredentialScrubber {
  #secrets: string[] = [];

  /** Adds values (a header value's "Bearer " and the like count without their prefix too). */
  forbid(values: readonly string[]): void {
    for (const value of values) {
      const bare = value.replace(/^(Bearer|Basic|token)\s+/i, "");
      for (const v of [value, bare]) {
        if (v.length >= MIN_SECRET_LENGTH && !this.#secrets.includes(v)) this.#secrets.push(v);
      }
    }
    // Longest first, so a value that contains another is replaced whole.
    this.#secrets.sort((a, b) => b.length - a.length);
  }

  get active(): boolean {
    return this.#secrets.length > 0;
  }

  /** The text with every value (also in its JSON-escaped form) replaced. */
  text(text: string): string {
    let out = text;
    for (const secret of this.#secrets) {
      for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) {
        if (out.includes(form)) out = out.split(form).join(SCRUBBED);
      }
    }
    return out;
  }

  /** The bytes with every value replaced; the same Buffer when none was found. */
  bytes(bytes: Buffer): Buffer {
    let out = bytes;
    for (const secret of this.#secrets) {
      if (out.indexOf(secret) === -1) continue;
      // latin1 maps bytes 1:1, so bytes that are not UTF-8 survive the replacement.
      out = Buffer.from(out.toString("latin1").split(Buffer.from(secret).toString("latin1")).join(SCRUBBED), "latin1");
    }
    return out;
  }
}
