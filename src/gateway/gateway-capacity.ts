// What one run's gateway holds at once, whatever the sandbox sends: connections, model API
// requests in flight, held liveness requests, and request body bytes. Each run has its own
// gateway and so its own capacity: a sandbox that fills it refuses only its own requests (its
// run's Pi may then fail, as it would if the sandbox killed Pi), never another run's.
// Measured before these bounds: 64 unfinished 32 MiB posts from inside the sandbox took the
// controller to 1.9 GB, and a connection flood used up all 20,000 of its file descriptors.

export interface GatewayCapacityLimits {
  /** Connections open at once (the launcher's liveness connection among them); more are closed as they arrive. */
  maxConnections: number;
  /** Model API requests in flight at once, from their headers to the end of their response. */
  maxRequests: number;
  /** Liveness requests held at once (the launcher holds one for the whole run). */
  maxLiveness: number;
  /** Request body bytes held at once by all requests together (read, inspected or being forwarded). */
  maxBufferedBytes: number;
}

/**
 * Pi sends one request at a time over a handful of keep-alive connections; the launcher holds one
 * liveness request. The byte pool holds one request of the largest size (32 MiB) and room for
 * small ones beside it: a request body costs the host about three times its size while it is
 * forwarded (the bytes read, the checked JSON re-serialised, the conversation the ledger keeps).
 */
export const DEFAULT_GATEWAY_CAPACITY: GatewayCapacityLimits = Object.freeze({
  maxConnections: 64,
  maxRequests: 16,
  maxLiveness: 2,
  maxBufferedBytes: 48 * 1024 * 1024,
});

/** A request's hold on the gateway's capacity; `release` gives everything back (idempotent). */
export interface CapacityLease {
  /** Takes `bytes` more from the byte pool; false (and nothing taken) when they do not fit. */
  reserve(bytes: number): boolean;
  release(): void;
}

export class GatewayCapacity {
  #requests = 0;
  #liveness = 0;
  #bytes = 0;

  constructor(readonly limits: GatewayCapacityLimits = DEFAULT_GATEWAY_CAPACITY) {}

  /** Requests in flight and bytes held, for tests and reports. */
  get usage(): { requests: number; liveness: number; bytes: number } {
    return { requests: this.#requests, liveness: this.#liveness, bytes: this.#bytes };
  }

  /** A slot for a model API request, or undefined when maxRequests are in flight. */
  request(): CapacityLease | undefined {
    if (this.#requests >= this.limits.maxRequests) return undefined;
    this.#requests++;
    let held = 0;
    let released = false;
    return {
      reserve: (bytes) => {
        if (released || this.#bytes + bytes > this.limits.maxBufferedBytes) return false;
        this.#bytes += bytes;
        held += bytes;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.#requests--;
        this.#bytes -= held;
        held = 0;
      },
    };
  }

  /** A slot for a held liveness request, or undefined when maxLiveness are held. */
  liveness(): { release(): void } | undefined {
    if (this.#liveness >= this.limits.maxLiveness) return undefined;
    this.#liveness++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#liveness--;
      },
    };
  }
}
