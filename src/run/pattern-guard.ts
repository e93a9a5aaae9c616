// The regular expressions a result schema chose (`pattern`, `patternProperties`), tried on a result's
// strings in a worker thread, with a time bound, before the host's own validators (pi-schema's
// coercion, Ajv) run them on the controller's main thread. A schema may come from a record
// (`sandbox-run replay` takes it from there) and the value from the recorded model reply: both
// are chosen by whoever wrote the record, and a backtracking pattern such as `^(a|a)*$` on
// "aaaa…!" takes time that doubles with each character. V8 has no time limit for a regular
// expression, and its linear-time engine does not take the `u` flag these patterns are compiled
// with (Node 20: `/(a|a)*/u` still backtracks under
// --enable-experimental-regexp-engine-on-excessive-backtracks; `/…/lu` is refused), so the only
// bound is another thread that can be stopped.
//
// Every pattern of the schema is tried on every string of the value (and on every object key, and
// on what coercion can turn a number, boolean or null into): a superset of what the validators will
// try, so once the worker has finished them all quickly, the main thread's validators will too (same
// engine, same expressions, same strings). The worker answers through shared memory and the main
// thread waits for it with Atomics.wait, so validation stays synchronous for its callers; it waits
// at most PATTERN_TIME_MS per value (after which the worker is stopped and the value judged not
// checkable: invalid), and at most MAX_SLOW_CHECKS such waits per schema, after which every value
// with a string is refused at once. Schemas without patterns never start the worker.
import { Worker } from "node:worker_threads";

/** How long the main thread waits for one value's patterns. */
const PATTERN_TIME_MS = 1_000;
/** Waits that ran out, per schema, before its values are refused without trying. */
const MAX_SLOW_CHECKS = 3;
/** How long the worker may take to start (a loaded machine); past it the value is refused. */
const START_TIME_MS = 10_000;
/** Strings of one value the worker is given at most (a larger value is refused: it cannot be checked). */
const MAX_STRINGS = 200_000;
const MAX_PATTERNS = 1_000;

// state[0]: 0 idle, 1 answered; state[1]: the pattern being tried; state[2]: 1 once started.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const state = new Int32Array(workerData.state);
const compile = (source) => {
  // As the validators compile them: with the u flag (Ajv, pi-schema), without it where u refuses the source (pi-schema).
  try { return new RegExp(source, "u"); } catch {}
  try { return new RegExp(source); } catch { return undefined; }
};
parentPort.on("message", ({ patterns, strings }) => {
  for (let i = 0; i < patterns.length; i++) {
    Atomics.store(state, 1, i);
    const re = compile(patterns[i]);
    if (re) for (const s of strings) re.test(s);
  }
  Atomics.store(state, 0, 1);
  Atomics.notify(state, 0);
});
Atomics.store(state, 2, 1);
Atomics.notify(state, 2);
`;

interface PatternWorker {
  worker: Worker;
  state: Int32Array;
}

/** One worker per process, started on the first schema with a pattern; a worker that ran out of time is stopped. */
let shared: PatternWorker | undefined;

function patternWorker(): PatternWorker | undefined {
  if (shared) return shared;
  const state = new Int32Array(new SharedArrayBuffer(12));
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { state: state.buffer },
    resourceLimits: { maxOldGenerationSizeMb: 64 },
  });
  worker.unref();
  const started: PatternWorker = { worker, state };
  worker.on("error", () => {
    if (shared === started) shared = undefined;
  });
  worker.on("exit", () => {
    if (shared === started) shared = undefined;
  });
  if (Atomics.wait(state, 2, 0, START_TIME_MS) === "timed-out" && Atomics.load(state, 2) === 0) {
    void worker.terminate();
    return undefined;
  }
  shared = started;
  return started;
}

export interface PatternGuard {
  /** Undefined when the value's strings pass every pattern in time; else why the value cannot be checked. */
  check(value: unknown): string | undefined;
}

/** A guard for a schema's patterns, or undefined when it has none. */
export function patternGuardFor(schema: unknown): PatternGuard | undefined {
  const patterns = patternsOf(schema);
  if (patterns.length === 0) return undefined;
  let slow = 0;
  let lastSlow = "";
  return {
    check(value) {
      const strings = stringsOf(value);
      if (strings === undefined)
        return `the result has more than ${MAX_STRINGS} strings to try the schema's patterns on`;
      if (strings.length === 0) return undefined;
      if (slow >= MAX_SLOW_CHECKS) return lastSlow;
      const reason = tryPatterns(patterns, strings);
      if (reason) {
        slow++;
        lastSlow = reason;
      }
      return reason;
    },
  };
}

function tryPatterns(patterns: readonly string[], strings: readonly string[]): string | undefined {
  const worker = patternWorker();
  if (!worker) return "the schema's patterns could not be tried (no worker thread started)";
  const { state } = worker;
  Atomics.store(state, 0, 0);
  worker.worker.postMessage({ patterns, strings });
  if (Atomics.wait(state, 0, 0, PATTERN_TIME_MS) !== "timed-out" || Atomics.load(state, 0) === 1) return undefined;
  const pattern = patterns[Atomics.load(state, 1)] ?? "?";
  // It may run for hours: stop it (the next value gets a new one).
  shared = undefined;
  void worker.worker.terminate();
  return `the schema's pattern ${JSON.stringify(excerpt(pattern))} did not finish within ${PATTERN_TIME_MS / 1000} s on a string of the result, so it cannot be checked`;
}

/** Every `pattern` string and `patternProperties` key anywhere in a schema (a superset: data that looks like one counts too). */
function patternsOf(schema: unknown): string[] {
  const found = new Set<string>();
  const seen = new Set<object>();
  const visit = (node: unknown, depth: number) => {
    if (typeof node !== "object" || node === null || seen.has(node) || depth > 256 || found.size >= MAX_PATTERNS)
      return;
    seen.add(node);
    if (Array.isArray(node)) {
      for (const item of node) visit(item, depth + 1);
      return;
    }
    const object = node as Record<string, unknown>;
    if (typeof object.pattern === "string") found.add(object.pattern);
    const patternProperties = object.patternProperties;
    if (typeof patternProperties === "object" && patternProperties !== null && !Array.isArray(patternProperties))
      for (const key of Object.keys(patternProperties)) found.add(key);
    for (const child of Object.values(object)) visit(child, depth + 1);
  };
  visit(schema, 0);
  return [...found];
}

/**
 * The strings a validator could try a pattern on: string values, object keys, and what coercion
 * makes of a number, boolean or null (pi-schema turns them into strings where the schema wants
 * one). Undefined past MAX_STRINGS.
 */
function stringsOf(value: unknown): string[] | undefined {
  const out = new Set<string>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === "string") out.add(node);
    else if (typeof node === "number" || typeof node === "boolean" || typeof node === "bigint") out.add(String(node));
    else if (node === null) out.add("null");
    else if (Array.isArray(node)) for (const item of node) stack.push(item);
    else if (typeof node === "object") {
      for (const [key, child] of Object.entries(node)) {
        out.add(key);
        stack.push(child);
      }
    }
    if (out.size > MAX_STRINGS) return undefined;
  }
  if (out.size > 0) out.add("");
  return [...out];
}

function excerpt(text: string): string {
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}
