// An agent's warm sandboxes: one pool, of the shape of the agent's own configuration (or, when that
// cannot be planned alone, e.g. no model is configured, of its first call that can use one), on
// one engine. It decides, per planned call, whether a warm sandbox can serve it (and says why not),
// and hands the run a claimed sandbox or nothing. Its start (engine check, runner image) runs in
// the background; a failure there is the reason calls start cold, and the next call tries again.
import type { Engine } from "../engine/engine.js";
import type { PlannedRun } from "../run/plan/prepare-plan.js";
import { warmIneligible, warmShapeDifference, warmShapeOf } from "../run/plan/warm-shape.js";
import type { RunTimeline } from "../run/run-events.js";
import type { ClaimedSandbox } from "../run/warm-claim.js";
import type { RunnerPlatform } from "../util/platform.js";
import { WarmPool, type WarmPoolChange } from "./warm-pool.js";

export interface WarmOptions {
  /**
   * Warm sandboxes kept ready (made before any call, one per call, refilled in the background).
   * Default: SANDBOX_RUN_WARM, else none (so `{ calls: 1 }` says "one call, warm if the environment asks").
   */
  size?: number;
  /**
   * How many calls will use the pool at most (e.g. a batch's tasks): no sandbox is made beyond
   * them. Default: no end.
   */
  calls?: number;
  /**
   * An unclaimed warm sandbox stops by itself after this long, counted from its container's start
   * (Pi's loading included, ~1-3 s); default 600 (10 minutes).
   */
  idleSeconds?: number;
  /** What happens to the pool outside any call: a sandbox made, one removed and why, one that could not be made. */
  onChange?: (change: WarmPoolChange) => void;
}

const DEFAULT_WARM_IDLE_SECONDS = 600;

interface AgentWarmPoolInput {
  options: WarmOptions & { size: number };
  engine: Engine;
  /** Checks the engine and the runner image (once per agent); resolves with the image's Pi version. */
  /** The image ready on the engine, for the pool's platform (a call's own, under emulation; else the engine's). */
  prepare(
    engine: Engine,
    image: string,
    platform?: RunnerPlatform,
  ): Promise<{ piVersion: string; id?: string; staleBase?: string }>;
  onChange?: (change: WarmPoolChange) => void;
  /** Called once the pool has started making its sandboxes (their containers boot for a while). */
  onStarted?: () => void;
}

interface WarmClaimed {
  sandbox: ClaimedSandbox;
  engine: Engine;
  piVersion: string;
  /** The pool's image was built FROM another build's runner image: each warm call warns as a cold one does. */
  staleBase?: string;
}

interface StartedPool {
  pool: WarmPool;
  piVersion: string;
  staleBase?: string;
}

/** The provider API of the template's model (loaded in each sandbox before its claim). */
function apisOf(template: PlannedRun): string[] {
  const { routing } = template.run;
  const route = routing.routes.find((r) => r.id === routing.selectedRouteId) ?? routing.routes[0];
  return route?.api ? [route.api] : [];
}

export class AgentWarmPool {
  #pool?: WarmPool;
  #starting?: Promise<StartedPool>;
  #startFailure?: string;
  #template?: PlannedRun;
  #closed = false;

  constructor(private readonly input: AgentWarmPoolInput) {}

  /** Starts the pool of `template`'s shape (a plan of the agent's configuration), in the background. */
  start(template: PlannedRun): void {
    if (this.#template || this.#closed) return;
    if (warmIneligible(template.plan, template.callerEnvNames)) return;
    this.#template = template;
    void this.#start().catch(() => {});
  }

  /** Whether a template (the agent's options, or a first call) gave the pool its shape. */
  get shaped(): boolean {
    return this.#template !== undefined;
  }

  /** The pool, once made (tests and the benchmark read its stats). */
  get pool(): WarmPool | undefined {
    return this.#pool;
  }

  /** Resolves once the pool has all its sandboxes ready; rejects with why it cannot. */
  async whenFull(signal?: AbortSignal): Promise<void> {
    const { pool } = await this.#start();
    await pool.whenFull(signal);
  }

  /**
   * Why a warm sandbox cannot serve this warm-shaped plan, or undefined when one can. The first
   * such plan shapes the pool when the agent's configuration could not.
   */
  unfit(planned: PlannedRun): string | undefined {
    const reason = warmIneligible(planned.plan, planned.callerEnvNames);
    if (reason) return reason;
    if (!this.#template) {
      this.start(planned);
      return undefined;
    }
    const difference = warmShapeDifference(warmShapeOf(planned.plan), warmShapeOf(this.#template.plan));
    if (difference) return `its sandbox differs from the warm pool's: ${difference}`;
    const maxRunMs = this.#template.run.timeoutMs;
    if (planned.run.timeoutMs > maxRunMs)
      return `its timeout (${planned.run.timeoutMs / 1000} s) is longer than the warm pool's (${maxRunMs / 1000} s)`;
    return undefined;
  }

  /**
   * A claimed sandbox for this call, or undefined (the call starts cold; a `warm.miss` event says
   * why). Calls planned cold (their plan carries the reason) get nothing.
   */
  async claim(planned: PlannedRun, timeline: RunTimeline, signal?: AbortSignal): Promise<WarmClaimed | undefined> {
    const miss = (reason: string) => {
      // A call that starts cold uses up one of the calls the pool was told to expect.
      this.#pool?.forgo();
      timeline.sandbox("warm.miss", { reason });
      return undefined;
    };
    if (planned.warmMiss) return miss(planned.warmMiss);
    if (!planned.plan.warmShaped) return undefined;
    if (this.#closed) return miss("the warm pool is closed");
    let started: StartedPool;
    try {
      started = await this.#start();
    } catch {
      return miss(`the warm pool could not start: ${this.#startFailure ?? "unknown"}`);
    }
    const claim = await started.pool.claim(signal);
    if ("reason" in claim) return miss(claim.reason);
    return {
      sandbox: claim.sandbox,
      engine: started.pool.engine,
      piVersion: started.piVersion,
      ...(started.staleBase ? { staleBase: started.staleBase } : {}),
    };
  }

  /** Stops refilling and removes every unclaimed sandbox. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#starting?.catch(() => {});
    await this.#pool?.close();
  }

  /** The engine checked, the image ready, the pool made and filling; retried after a failure. */
  #start(): Promise<StartedPool> {
    const template = this.#template;
    if (!template) return Promise.reject(new Error("no call has shaped the warm pool yet"));
    this.#starting ??= (async () => {
      const { piVersion, id, staleBase } = await this.input.prepare(
        this.input.engine,
        template.plan.image,
        template.plan.platform,
      );
      if (this.#closed) throw new Error("the warm pool is closed");
      this.#pool = new WarmPool({
        engine: this.input.engine,
        shape: warmShapeOf(template.plan),
        size: this.input.options.size,
        ...(this.input.options.calls !== undefined ? { claims: this.input.options.calls } : {}),
        idleMs: (this.input.options.idleSeconds ?? DEFAULT_WARM_IDLE_SECONDS) * 1000,
        maxRunMs: template.run.timeoutMs,
        preloadApis: apisOf(template),
        ...(id ? { imageId: id } : {}),
        onChange: (change) => {
          this.input.onChange?.(change);
          this.input.options.onChange?.(change);
        },
      });
      this.#pool.start();
      this.input.onStarted?.();
      return { pool: this.#pool, piVersion, ...(staleBase ? { staleBase } : {}) };
    })();
    this.#starting.catch((error: unknown) => {
      this.#startFailure = (error as Error)?.message?.split("\n")[0] ?? String(error);
      this.#starting = undefined;
    });
    return this.#starting;
  }
}
