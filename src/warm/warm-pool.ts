// Warm sandboxes of one shape on one engine, kept ready before any call: `size` of them made or
// being made at all times, each claimed once and then removed by its run (never returned), the
// pool refilling in the background. A claim takes a ready one (checked first: one that died or
// does not answer is removed and the next taken), or waits for one being made that no earlier
// claim is waiting for; otherwise the call starts cold, and the reason says why. Taking from the
// ready list is synchronous, so two claims never get the same sandbox.
import crypto from "node:crypto";
import os from "node:os";
import { performance } from "node:perf_hooks";
import type { Engine } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import { type WarmShape, warmShapeKey } from "../run/plan/warm-shape.js";
import type { ClaimedSandbox } from "../run/warm-claim.js";
import { pidnsField } from "../util/own-pid-namespace.js";
import { closeAtExit, OWNER_TOKEN } from "./close-at-exit.js";
import { type MakeWarmSandbox, WarmSandbox } from "./warm-sandbox.js";

/** What the pool needs of a sandbox (WarmSandbox; tests give stand-ins). */
export interface PoolSandbox extends ClaimedSandbox {
  /** performance.now() when it was ready. */
  readonly readyAt: number;
  readonly makeMs: number;
  readonly loadedMs: number;
  readonly stderrTail: string;
  onDeath(listener: (reason: string) => void): void;
  check(timeoutMs: number): Promise<string | undefined>;
  claim(facts: Record<string, number | string>): void;
}

/** What a warm pool is asked to keep. */
interface WarmPoolOptions {
  engine: Engine;
  shape: WarmShape;
  /** Sandboxes ready or being made at all times. */
  size: number;
  /**
   * How many claims will ever come (a batch knows its tasks): the pool keeps no more sandboxes
   * than claims still to come, so none is made only to be removed at close. Default: no end.
   */
  claims?: number;
  /** An unclaimed sandbox stops by itself after this long (its launcher's idle deadline). */
  idleMs: number;
  /** The longest timeout a claim may bring (with idleMs, the deadline on the containers' labels). */
  maxRunMs: number;
  /** How long making one may wait for its launcher to load Pi. */
  loadTimeoutMs?: number;
  /** Pi's provider APIs each sandbox loads before its claim (the calls' likely ones). */
  preloadApis?: string[];
  /** How long a claim's check of a ready sandbox may take before that sandbox counts as broken. */
  checkTimeoutMs?: number;
  /** How long a claim waits for a sandbox being made before the call starts cold. */
  waitMs?: number;
  /** Things worth knowing that happen outside any call (made, removed and why, failed to make). */
  onChange?: (change: WarmPoolChange) => void;
  /** Makes one sandbox (default: WarmSandbox.make). */
  make?: (input: MakeWarmSandbox) => Promise<PoolSandbox>;
  /** The checked image's id, which the sandboxes are made from (else the shape's tag). */
  imageId?: string;
}

export type WarmPoolChange =
  | { type: "warm.made"; warmId: string; containerId: string; makeMs: number; loadedMs: number }
  | { type: "warm.discarded"; warmId: string; containerId: string; reason: string; stderrTail?: string }
  | { type: "warm.make-failed"; reason: string; retryInMs: number };

type WarmClaim = { sandbox: PoolSandbox } | { reason: string };

export interface WarmPoolStats {
  made: number;
  claimed: number;
  discarded: number;
  makeFailures: number;
  ready: number;
  making: number;
}

const DEFAULT_LOAD_TIMEOUT_MS = 120_000;
/**
 * A claim's refill starts this much later: making a sandbox (a container start, Pi loading) is CPU
 * work that would otherwise compete with the claims of a burst, each of which needs only a few ms.
 */
const REFILL_DELAY_MS = 200;
const DEFAULT_CHECK_TIMEOUT_MS = 2_000;
/** A claim waits this long at most for a sandbox being made, then starts cold (a cold start is no slower). */
const DEFAULT_WAIT_MS = 30_000;
const MAX_RETRY_MS = 30_000;
/**
 * A ready sandbox this close to its idle deadline is not given to a call: between the claim and the
 * moment its launcher reads the claim (and drops the idle deadline) the call prepares its gateway
 * and walks its workspace, and a sandbox that stopped itself meanwhile would fail the call.
 */
function idleMarginMs(idleMs: number): number {
  return Math.min(30_000, idleMs / 4);
}

export class WarmPool {
  readonly shapeKey: string;
  readonly #options: WarmPoolOptions;
  readonly #ready: PoolSandbox[] = [];
  /** Claims waiting for a sandbox being made, first come first served. */
  readonly #waiters: Array<(sandbox: PoolSandbox | undefined) => void> = [];
  readonly #making = new Set<AbortController>();
  readonly #stopping = new Set<Promise<unknown>>();
  #closed = false;
  #failures = 0;
  #lastFailure?: string;
  #retryAt = 0;
  #retryTimer?: NodeJS.Timeout;
  /** Refills claims have asked for, made once the refill delay passed. */
  #refillsDue = 0;
  #refillTimer?: NodeJS.Timeout;
  /** Forgets the close registered for a program that ends without closing (close-at-exit.ts). */
  #forgetAtExit?: () => void;
  readonly #stats = { made: 0, claimed: 0, discarded: 0, makeFailures: 0 };
  /** Sandboxes taken by claims: claimed, or being checked for one. */
  #taken = 0;
  /** Expected calls (warm.calls) that started cold instead: they will claim nothing. */
  #forgone = 0;
  /** When each sandbox made stops by itself unclaimed (ms since the epoch; counted from before its create, so early). */
  readonly #idleDeadlines = new WeakMap<PoolSandbox, number>();

  constructor(options: WarmPoolOptions) {
    this.#options = options;
    this.shapeKey = warmShapeKey(options.shape);
  }

  get shape(): WarmShape {
    return this.#options.shape;
  }

  get engine(): Engine {
    return this.#options.engine;
  }

  get maxRunMs(): number {
    return this.#options.maxRunMs;
  }

  stats(): WarmPoolStats {
    return { ...this.#stats, ready: this.#ready.length, making: this.#making.size };
  }

  /** Starts making sandboxes (and keeps the pool full from then on). */
  start(): void {
    this.#forgetAtExit ??= closeAtExit(() => this.close(), this.#options.engine);
    this.#fill();
  }

  /** Resolves once `size` sandboxes are ready, or as many as calls are still to come (or the pool closes, or one cannot be made). */
  async whenFull(signal?: AbortSignal): Promise<void> {
    while (!this.#closed && this.#ready.length < this.#wanted()) {
      signal?.throwIfAborted();
      if (this.#lastFailure && this.#making.size === 0)
        throw new SandboxRunError(
          "docker-unavailable",
          `The warm pool could not make a sandbox: ${this.#lastFailure}`,
          {
            hint: "Check the engine and the runner image (`sandbox-run doctor`); calls still start cold meanwhile.",
          },
        );
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /**
   * A sandbox for one call, never given to another: a ready one that answers its check, or the
   * next one made when no earlier claim waits for it; otherwise the reason the call starts cold.
   */
  async claim(signal?: AbortSignal): Promise<WarmClaim> {
    const started = performance.now();
    while (true) {
      if (this.#closed) return { reason: "the warm pool is closed" };
      let sandbox = this.#ready.shift();
      if (!sandbox) {
        if (this.#making.size + this.#refillsDue <= this.#waiters.length) return { reason: this.#emptyReason() };
        const waitMs = this.#options.waitMs ?? DEFAULT_WAIT_MS;
        const next = await this.#next(signal, waitMs);
        if (next === "timeout") return { reason: `no warm sandbox was ready within ${waitMs / 1000} s` };
        if (!next) continue;
        sandbox = next;
      }
      const idleLeftMs = (this.#idleDeadlines.get(sandbox) ?? Number.POSITIVE_INFINITY) - Date.now();
      if (idleLeftMs < idleMarginMs(this.#options.idleMs)) {
        this.#discard(
          sandbox,
          `its idle deadline is ${Math.max(0, Math.round(idleLeftMs / 1000))} s away: too near to serve a call`,
        );
        this.#fill();
        continue;
      }
      // One fewer kept: the next is made shortly, in the background.
      this.#taken++;
      this.#refillLater();
      const checkStarted = performance.now();
      const problem = await sandbox.check(this.#options.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS);
      if (problem) {
        this.#taken--;
        this.#discard(sandbox, problem);
        continue;
      }
      const now = performance.now();
      sandbox.claim({
        waitedMs: Math.round(now - started),
        checkMs: Math.round(now - checkStarted),
        readyForMs: Math.round(now - sandbox.readyAt),
      });
      this.#stats.claimed++;
      return { sandbox };
    }
  }

  /**
   * One of the expected calls (warm.calls) starts cold: it uses up one call, so the pool makes one
   * sandbox fewer, and removes a ready one no call is left to claim (review, session 35: a batch
   * whose every task missed the pool kept its sandboxes idle to the end; four calls, two cold, made
   * six containers). Without warm.calls nothing changes.
   */
  forgo(): void {
    if (this.#options.claims === undefined) return;
    this.#forgone++;
    this.#trim();
  }

  /** Stops making sandboxes and removes every one not claimed yet (claimed ones are their runs'). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#refillTimer);
    for (const making of this.#making) making.abort(new Error("the warm pool is closing"));
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
    for (const sandbox of this.#ready.splice(0)) this.#track(sandbox.destroy());
    // Sandboxes still being made end (and are removed) as they notice; wait for all of it.
    while (this.#stopping.size > 0) await Promise.all([...this.#stopping]);
    // Only now: a process.exit() while they were being removed still has a helper remove them.
    this.#forgetAtExit?.();
  }

  #emptyReason(): string {
    if (this.#options.claims !== undefined && this.#taken + this.#forgone >= this.#options.claims)
      return `the pool was told to expect ${this.#options.claims} call(s) (warm.calls), and that many have come`;
    if (this.#lastFailure && this.#ready.length === 0)
      return `the pool could not make a warm sandbox: ${this.#lastFailure}`;
    return `every one of the pool's ${this.#options.size} warm sandbox(es) is taken`;
  }

  /** Waits for the next sandbox made (undefined when the pool closed or making one failed). */
  #next(signal: AbortSignal | undefined, waitMs: number): Promise<PoolSandbox | undefined | "timeout"> {
    return new Promise((resolve, reject) => {
      const stopWaiting = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        const at = this.#waiters.indexOf(waiter);
        if (at >= 0) this.#waiters.splice(at, 1);
      };
      const waiter = (sandbox: PoolSandbox | undefined) => {
        stopWaiting();
        resolve(sandbox);
      };
      const onAbort = () => {
        stopWaiting();
        reject(signal?.reason);
      };
      // Given up on: the sandbox being made goes to the ready list (or the next claim) when it comes.
      const timer = setTimeout(() => {
        stopWaiting();
        resolve("timeout");
      }, waitMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #refillLater(): void {
    this.#refillsDue++;
    this.#refillTimer ??= setTimeout(() => {
      this.#refillTimer = undefined;
      this.#refillsDue = 0;
      this.#fill();
    }, REFILL_DELAY_MS);
  }

  /** How many sandboxes to keep ready or being made: the size, or fewer when fewer claims are to come. */
  #wanted(): number {
    const left = (this.#options.claims ?? Number.POSITIVE_INFINITY) - this.#taken - this.#forgone;
    return Math.max(0, Math.min(this.#options.size, left));
  }

  /** Removes ready sandboxes past what the calls still to come can claim. */
  #trim(): void {
    while (this.#waiters.length === 0 && this.#ready.length > this.#wanted()) {
      // Not trouble (no warm.discarded): the pool was told fewer calls are left than it holds.
      this.#track(this.#ready.pop()!.destroy());
    }
  }

  #fill(): void {
    if (this.#closed || Date.now() < this.#retryAt) return;
    while (this.#ready.length + this.#making.size < this.#wanted()) this.#makeOne();
  }

  #makeOne(): void {
    const abort = new AbortController();
    this.#making.add(abort);
    const identity = {
      warmId: `warm-${crypto.randomBytes(6).toString("hex")}`,
      owner: {
        pid: process.pid,
        host: os.hostname(),
        token: OWNER_TOKEN,
        ...pidnsField(),
      },
      now: new Date(),
      idleMs: this.#options.idleMs,
      maxRunMs: this.#options.maxRunMs,
      ...(this.#options.preloadApis ? { preloadApis: this.#options.preloadApis } : {}),
    };
    const make = this.#options.make ?? ((input: MakeWarmSandbox) => WarmSandbox.make(input));
    const making = make({
      engine: this.#options.engine,
      shape: this.#options.shape,
      identity,
      loadTimeoutMs: this.#options.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS,
      signal: abort.signal,
      ...(this.#options.imageId ? { imageId: this.#options.imageId } : {}),
    }).then(
      (sandbox: PoolSandbox) => {
        this.#making.delete(abort);
        this.#idleDeadlines.set(sandbox, identity.now.getTime() + identity.idleMs);
        this.#made(sandbox);
      },
      (error: unknown) => {
        this.#making.delete(abort);
        this.#makeFailed(error);
      },
    );
    this.#track(making.finally(() => this.#fill()));
  }

  #made(sandbox: PoolSandbox): void {
    if (this.#closed) {
      this.#track(sandbox.destroy());
      return;
    }
    this.#failures = 0;
    this.#lastFailure = undefined;
    this.#stats.made++;
    this.#options.onChange?.({
      type: "warm.made",
      warmId: sandbox.warmId,
      containerId: sandbox.container.id,
      makeMs: sandbox.makeMs,
      loadedMs: sandbox.loadedMs,
    });
    sandbox.onDeath((reason) => {
      const at = this.#ready.indexOf(sandbox);
      if (at < 0) return;
      this.#ready.splice(at, 1);
      this.#discard(sandbox, reason);
      this.#fill();
    });
    const waiter = this.#waiters.shift();
    if (waiter) waiter(sandbox);
    else {
      this.#ready.push(sandbox);
      this.#trim();
    }
  }

  #makeFailed(error: unknown): void {
    if (this.#closed) return;
    this.#stats.makeFailures++;
    this.#failures++;
    this.#lastFailure = (
      (error as { shortMessage?: string })?.shortMessage ??
      (error as Error)?.message ??
      String(error)
    )
      .split("\n")[0]!
      .replace(/\.$/, "");
    // A pool that cannot make sandboxes (no image, engine down) must not spin: back off, up to 30 s.
    const retryInMs = Math.min(MAX_RETRY_MS, 1000 * 2 ** (this.#failures - 1));
    this.#retryAt = Date.now() + retryInMs;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => this.#fill(), retryInMs);
    this.#retryTimer.unref();
    this.#options.onChange?.({ type: "warm.make-failed", reason: this.#lastFailure, retryInMs });
    // Claims waiting for a sandbox that will not come go cold now (the latest ones).
    const excess = this.#waiters.length - this.#making.size;
    if (excess > 0) for (const waiter of this.#waiters.splice(-excess)) waiter(undefined);
  }

  #discard(sandbox: PoolSandbox, reason: string): void {
    this.#stats.discarded++;
    this.#options.onChange?.({
      type: "warm.discarded",
      warmId: sandbox.warmId,
      containerId: sandbox.container.id,
      reason,
      ...(sandbox.stderrTail.trim() ? { stderrTail: sandbox.stderrTail.trim() } : {}),
    });
    this.#track(sandbox.destroy());
  }

  #track(work: Promise<unknown>): void {
    const settled = work.catch(() => {});
    this.#stopping.add(settled);
    void settled.then(() => this.#stopping.delete(settled));
  }
}
