// One listener on a caller's signal however many calls share it: a service passes one long-lived
// signal (its shutdown) to every call, and Node warns (MaxListenersExceededWarning) once an
// AbortSignal holds more than ten, which in a service's log reads as a leak (review, session 30:
// twelve calls queued on one workspace). The listener goes once no call listens.
interface Fanout {
  calls: Set<() => void>;
  listener: () => void;
}

const fanouts = new WeakMap<AbortSignal, Fanout>();

/** Calls `onAbort` once `signal` aborts (at once when it has); the returned function stops listening. */
export function listenForAbort(signal: AbortSignal, onAbort: () => void): () => void {
  if (signal.aborted) {
    onAbort();
    return () => {};
  }
  let fanout = fanouts.get(signal);
  if (!fanout) {
    const calls = new Set<() => void>();
    const listener = () => {
      fanouts.delete(signal);
      for (const call of [...calls]) call();
    };
    fanout = { calls, listener };
    fanouts.set(signal, fanout);
    signal.addEventListener("abort", listener, { once: true });
  }
  const { calls, listener } = fanout;
  calls.add(onAbort);
  return () => {
    calls.delete(onAbort);
    if (calls.size > 0 || fanouts.get(signal) !== fanout) return;
    signal.removeEventListener("abort", listener);
    fanouts.delete(signal);
  };
}
