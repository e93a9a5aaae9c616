// DNS lookups of the egress proxies, a few at a time. dns.lookup runs getaddrinfo on libuv's
// worker threads (4 by default), which every file operation of the controller shares: the disk
// watch's statfs, the workspace walks, the records of every run in a batch. A sandbox that opens a
// hundred connections to names whose DNS answers slowly (a wildcard domain it controls) would
// otherwise hold all of them and stall the host's own work. So each run looks up one name at a
// time, and all runs of the process together at most three: a thread is always left for files,
// and one run's slow names hold one slot, not the others'. A lookup whose client left (or whose
// proxy closed) while it waited for a slot is dropped from the queue: a sandbox that opens and
// drops connections to slow names must not leave a backlog that outlives it in the process's slots.
import type { Resolver } from "./egress-types.js";

/** Lookups of one run's proxy in flight at once. */
export const LOOKUPS_PER_RUN = 1;
/** Lookups of the whole process in flight at once: fewer than libuv's threads. */
export const LOOKUPS_PER_PROCESS = 3;

/** Slots handed out in arrival order; a finished holder passes its slot on directly. */
export class Slots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(size: number) {
    this.#free = size;
  }

  /** Rejects with `signal`'s reason, leaving the queue, when it aborts before a slot is free. */
  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const at = this.#waiting.indexOf(waiter);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** Slots waited for (tests). */
  get waiting(): number {
    return this.#waiting.length;
  }

  give(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

const processSlots = new Slots(LOOKUPS_PER_PROCESS);

/** `resolve` for one run: one lookup of its own at a time, within the process's slots. */
export function limitedResolver(resolve: Resolver, shared: Slots = processSlots): Resolver {
  const own = new Slots(LOOKUPS_PER_RUN);
  return async (host, signal) => {
    await own.take(signal);
    try {
      await shared.take(signal);
      try {
        return await resolve(host, signal);
      } finally {
        shared.give();
      }
    } finally {
      own.give();
    }
  };
}
