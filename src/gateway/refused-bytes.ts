// What refused requests may cost the host. Pi sends none the gateway refuses (a request it
// refuses ends Pi's turn with an error), so refusals are the sandbox's own doing: cheap ones
// (an unknown route, a GET) are only counted in events (event-throttle.ts), but a refused body
// has been read and, most often, parsed first (~0.4 s of the shared event loop for 29 MB). A run
// may make the gateway read this many bytes of bodies it then refuses; past it the run ends.

/** Bytes of refused request bodies one run may make the gateway read (64 MiB: about a second of parsing). */
export const DEFAULT_MAX_REFUSED_BYTES = 64 * 1024 * 1024;

/**
 * Bytes of forwarded generation bodies the upstream turned down or never answered (refunded to the
 * turn budget) one run may make the gateway read. Pi sends such requests honestly (a provider's
 * 429 or 5xx, and Pi retries), so this is wider; the sandbox sent 20 MiB bodies the upstream
 * answered 400 ("prompt is too long") for 2 s of parsing each, and no budget counted them
 * (review, session 45).
 */
export const DEFAULT_MAX_UNANSWERED_BYTES = 256 * 1024 * 1024;

/**
 * The unanswered budget grows by this many times the body of each generation the upstream
 * answered: a long honest run whose provider keeps answering 429 or 503 now and then (4 MiB
 * conversations, retried) would pass a fixed budget (fix review, session 45). It grows by the
 * bytes forwarded (not those read: whitespace the gateway strips bought room), and by at most four
 * times the budget in all: a run's unanswered parsing stays under about a minute of the controller.
 */
export const DEFAULT_UNANSWERED_ALLOWANCE = 4;

export class RefusedBytes {
  #bytes = 0;
  #allowed = 0;
  #requests = 0;
  #over = false;

  constructor(
    readonly limit: number,
    private readonly exceeded: (facts: { bytes: number; requests: number }) => void,
  ) {}

  /** More room: `bytes` the budget grows by (see DEFAULT_UNANSWERED_ALLOWANCE), to at most four times its limit in all. */
  allow(bytes: number): void {
    this.#allowed = Math.min(this.#allowed + bytes, 4 * this.limit);
  }

  /** Counts one refused request and the body bytes the gateway read of it. */
  add(bytes: number): void {
    this.#requests++;
    this.#bytes += bytes;
    if (this.#over || this.#bytes <= this.limit + this.#allowed) return;
    this.#over = true;
    this.exceeded({ bytes: this.#bytes, requests: this.#requests });
  }
}
