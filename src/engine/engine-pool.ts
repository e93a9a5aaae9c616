// A pool of engines with a capacity each: every run goes to the least-loaded engine that answers
// its ping and offers the run's runtime; a full pool makes runs wait for a free place. An engine
// that fails its ping is skipped (the caller hears which and why) and pinged again only after a
// pause; when none answers, the error names every engine and its reason. Loads are counted
// synchronously before any await, so concurrent runs of one controller spread instead of piling
// onto the same engine.
import { isSandboxRunError, SandboxRunError, usageError } from "../errors.js";
import type { AnswerLimits } from "./answer-limits.js";
import { DockerEngine } from "./docker-engine.js";
import type { Engine } from "./engine.js";
import { type EngineEntry, loadEnginesFile } from "./engines-file.js";

/** A ping that succeeded this recently is trusted without another round trip. */
const HEALTHY_FOR_MS = 5_000;
/** An engine whose ping failed is left alone this long before it is tried again. */
const RETRY_AFTER_MS = 10_000;
const PING_TIMEOUT_MS = 10_000;

export interface PoolMember {
  engine: Engine;
  /** Runs at once; 0 keeps the engine out of scheduling (it can still be an image source). */
  capacity: number;
  /** Runtimes runs may use here; default: what the engine registers. */
  runtimes?: readonly string[];
}

export interface EngineLease {
  readonly engine: Engine;
  /** Gives the place back; `broken` makes the next run ping the engine again first. */
  release(outcome?: "ok" | "broken"): void;
}

export interface AcquireOptions {
  /** The runtime the run needs (runc, runsc). */
  runtime?: string;
  signal?: AbortSignal;
  /** An engine passed over, and why (failed its ping, lacks the runtime). */
  onSkipped?: (skipped: { engine: string; reason: string }) => void;
  /** Called once when every usable engine is full and the run waits for a place. */
  onQueued?: () => void;
}

interface MemberState extends PoolMember {
  active: number;
  okAt: number;
  downUntil: number;
  lastFailure?: string;
  lastError?: unknown;
  registered?: Promise<string[]>;
}

export class EnginePool {
  readonly #members: MemberState[];
  #waiters: Array<() => void> = [];

  constructor(members: PoolMember[]) {
    if (members.length === 0) throw usageError("An engine pool needs at least one engine.");
    const names = members.map((m) => m.engine.name);
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice) throw usageError(`Two engines of the pool are named "${twice}".`, "Give each engine its own name.");
    this.#members = members.map((m) => ({ ...m, active: 0, okAt: 0, downUntil: 0 }));
  }

  /** One engine taking any number of runs: what a plain `engine` option means. */
  static of(engine: Engine): EnginePool {
    return new EnginePool([{ engine, capacity: Number.POSITIVE_INFINITY }]);
  }

  static fromEntries(entries: EngineEntry[], answers?: AnswerLimits): EnginePool {
    return new EnginePool(
      entries.map((entry) => ({
        engine: new DockerEngine({
          name: entry.name,
          endpoint: entry.endpoint,
          sharesHostFilesystem: entry.sharesHostFilesystem,
          ...(answers ? { answers } : {}),
        }),
        capacity: entry.capacity,
        ...(entry.runtimes ? { runtimes: entry.runtimes } : {}),
      })),
    );
  }

  /** The pool an engines file describes (`--engines <file>` / SANDBOX_RUN_ENGINES). */
  static fromFile(file: string, answers?: AnswerLimits): EnginePool {
    return EnginePool.fromEntries(loadEnginesFile(file), answers);
  }

  /** Every engine, in the file's order (those with capacity 0 too): gc, doctor, image sources. */
  get engines(): Engine[] {
    return this.#members.map((m) => m.engine);
  }

  /** Runs in progress per engine. */
  load(): Array<{ engine: string; active: number; capacity: number }> {
    return this.#members.map((m) => ({ engine: m.engine.name, active: m.active, capacity: m.capacity }));
  }

  async acquire(options: AcquireOptions = {}): Promise<EngineLease> {
    const { runtime, signal } = options;
    let queued = false;
    const told = new Set<string>();
    const skip = (member: MemberState, reason: string) => {
      // Each engine is named once per run, however often the run waits and retries.
      if (told.has(member.engine.name)) return;
      told.add(member.engine.name);
      options.onSkipped?.({ engine: member.engine.name, reason });
    };
    while (true) {
      signal?.throwIfAborted();
      const candidates = this.#members.filter(
        (m) => m.capacity > 0 && (!runtime || !m.runtimes || m.runtimes.includes(runtime)),
      );
      if (candidates.length === 0) throw this.noRuntime(runtime);
      const now = Date.now();
      for (const member of candidates.filter((m) => m.downUntil > now)) skip(member, this.downReason(member));
      const free = candidates
        .filter((m) => m.downUntil <= now && m.active < m.capacity)
        .sort((a, b) => a.active / a.capacity - b.active / b.capacity);
      for (const member of free) {
        // Reserved before the ping, so runs starting at the same moment spread over the pool.
        member.active++;
        const problem = await this.check(member, runtime, signal).catch((error: unknown) => {
          member.active--;
          this.wake();
          throw error;
        });
        if (!problem) return this.lease(member);
        member.active--;
        this.wake();
        skip(member, problem);
      }
      const usable = candidates.filter((m) => m.downUntil <= Date.now() && !this.lacks(m, runtime));
      if (usable.length === 0) throw this.noneAnswered(candidates, runtime);
      if (!queued) options.onQueued?.();
      queued = true;
      await this.waitForChange(candidates, signal);
    }
  }

  close(): void {
    for (const member of this.#members) member.engine.close?.();
  }

  /** Why the member cannot take the run now (down, lacks the runtime), or undefined when it can. */
  private async check(member: MemberState, runtime: string | undefined, signal?: AbortSignal) {
    if (Date.now() - member.okAt > HEALTHY_FOR_MS) {
      const timeout = AbortSignal.timeout(PING_TIMEOUT_MS);
      try {
        await member.engine.ping(signal ? AbortSignal.any([signal, timeout]) : timeout);
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        member.downUntil = Date.now() + RETRY_AFTER_MS;
        member.lastError = error;
        member.lastFailure = timeout.aborted
          ? `no answer to its ping within ${PING_TIMEOUT_MS / 1000} s`
          : ((error as SandboxRunError)?.shortMessage ?? (error as Error)?.message ?? String(error));
        member.lastFailure = member.lastFailure.replace(/\.$/, "");
        return `failed its ping: ${member.lastFailure}`;
      }
      member.okAt = Date.now();
      member.downUntil = 0;
    }
    if (runtime && !member.runtimes) {
      member.registered ??= member.engine.info(signal).then((info) => Object.keys(info.runtimes));
      member.registered.catch(() => (member.registered = undefined));
      const registered = await member.registered;
      if (!registered.includes(runtime)) {
        member.runtimes = registered;
        return `does not offer the runtime ${runtime}`;
      }
    }
    return undefined;
  }

  private lacks(member: MemberState, runtime: string | undefined): boolean {
    return Boolean(runtime && member.runtimes && !member.runtimes.includes(runtime));
  }

  private lease(member: MemberState): EngineLease {
    let released = false;
    return {
      engine: member.engine,
      release: (outcome = "ok") => {
        if (released) return;
        released = true;
        member.active--;
        if (outcome === "broken") member.okAt = 0;
        this.wake();
      },
    };
  }

  private downReason(member: MemberState): string {
    return `failed its ping: ${member.lastFailure ?? "no answer"}`;
  }

  private noneAnswered(candidates: MemberState[], runtime: string | undefined): SandboxRunError {
    const offering = candidates.filter((m) => !this.lacks(m, runtime));
    if (offering.length === 0) return this.noRuntime(runtime);
    // A pool of one (the plain `engine` option) fails with that engine's own error and hint.
    if (this.#members.length === 1 && isSandboxRunError(offering[0]!.lastError)) return offering[0]!.lastError;
    const reasons = offering.map(
      (m) => `${m.engine.name} (${m.engine.address ?? "?"}): ${m.lastFailure ?? "no answer"}`,
    );
    return new SandboxRunError("docker-unavailable", `No engine of the pool answered: ${reasons.join("; ")}.`, {
      hint: "Start the engines or fix the links to them; `sandbox-run doctor --engines <file>` checks each one.",
    });
  }

  private noRuntime(runtime: string | undefined): SandboxRunError {
    const offered = this.#members
      .filter((m) => m.capacity > 0)
      .map((m) => `${m.engine.name}: ${m.runtimes?.join(", ") ?? "?"}`)
      .join("; ");
    return usageError(
      `No engine of the pool offers the runtime ${runtime} (${offered}).`,
      "Register it on an engine and list it under `runtimes` (`sandbox-run doctor` says how), or choose another --runtime.",
    );
  }

  /** Resolves when a place is given back, or when a down engine may be tried again. */
  private waitForChange(candidates: MemberState[], signal?: AbortSignal): Promise<void> {
    const retries = candidates.map((m) => m.downUntil - Date.now()).filter((ms) => ms > 0);
    return new Promise<void>((resolve, reject) => {
      const stopWaiting = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#waiters = this.#waiters.filter((w) => w !== done);
      };
      const done = () => {
        stopWaiting();
        resolve();
      };
      const onAbort = () => {
        stopWaiting();
        reject(signal?.reason);
      };
      const timer = retries.length > 0 ? setTimeout(done, Math.min(...retries)) : undefined;
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(done);
    });
  }

  private wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
