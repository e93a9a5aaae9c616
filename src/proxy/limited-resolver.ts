// DNS lookups of the egress proxies, a few at a time. dns.lookup runs getaddrinfo on libuv's
// worker threads (4 by default), which every file operation of the controller shares: the disk
// watch's statfs, the workspace walks, the records of every run in a batch. A sandbox that opens a
// hundred connections to names whose DNS answers slowly (a wildcard domain it controls) would
// otherwise hold all of them and stall the host's own work. So each run looks up one name at a
// time, and all runs of the process together at most three: a thread is always left for files,
// and one run's slow names hold one slot, not the others'.
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

  async take(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
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
  return async (host) => {
    await own.take();
    try {
      await shared.take();
      try {
        return await resolve(host);
      } finally {
        shared.give();
      }
    } finally {
      own.give();
    }
  };
}
