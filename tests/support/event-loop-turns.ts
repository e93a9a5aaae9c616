// How many turns the event loop took while some work ran: 0 for work that holds it throughout.
// The tests of work that must let other runs of a controller through (long walks, diffs, judgements).
export async function turnsDuring<T>(work: () => Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return { value: await work(), turns };
  } finally {
    running = false;
  }
}
