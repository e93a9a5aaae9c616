// A program that ends without `agent.close()` still removes its warm sandboxes. They keep no
// process alive while they wait, so without this the program would end, their relays' links would
// close, and they would stop by themselves (launcher exit 91) but stay as stopped containers until
// `sandbox-run gc` or another controller's start-up reaping.
// - The event loop ran empty: Node's `beforeExit` lets asynchronous work run, so the pools close
//   as `agent.close()` would; once they are closed the loop empties again and the program ends.
// - `process.exit()`: only synchronous code runs ('exit'), so each engine with an open pool starts
//   a helper process that removes this process's warm containers (by the random token on their
//   labels) after it is gone (an engine on a unix socket; over tcp or ssh they stop by themselves
//   and wait for gc).
import crypto from "node:crypto";
import type { Engine } from "../engine/engine.js";
import { LABEL_MANAGED, LABEL_OWNER_TOKEN, LABEL_WARM } from "../sandbox-contract.js";

/** This process's token on its warm containers (LABEL_OWNER_TOKEN): what the helper looks for. */
export const OWNER_TOKEN = crypto.randomBytes(12).toString("hex");

interface OpenPool {
  close: () => Promise<void>;
  engine: Engine;
}

/** Pools to close when the loop runs empty. */
const toClose = new Set<OpenPool>();
/** Pools whose containers a helper removes after `process.exit()`: until their close has finished. */
const toRemoveAfterExit = new Set<OpenPool>();
let listening = false;

/**
 * Runs `close` when the program's event loop runs empty, and removes the pool's containers on
 * `engine` after a `process.exit()` that came before its close finished. The returned function
 * forgets the pool (call it once its close has finished).
 */
export function closeAtExit(close: () => Promise<void>, engine: Engine): () => void {
  const pool = { close, engine };
  toClose.add(pool);
  toRemoveAfterExit.add(pool);
  if (!listening) {
    listening = true;
    process.on("beforeExit", closeAll);
    process.on("exit", removeAfterExit);
  }
  return () => {
    toClose.delete(pool);
    toRemoveAfterExit.delete(pool);
  };
}

function closeAll(): void {
  const closing = [...toClose];
  toClose.clear();
  for (const pool of closing) void pool.close().catch(() => {});
}

function removeAfterExit(): void {
  const labels = [`${LABEL_MANAGED}=true`, `${LABEL_WARM}=true`, `${LABEL_OWNER_TOKEN}=${OWNER_TOKEN}`];
  // One helper per engine, however many pools use it.
  for (const engine of new Set([...toRemoveAfterExit].map((pool) => pool.engine))) engine.removeAfterExit?.(labels);
  toRemoveAfterExit.clear();
}
