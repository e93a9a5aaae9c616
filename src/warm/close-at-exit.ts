// A program that ends without `agent.close()` (its event loop ran empty) still removes its warm
// sandboxes. They keep no process alive while they wait, so without this the program would end,
// their relays' links would close, and they would stop by themselves (launcher exit 91) but stay
// as stopped containers until `sandbox-run gc` or another controller's start-up reaping. Node's
// `beforeExit` lets asynchronous work run once the loop is empty; once the pools are closed the loop
// empties again and the program ends. `process.exit()` skips it (nothing asynchronous can run then):
// those sandboxes still stop at once and are reaped later.
const open = new Set<() => Promise<void>>();
let listening = false;

/** Runs `close` when the program's event loop runs empty; the returned function forgets it. */
export function closeAtExit(close: () => Promise<void>): () => void {
  open.add(close);
  if (!listening) {
    listening = true;
    process.on("beforeExit", closeAll);
  }
  return () => open.delete(close);
}

function closeAll(): void {
  const closing = [...open];
  open.clear();
  for (const close of closing) void close().catch(() => {});
}
