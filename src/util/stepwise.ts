// Long synchronous file work written once, as a generator that yields between its steps, and run
// either to its end at once (drain: a reaper, a test) or with the event loop let through every few
// milliseconds (drainYielding: a controller that serves other runs meanwhile). A copy-mode apply of
// 150,000 entries held a shared controller's loop for 40-110 s, and a neighbour's run timed out
// behind it (review, session 37).

/** Lets other work in this process (other runs' event streams) through. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Runs every step now, on this turn of the event loop; the generator's result. */
export function drain<T>(steps: Generator<void, T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** How long the steps may hold the event loop before the others get a turn. */
const SLICE_MS = 10;

/** Runs the steps, letting the event loop through whenever they have held it for SLICE_MS; the generator's result. */
export async function drainYielding<T>(steps: Generator<void, T>, sliceMs = SLICE_MS): Promise<T> {
  let since = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - since >= sliceMs) {
      await yieldToEventLoop();
      since = performance.now();
    }
  }
}

/**
 * For an async loop over many entries: `await pause()` after each lets the event loop through once
 * the loop has held it for SLICE_MS (a microtask otherwise).
 */
export function timeSlices(sliceMs = SLICE_MS): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await yieldToEventLoop();
    since = performance.now();
  };
}
