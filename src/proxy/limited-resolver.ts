// DNS lookups of one run's egress proxy, a few at a time. dns.lookup runs getaddrinfo on libuv's
// worker threads (4 by default), which every file operation of the controller shares: the disk
// watch's statfs, the workspace walks, the records of every run in a batch. A sandbox that opens a
// hundred connections to names whose DNS answers slowly (a wildcard domain it controls) would
// otherwise hold all of them and stall the host's own work; past the limit, lookups wait their turn.
import type { Resolver } from "./egress-types.js";

/** Lookups of one proxy in flight at once: fewer than libuv's threads, so one is always free. */
export const MAX_CONCURRENT_LOOKUPS = 2;

export function limitedResolver(resolve: Resolver, limit = MAX_CONCURRENT_LOOKUPS): Resolver {
  let running = 0;
  const waiting: Array<() => void> = [];
  // A finished lookup hands its slot to the next waiting one, so a call arriving meanwhile cannot take it too.
  const release = () => {
    const wake = waiting.shift();
    if (wake) wake();
    else running--;
  };
  return async (host) => {
    if (running < limit) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await resolve(host);
    } finally {
      release();
    }
  };
}
