// The host's checks of a run's results (Pi's preparation of a final-tool call's arguments,
// guarded-arguments.ts, and the host's validation of the result, result-validator.ts), run in a
// worker thread with a deadline and a memory cap, never on the controller's main thread.
//
// The schema may come from the repository under review (`--schema schema.json` inside the tree) or
// from a replayed record, and the value from the model: a schema can make checking a value take
// time that doubles with each level of the value (an `anyOf` at every level whose first branch
// descends through `$ref` and then fails: pi-schema and Ajv try both branches everywhere, 11 s at
// 26 levels), and Ajv's allErrors collection of an invalid one can fill the heap (review, session
// 35: the CLI's 20 s timeout fired at 66 s; "JavaScript heap out of memory"). On the main thread
// nothing (the run's timeout, a signal, the model gateway) could act meanwhile. Here a check past
// CHECK_TIME_MS or CHECK_MEMORY_MB is stopped with its worker and the value is uncheckable: the run
// fails with `invalid-result` (docs/security.md E3).
//
// One worker per run (per ResultValidator, which a run resolves for itself), started on the first
// check and reused for the run's others, one check at a time, in the order asked: the invalid-result
// watch's check of a reply is answered before the final result's check asked after it. A worker
// stopped at a deadline is replaced on the next check. The run ends it (close(), a run cleanup):
// nothing outlives the run.
import { createRequire } from "node:module";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { JsonSchema } from "../agent.js";
import { SandboxRunError, type SandboxRunErrorDetails } from "../errors.js";
import type { GuardedArguments } from "./guarded-arguments.js";

/** How long one check may take in the worker. */
export const CHECK_TIME_MS = 5_000;
/** The worker's heap. */
export const CHECK_MEMORY_MB = 256;
/** How long the worker may take to start (load Ajv and pi-schema; a loaded machine): not part of a check's deadline. */
const START_TIME_MS = 20_000;
/**
 * The time a run's checks may take in the worker in all: each check has its own deadline, but a
 * reply may carry many final calls, and each just under it (session 36's review: a backtracking
 * pattern's 3 s per call, 30 calls in one reply).
 */
export const RUN_CHECK_TIME_MS = 30_000;
const RUN_TIME_SPENT =
  "the host's checks of this run's results have taken their time in all, so no more can be checked in bounded time";
/** Values remembered as uncheckable per worker: the final result's check of a reply the watch gave up on answers at once. */
const REMEMBERED_UNCHECKABLE = 64;

/** A check the host could not finish within its bounds (or that the run's end stopped): the value cannot be checked. */
export interface Unchecked {
  ok: false;
  reason: string;
  /** "bounds": past the deadline or the memory cap (or no worker); "stopped": the run ended first. */
  uncheckable: "bounds" | "stopped";
}

export type ResultCheck = { ok: true; value: unknown } | { ok: false; issues: string[] };
export type PreparedInWorker = GuardedArguments | Unchecked;
export type CheckedInWorker = ResultCheck | Unchecked;

/** What to do about a schema the host cannot check in bounded time (the hint of the run's failure). */
export const UNBOUNDED_CHECK_HINT =
  "The schema makes checking a result take too long or too much memory (an anyOf or oneOf over $ref at every level of the value is tried branch by branch, each level doubling the work): write a simpler schema, or use a schema from a place you trust, not one from the repository under review.";

export function isUnchecked(answer: PreparedInWorker | CheckedInWorker): answer is Unchecked {
  return !answer.ok && "uncheckable" in answer && (answer.uncheckable === "bounds" || answer.uncheckable === "stopped");
}

/**
 * Checks answered on the calling thread instead (a plain schema's, of a small value:
 * result-validator.ts plainSchema); undefined sends the check to the worker.
 */
export interface InlineChecks {
  prepare(schema: JsonSchema, argumentsJson: string): Promise<GuardedArguments> | undefined;
  /** `json`: the value as JSON text (undefined when it has none). */
  validate(value: unknown, json: string | undefined): ResultCheck | undefined;
}

type Request =
  | { kind: "prepare"; schemaId: number; argumentsJson: string }
  | { kind: "validate"; schemaId: number; value: unknown };
type Reply = { id: number; answer: GuardedArguments | ResultCheck } | { id: number; error: string };

interface Pending {
  id: number;
  request: Request;
  /** Identifies the value for the uncheckable memory (undefined: not remembered). */
  key?: string;
  resolve(answer: PreparedInWorker | CheckedInWorker): void;
}

interface Started {
  worker: Worker;
  ready: Promise<boolean>;
  /** The schemas this worker was sent, by id. */
  sent: Set<number>;
}

export class ResultCheckWorker {
  #started: Started | undefined;
  readonly #queue: Pending[] = [];
  #inFlight: Pending | undefined;
  /** The worker the check in flight was sent to (undefined while it waits for one to start). */
  #inFlightOn: Started | undefined;
  /** The deadline of the check in flight. */
  #deadline: NodeJS.Timeout | undefined;
  #nextId = 1;
  #schemaCount = 0;
  readonly #schemaIds = new WeakMap<object, number>();
  readonly #schemas = new Map<number, unknown>();
  readonly #uncheckable = new Map<string, Unchecked>();
  #idle: Array<() => void> = [];

  readonly #timeMs: number;
  readonly #memoryMb: number;
  /** What is left of the run's time in the worker (RUN_CHECK_TIME_MS). */
  #timeLeftMs: number;
  /** When the check in flight was sent. */
  #sentAt = 0;

  /**
   * @param resultSchema the schema the validator checks results against (the caller's, as given).
   * @param bounds tests only: another deadline, heap or run budget.
   * @param inline the checks answered on the calling thread (a plain schema's, of small values).
   */
  constructor(
    private readonly resultSchema: JsonSchema,
    bounds: { timeMs?: number; memoryMb?: number; runTimeMs?: number } = {},
    private readonly inline?: InlineChecks,
  ) {
    this.#timeMs = bounds.timeMs ?? CHECK_TIME_MS;
    this.#memoryMb = bounds.memoryMb ?? CHECK_MEMORY_MB;
    this.#timeLeftMs = bounds.runTimeMs ?? RUN_CHECK_TIME_MS;
  }

  /** Whether every check may go to the worker, so that it is worth starting with the run. */
  get needsWorker(): boolean {
    return this.inline === undefined;
  }

  /** prepareGuarded(schema, argumentsJson) in the worker: Pi's preparation, with the host's guards. */
  prepare(schema: JsonSchema, argumentsJson: string): Promise<PreparedInWorker> {
    const here = this.inline?.prepare(schema, argumentsJson);
    if (here) return here;
    const schemaId = this.#schemaId(schema);
    return this.#ask(
      { kind: "prepare", schemaId, argumentsJson },
      `p${schemaId}:${argumentsJson}`,
    ) as Promise<PreparedInWorker>;
  }

  /** The validator's validate(value) in the worker; a valid value comes back as given (not a copy). */
  async validate(value: unknown): Promise<CheckedInWorker> {
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch {
      json = undefined;
    }
    const here = this.inline?.validate(value, json);
    if (here) return here;
    const schemaId = this.#schemaId(this.resultSchema);
    const key = json === undefined ? undefined : `v${schemaId}:${json}`;
    const answer = (await this.#ask({ kind: "validate", schemaId, value }, key)) as CheckedInWorker;
    return answer.ok ? { ok: true, value } : answer;
  }

  /**
   * Starts the worker ahead of the run's first check (at the run's start, beside the container's):
   * loading the validators in a new thread takes ~150 ms, which the first check would wait for.
   */
  start(): void {
    this.#start();
  }

  /**
   * Resolves once every check asked has its answer, including those the answers' own callbacks ask
   * next (the watch's validation after its preparation): idle is judged a macrotask later, once
   * those callbacks (microtasks) have run.
   */
  async idle(): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (!this.#inFlight && this.#queue.length === 0) return;
      await new Promise<void>((resolve) => this.#idle.push(resolve));
    }
  }

  /** Stops the worker (the run's end); checks still waiting are answered "stopped". A later check starts a new one. */
  async close(): Promise<void> {
    const waiting = [...(this.#inFlight ? [this.#inFlight] : []), ...this.#queue.splice(0)];
    this.#inFlight = undefined;
    this.#inFlightOn = undefined;
    clearTimeout(this.#deadline);
    const started = this.#started;
    this.#started = undefined;
    for (const pending of waiting)
      pending.resolve({ ok: false, reason: "the run ended before the host had checked it", uncheckable: "stopped" });
    this.#settleIdle();
    if (started) await started.worker.terminate();
  }

  #schemaId(schema: JsonSchema): number {
    let id = this.#schemaIds.get(schema);
    if (id === undefined) {
      id = ++this.#schemaCount;
      this.#schemaIds.set(schema, id);
      this.#schemas.set(id, schema);
    }
    return id;
  }

  #ask(request: Request, key: string | undefined): Promise<PreparedInWorker | CheckedInWorker> {
    const known = key === undefined ? undefined : this.#uncheckable.get(key);
    if (known) return Promise.resolve(known);
    return new Promise((resolve) => {
      this.#queue.push({ id: this.#nextId++, request, key, resolve });
      if (!this.#inFlight) this.#advance();
    });
  }

  /** The next check; whatever it throws answers the check in flight, never an unhandled rejection. */
  #advance(): void {
    this.#next().catch((error: unknown) => {
      const pending = this.#inFlight;
      if (pending) this.#finish(pending, unchecked(`the host's check failed (${(error as Error)?.message ?? error})`));
    });
  }

  async #next(): Promise<void> {
    const pending = this.#queue.shift();
    if (!pending) return this.#settleIdle();
    this.#inFlight = pending;
    if (this.#timeLeftMs <= 0) {
      this.#finish(pending, unchecked(RUN_TIME_SPENT));
      return;
    }
    const started = this.#start();
    if (!(await started.ready) || this.#inFlight !== pending) {
      if (this.#inFlight === pending)
        this.#finish(pending, unchecked("the host's check could not start (its worker thread did not start)"));
      return;
    }
    const { request } = pending;
    const schema = started.sent.has(request.schemaId) ? undefined : this.#schemas.get(request.schemaId);
    const timeMs = Math.min(this.#timeMs, this.#timeLeftMs);
    this.#deadline = setTimeout(() => {
      if (this.#inFlight !== pending) return;
      this.#stop(started);
      this.#finish(
        pending,
        unchecked(
          timeMs < this.#timeMs
            ? RUN_TIME_SPENT
            : `the host's check of it against the schema did not finish within ${this.#timeMs / 1000} s, so it cannot be checked in bounded time`,
        ),
        timeMs === this.#timeMs,
      );
    }, timeMs);
    this.#sentAt = performance.now();
    this.#inFlightOn = started;
    try {
      started.worker.postMessage({ id: pending.id, ...request, ...(schema === undefined ? {} : { schema }) });
      started.sent.add(request.schemaId);
    } catch (error) {
      // A value the thread cannot be handed (nested past the structured clone's stack: review of
      // session 36's fixes, a 6 KB reply 3,000 arrays deep killed the controller): uncheckable.
      this.#finish(pending, unchecked(`it cannot be handed to the host's check (${(error as Error).message})`));
    }
  }

  /** A message of a worker: the answer to the check in flight, if it is that worker's. */
  #onMessage(started: Started, reply: Reply): void {
    const pending = this.#inFlight;
    if (!pending || this.#inFlightOn !== started || reply.id !== pending.id) return;
    if ("error" in reply) this.#finish(pending, unchecked(`the host's check failed: ${reply.error}`));
    else this.#finish(pending, reply.answer);
  }

  #finish(pending: Pending, answer: PreparedInWorker | CheckedInWorker, remember = false): void {
    if (this.#inFlight !== pending) return;
    clearTimeout(this.#deadline);
    if (this.#inFlightOn) this.#timeLeftMs -= performance.now() - this.#sentAt;
    this.#inFlight = undefined;
    this.#inFlightOn = undefined;
    if (remember && pending.key !== undefined && isUnchecked(answer)) {
      this.#uncheckable.set(pending.key, answer);
      if (this.#uncheckable.size > REMEMBERED_UNCHECKABLE)
        this.#uncheckable.delete(this.#uncheckable.keys().next().value!);
    }
    pending.resolve(answer);
    this.#advance();
  }

  #settleIdle(): void {
    if (this.#inFlight || this.#queue.length > 0) return;
    const waiting = this.#idle;
    this.#idle = [];
    for (const resolve of waiting) resolve();
  }

  #stop(started: Started): void {
    if (this.#started === started) this.#started = undefined;
    void started.worker.terminate();
  }

  #start(): Started {
    if (this.#started) return this.#started;
    const { entry, bootstrap } = workerEntry();
    const worker = new Worker(bootstrap, {
      eval: true,
      workerData: entry,
      resourceLimits: { maxOldGenerationSizeMb: this.#memoryMb },
      // Its output is not the run's (a warning of a dependency would reach the CLI's stderr).
      stdout: true,
      stderr: true,
    });
    worker.stdout.resume();
    worker.stderr.resume();
    // A run's end stops it (close()); it never keeps the process alive meanwhile.
    worker.unref();
    let startTimer: NodeJS.Timeout | undefined;
    const started: Started = {
      worker,
      sent: new Set(),
      ready: new Promise<boolean>((resolve) => {
        startTimer = setTimeout(() => resolve(false), START_TIME_MS);
        startTimer.unref();
        const onReady = (message: unknown) => {
          if ((message as { ready?: boolean })?.ready !== true) return;
          worker.off("message", onReady);
          resolve(true);
        };
        worker.on("message", onReady);
        worker.once("exit", () => resolve(false));
      }).finally(() => clearTimeout(startTimer)),
    };
    worker.on("message", (reply: Reply) => this.#onMessage(started, reply));
    let failure: string | undefined;
    worker.on("error", (error: Error & { code?: string }) => {
      failure =
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? `the host's check of it against the schema needed more than ${this.#memoryMb} MB of memory, so it cannot be checked in bounded memory`
          : `the host's check failed: ${error.message}`;
    });
    worker.once("exit", () => {
      if (this.#started === started) this.#started = undefined;
      const pending = this.#inFlightOn === started ? this.#inFlight : undefined;
      // Remembered only when the check itself used up the memory (not a worker that failed to start).
      if (pending) this.#finish(pending, unchecked(failure ?? "the host's check stopped"), failure !== undefined);
    });
    void started.ready.then((ok) => {
      if (!ok) this.#stop(started);
    });
    this.#started = started;
    return started;
  }
}

function unchecked(reason: string): Unchecked {
  return { ok: false, reason, uncheckable: "bounds" };
}

/**
 * The worker's module (result-check-worker.js, next to this one in dist/run; the bundled CLI's
 * chunks sit in dist/cli, so the path goes through ../run) and the script that loads it. From the
 * TypeScript sources (the unit tests), tsx's loader is registered in the worker first.
 */
function workerEntry(): { entry: { module: string; tsx?: string }; bootstrap: string } {
  const fromSource = import.meta.url.endsWith(".ts");
  const module = new URL(`../run/result-check-worker.${fromSource ? "ts" : "js"}`, import.meta.url).href;
  const tsx = fromSource
    ? pathToFileURL(path.join(path.dirname(createRequire(import.meta.url).resolve("tsx")), "esm/api/index.mjs")).href
    : undefined;
  return {
    entry: tsx ? { module, tsx } : { module },
    bootstrap: `
const { workerData } = require("node:worker_threads");
(workerData.tsx ? import(workerData.tsx).then((api) => api.register()) : Promise.resolve()).then(() => import(workerData.module));
`,
  };
}

/**
 * The host's checks decideOutcome makes (confirmOutcome's preparation of the model's final call, the
 * validation of the result), answered synchronously from answers the worker gave. decideOutcome
 * stays a synchronous, pure function: asked something not answered yet, a check throws
 * AnswerPending; decideInWorker waits for the worker's answer and decides again.
 */
export interface OutcomeChecks {
  prepare(schema: JsonSchema, argumentsJson: string): GuardedArguments;
  validate(value: unknown): ResultCheck;
}

const MAX_QUESTIONS = 100_000;

class AnswerPending {
  constructor(readonly answer: Promise<void>) {}
}

class AnswerUnchecked {
  constructor(readonly unchecked: Unchecked) {}
}

/**
 * `decide(checks)` (decideOutcome with these checks), with every check it makes run in the worker.
 * A check the worker could not finish within its bounds fails the run with `invalid-result`.
 */
export async function decideInWorker<T>(
  worker: ResultCheckWorker,
  decide: (checks: OutcomeChecks) => T,
  evidence: SandboxRunErrorDetails,
): Promise<T | { ok: false; error: SandboxRunError }> {
  // By the schema's text: confirmOutcome may pass a new object each time (`schema ?? {}`).
  const prepared = new Map<string, Map<string, PreparedInWorker>>();
  const validated = new Map<string, CheckedInWorker>();
  const answerOrWait = <A extends PreparedInWorker | CheckedInWorker>(
    known: A | undefined,
    ask: () => Promise<A>,
    store: (answer: A) => void,
  ): A => {
    if (known === undefined) throw new AnswerPending(ask().then(store));
    if (isUnchecked(known)) throw new AnswerUnchecked(known);
    return known;
  };
  const checks: OutcomeChecks = {
    prepare(schema, argumentsJson) {
      const schemaKey = JSON.stringify(schema) ?? "";
      const answers = prepared.get(schemaKey) ?? new Map<string, PreparedInWorker>();
      prepared.set(schemaKey, answers);
      return answerOrWait(
        answers.get(argumentsJson),
        () => worker.prepare(schema, argumentsJson),
        (answer) => answers.set(argumentsJson, answer),
      ) as GuardedArguments;
    },
    validate(value) {
      // The key is the value's JSON (a value that has none is the check's to refuse, in the worker).
      let key: string;
      try {
        key = JSON.stringify(value) ?? "undefined";
      } catch {
        key = "\u0000unwritable";
      }
      return answerOrWait(
        validated.get(key),
        () => worker.validate(value),
        (answer) => validated.set(key, answer),
      ) as ResultCheck;
    },
  };
  // Each pass but the last asks one question more (answers are kept), so the passes are at most
  // the questions plus one; the bound only stops a decide() that asks something new every time.
  for (let pass = 0; ; pass++) {
    try {
      return decide(checks);
    } catch (caught) {
      if (caught instanceof AnswerPending) {
        if (pass >= MAX_QUESTIONS)
          throw new Error(`decideOutcome asked the check worker more than ${MAX_QUESTIONS} questions`);
        await caught.answer;
        continue;
      }
      if (caught instanceof AnswerUnchecked) {
        return {
          ok: false,
          error: new SandboxRunError(
            "invalid-result",
            `The model's final result cannot be checked: ${caught.unchecked.reason}.`,
            { ...evidence, hint: UNBOUNDED_CHECK_HINT },
          ),
        };
      }
      throw caught;
    }
  }
}
