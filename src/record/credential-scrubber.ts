// The credential values a run's gateway adds and the run's policy secrets (resolved when the run
// starts), and their removal from anything a run record writes. The gateway's own records never
// carry them and the gateway and the proxy take them out of what reaches the sandbox; this is the
// second line: an upstream that quotes a key in a form neither knows must still not put it in a
// record. Every form util/scrubber.ts knows (escaped, base64) is taken out.
import { CREDENTIAL_REMOVED, credentialForms, TextScrubber } from "../util/scrubber.js";

/** Written where a credential value was found. */
export const SCRUBBED = CREDENTIAL_REMOVED;

export class CredentialScrubber {
  #values: string[] = [];
  #scrubber = new TextScrubber([]);

  /** Adds values (a header value's "Bearer " and the like count without their prefix too). */
  forbid(values: readonly string[]): void {
    this.#values = [...new Set([...this.#values, ...values])];
    this.#scrubber = new TextScrubber(credentialForms(this.#values));
  }

  get active(): boolean {
    return this.#scrubber.active;
  }

  /** The text with every value (in each of its forms) replaced. */
  text(text: string): string {
    return this.#scrubber.string(text);
  }

  /** The bytes with every value replaced; the same Buffer when none was found. */
  bytes(bytes: Buffer): Buffer {
    return this.#scrubber.bytes(bytes);
  }
}
