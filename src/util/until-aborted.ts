// Waiting for a promise no longer than a signal allows.

/**
 * `promise`, or the signal's reason as soon as it aborts: for checks that hold nothing (a ping, a
 * question to the engine, a GET); what they answer after that is dropped.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  promise.catch(() => {});
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
