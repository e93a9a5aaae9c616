// What the engines of a pool said of themselves (docker info: platform, Docker Desktop), asked once
// and kept, and where a run would go by what is known so far: bind mode only where every engine a
// run may go to sees this host's paths and sockets (not Docker Desktop's VM), copy mode elsewhere;
// the runner image of the caller's platform, else of the engine's own (placeOnEngine settles it on
// the engine the run gets).
import type { Engine, EngineInfo } from "../engine/engine.js";
import { noBindModeReason, sharesHostPaths } from "../engine/engine-kind.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { hostPlatform } from "../util/platform.js";
import type { PlanPlace } from "./plan/prepare-plan.js";
import type { ResolvedRun } from "./plan/resolve-options.js";

/** What a plan needs of an engine; learning its facts needs `info` too (a dry run's engines may lack it). */
type PlannedEngine = Pick<Engine, "name" | "sharesHostFilesystem"> & Partial<Pick<Engine, "info">>;

export class EngineFacts {
  readonly #asked = new Map<PlannedEngine, Promise<EngineInfo>>();
  /** The answers so far: what a synchronous plan can use. */
  readonly #known = new Map<PlannedEngine, EngineInfo>();

  constructor(private readonly engines: readonly PlannedEngine[]) {}

  /** Asks every engine (once), waiting at most `timeoutMs` for each; one that does not answer is left out. */
  async learn(timeoutMs: number): Promise<void> {
    await Promise.all(
      this.engines.map((engine) => this.infoOf(engine, AbortSignal.timeout(timeoutMs)).catch(() => undefined)),
    );
  }

  /** An engine's docker info, asked once (a failed ask is forgotten, so the next one retries). */
  async infoOf(engine: PlannedEngine, signal?: AbortSignal): Promise<EngineInfo> {
    let asked = this.#asked.get(engine);
    if (!asked) {
      asked = engine.info ? engine.info(signal) : Promise.reject(new Error(`${engine.name}: not asked`));
      this.#asked.set(engine, asked);
      asked.then(
        (info) => this.#known.set(engine, info),
        () => this.#asked.delete(engine),
      );
    }
    if (!signal) return asked;
    // The ask goes on (and is kept) when this caller stops waiting.
    return Promise.race([
      asked,
      new Promise<never>((_, reject) => {
        signal.throwIfAborted();
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      }),
    ]);
  }

  /** Where a resolved run would go, as far as the engines are known. */
  placeFor(run: ResolvedRun): PlanPlace {
    const remote = this.engines.find((e) => !sharesHostPaths(e, this.#known.get(e)));
    const reason = remote && noBindModeReason(this.#known.get(remote));
    const platform =
      run.policy.platform ?? (this.engines[0] && this.#known.get(this.engines[0])?.platform) ?? hostPlatform();
    return {
      image: run.image ?? runnerImageSpec(platform).tag,
      sharesHostFilesystem: !remote,
      engineName: remote?.name,
      ...(reason ? { engineReason: reason } : {}),
    };
  }
}
