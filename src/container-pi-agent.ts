// ContainerPiAgent: the Agent seam, backed by one fresh hardened container per call.
// (Over 300 lines because it is the public surface: plan, run, stream, records and engine choice
// each have their method here; the work itself is in run/, image/, engine/ and replay/.)
import path from "node:path";
import type { Agent } from "./agent.js";
import { DockerEngine } from "./engine/docker-engine.js";
import type { Engine } from "./engine/engine.js";
import { EnginePool } from "./engine/engine-pool.js";
import { errorSummary, isSandboxRunError, SandboxRunError, usageError } from "./errors.js";
import { ensureRunnerImage, type ReadyImage } from "./image/ensure-runner-image.js";
import { runnerImageSpec } from "./image/runner-image.js";
import type { RunRecorder } from "./record/run-record.js";
import { type ReplaySource, replayRunOptions, versionDrift } from "./replay/replay-source.js";
import { executeRun, type RunDetails } from "./run/execute-run.js";
import { type PlannedRun, preparePlan } from "./run/prepare-plan.js";
import { currentVersions, openRunRecord } from "./run/record-run.js";
import { reapContainers } from "./run/reap-orphans.js";
import { reapRunDirs } from "./run/run-dirs.js";
import { type RunEvent, type RunEventListener, RunTimeline } from "./run/run-events.js";
import { type ResolvedRun, resolveRun, type RunOptions } from "./run/resolve-options.js";
import { AgentWarmPool, type WarmOptions } from "./warm/agent-warm-pool.js";
import type { WarmPoolStats } from "./warm/warm-pool.js";

export interface ContainerPiAgentConfig extends Omit<RunOptions, "signal"> {
  /** The container engine; defaults to the Docker engine DOCKER_HOST (or the local socket) names. */
  engine?: Engine;
  /**
   * Several engines (instead of `engine`): an EnginePool, or the path of an engines file. Each run
   * goes to the least-loaded engine that answers; default: the file SANDBOX_RUN_ENGINES names.
   */
  engines?: EnginePool | string;
  /** Build the runner image when it is missing instead of failing (progress goes to onProgress). */
  autoBuildImage?: boolean;
  /** Human-readable progress lines (image builds); the CLI prints them on stderr. */
  onProgress?: (line: string) => void;
  /** Receives every event of every run made by this agent. */
  onEvent?: RunEventListener;
  /** Remove containers whose controller died before the first run (default true). */
  reapOrphans?: boolean;
  /**
   * The host environment the layers start from (provider keys, SANDBOX_RUN_MODEL); the
   * constructor's and each run's `env` go on top. Defaults to process.env.
   */
  hostEnv?: Record<string, string | undefined>;
  /**
   * Write a run record of every call into this folder: the n-th call (in the order calls are
   * planned) into `<recordTo>/<n>`, which must be new or empty. `replayRecord(recordTo)` plays
   * them back in the same order. A call's own `record` wins.
   */
  recordTo?: string;
  /**
   * Answer the model from recorded runs instead of the provider (see `replayRecord` in
   * `sandbox-run/testing`): the n-th call takes the n-th record. A call's own `replay` wins.
   */
  replay?: ReplaySource;
  /**
   * Keep this many warm sandboxes ready (a number, or `{ size, idleSeconds }`): hardened containers
   * of this agent's shape, started before any call with Pi loaded, each used for one call and
   * removed after it. A call they can serve skips the container's and Pi's start; its workspace is
   * copied in (at /workspace). Default: SANDBOX_RUN_WARM, else none. `close()` removes them.
   */
  warm?: number | WarmOptions;
}

export interface RunCallOptions extends RunOptions {
  /** Receives this run's events as they arrive. */
  onEvent?: RunEventListener;
  /** Write a run record of this call into this new or empty folder (what the CLI's --record writes). */
  record?: string;
  /** Answer this call's model from the next record of this source instead of the provider. */
  replay?: ReplaySource;
}

/** What runPlanned() takes besides the plan. */
export interface RunPlannedOptions extends Pick<RunCallOptions, "onEvent" | "signal"> {
  /** A record the caller opened and completes itself (the CLI's --record): it gets the model traffic. */
  recorder?: Pick<RunRecorder, "traffic">;
}

export interface RunStream<T> extends AsyncIterable<RunEvent> {
  /** The run's result; rejects like run() does. */
  readonly result: Promise<RunDetails<T>>;
}

export type { PlannedRun } from "./run/prepare-plan.js";
export type { WarmOptions } from "./warm/agent-warm-pool.js";
export type { WarmPoolChange, WarmPoolStats } from "./warm/warm-pool.js";

export class ContainerPiAgent implements Agent {
  private readonly pool: EnginePool;
  private reaped = false;
  /** The pool was made here (from a file or the environment), so close() may close it. */
  private readonly ownsPool: boolean;
  /** Each engine checked (and reaped) once per agent. */
  private readonly enginesReady = new Map<Engine, Promise<void>>();
  /** Each runner image asked for, checked (or built, or loaded) once per agent and engine. */
  private readonly images = new Map<string, Promise<ReadyImage>>();
  /** Calls planned so far (numbers `recordTo` folders; a call that cannot be planned gets none). */
  private calls = 0;
  /** Warm sandboxes, when asked for. */
  readonly #warm?: AgentWarmPool;

  constructor(private readonly config: ContainerPiAgentConfig = {}) {
    const enginesFile = (config.hostEnv ?? process.env).SANDBOX_RUN_ENGINES;
    const engines = config.engines ?? (config.engine ? undefined : enginesFile || undefined);
    if (typeof engines === "string") this.pool = EnginePool.fromFile(engines);
    else this.pool = engines ?? EnginePool.of(config.engine ?? new DockerEngine());
    this.ownsPool = typeof engines === "string" || (!engines && !config.engine);
    const warm = warmOptionsOf(config.warm, (config.hostEnv ?? process.env).SANDBOX_RUN_WARM);
    if (warm.size > 0) {
      this.#warm = new AgentWarmPool({
        options: warm,
        engine: this.warmEngine(),
        prepare: (engine, image) => this.prepare(engine, image, undefined, (line) => config.onProgress?.(line)),
      });
      const template = this.warmTemplate();
      if (template) this.#warm.start(template);
    }
  }

  /**
   * Removes this agent's warm sandboxes (claimed ones go with their runs) and lets go of held engine
   * connections (ssh://) it opened; it may not run again afterwards.
   */
  async close(): Promise<void> {
    await this.#warm?.close();
    if (this.ownsPool) this.pool.close();
  }

  /** Resolves once every warm sandbox is ready (rejects with why it cannot be); at once without `warm`. */
  async warmUp(signal?: AbortSignal): Promise<void> {
    await this.#warm?.whenFull(signal);
  }

  /** The warm pool's counts (made, claimed, discarded, ready ...), when the agent keeps one. */
  warmStats(): WarmPoolStats | undefined {
    return this.#warm?.pool?.stats();
  }

  async run<TOutput = string>(prompt: string, options: RunCallOptions = {}): Promise<TOutput> {
    const details = await this.runDetailed<TOutput>(prompt, options);
    return details.result;
  }

  /** Like run(), with the run's id, usage, duration, image, container id and changed files. */
  async runDetailed<TOutput = unknown>(prompt: string, options: RunCallOptions = {}): Promise<RunDetails<TOutput>> {
    const planned = this.plan(prompt, options);
    const recordDir =
      options.record ?? (this.config.recordTo ? path.join(this.config.recordTo, String(this.calls)) : undefined);
    if (!recordDir) return this.runPlanned<TOutput>(planned, options);
    const recorder = openRunRecord(recordDir, planned);
    const onEvent = (event: RunEvent) => {
      recorder.onEvent(event);
      options.onEvent?.(event);
    };
    try {
      const details = await this.runPlanned<TOutput>(planned, { ...options, onEvent, recorder });
      const notes = await recorder.finish({
        ok: true,
        result: details.result,
        meta: { ...details, result: undefined },
      });
      return notes.length > 0 ? { ...details, recordNotes: notes } : details;
    } catch (error) {
      const e = isSandboxRunError(error) ? error : undefined;
      await recorder.finish({
        ok: false,
        error: errorSummary(error),
        meta: {
          runId: e?.runId ?? planned.plan.runId,
          usage: e?.usage,
          code: e?.code ?? "internal",
          warm: e?.warm ?? false,
        },
      });
      throw error;
    }
  }

  /**
   * What a call would do, as data: resolved options and the run plan (mounts, argv, env, limits,
   * routes). Reads files (policy, models, schema, a replayed record) and nothing else: no engine,
   * no command. Input errors are thrown here, before anything exists. With a replay source, the
   * call takes its next record here.
   */
  plan(prompt: string, options: RunCallOptions = {}): PlannedRun {
    const source = options.replay ?? this.config.replay;
    const replay = source?.next();
    let planned: PlannedRun;
    try {
      // A replayed call keeps the caller's prompt, schema and policy; the model comes from the record.
      const effective = replay ? { ...options, ...replayRunOptions(replay.record) } : options;
      const run = resolveRun(prompt, this.config, effective, this.config.hostEnv ?? process.env);
      planned = this.planResolved(run);
    } catch (error) {
      // A call that cannot be planned had no record when it was recorded either.
      if (replay) source?.rewind?.();
      throw error;
    }
    this.calls++;
    if (!replay) return planned;
    const drift = versionDrift(replay.record.versions, currentVersions());
    if (drift) planned.run.warnings.push(`${drift}: Pi's requests may differ from the recorded ones.`);
    return { ...planned, replay };
  }

  /**
   * A resolved call as a plan: for a warm sandbox when the agent keeps them and one can serve it
   * (else cold, with the reason in `warmMiss`).
   */
  private planResolved(run: ResolvedRun, runId?: string): PlannedRun {
    // Bind mode only where every engine a run may go to sees this host's paths; copy mode elsewhere.
    const remote = this.pool.engines.find((e) => !e.sharesHostFilesystem);
    const place = {
      image: run.image ?? runnerImageSpec().tag,
      sharesHostFilesystem: !remote,
      engineName: remote?.name,
      ...(runId ? { runId } : {}),
    };
    if (!this.#warm) return preparePlan(run, place);
    if (run.workspaceMode === "bind")
      return { ...preparePlan(run, place), warmMiss: "it asks for bind mode; a warm sandbox's trees are copied in" };
    const warm = preparePlan(run, { ...place, warm: true });
    const unfit = this.#warm.unfit(warm);
    if (!unfit) return warm;
    return { ...preparePlan(run, { ...place, runId: warm.plan.runId }), warmMiss: unfit };
  }

  /** The agent's own configuration as a call (no prompt of its own): the shape its warm pool keeps. */
  private warmTemplate(): PlannedRun | undefined {
    try {
      const run = resolveRun("(the warm pool's shape)", this.config, {}, this.config.hostEnv ?? process.env);
      return preparePlan(run, { image: run.image ?? runnerImageSpec().tag, warm: true });
    } catch {
      // Not plannable alone (e.g. the model comes with each call): the first call shapes the pool.
      return undefined;
    }
  }

  /** Warm sandboxes live on the pool's first engine that takes runs. */
  private warmEngine(): Engine {
    const load = this.pool.load();
    return this.pool.engines.find((_, i) => (load[i]?.capacity ?? 0) > 0) ?? this.pool.engines[0]!;
  }

  /** Runs a plan made by plan(); each plan runs once. */
  async runPlanned<TOutput = unknown>(
    planned: PlannedRun,
    options: RunPlannedOptions = {},
  ): Promise<RunDetails<TOutput>> {
    options.signal?.throwIfAborted();
    const listeners = [this.config.onEvent, options.onEvent].filter((l): l is RunEventListener => Boolean(l));
    // The timeline starts here so an image build on first use shows up in the run's events.
    const timeline = new RunTimeline(planned.plan.runId, listeners);
    const warm = await this.#warm?.claim(planned, timeline, options.signal);
    const lease = warm
      ? undefined
      : await this.pool.acquire({
          runtime: planned.plan.runtime,
          signal: options.signal,
          onSkipped: (skipped) => timeline.sandbox("engine.skipped", skipped),
          onQueued: () => timeline.sandbox("engine.queued", { load: this.pool.load() }),
        });
    const engine = warm?.engine ?? lease!.engine;
    timeline.sandbox("engine.chosen", { engine: engine.name, address: engine.address });
    try {
      // The plan names the image already (plan() resolved it); here it is checked, loaded or built
      // (a warm sandbox's pool did that before it made the sandbox).
      const image =
        warm ??
        (await this.prepare(engine, planned.run.image, options.signal, (line) =>
          timeline.sandbox("image.build", { line }),
        ));
      const details = await executeRun(planned, {
        engine,
        piVersion: image.piVersion,
        timeline,
        signal: options.signal,
        ...(options.recorder ? { traffic: options.recorder.traffic } : {}),
        ...(warm ? { warm: warm.sandbox } : {}),
      });
      lease?.release();
      return details as RunDetails<TOutput>;
    } catch (error) {
      // A sandbox claimed but never handed to the run (its image check failed first) goes too.
      if (warm) await warm.sandbox.destroy();
      const lost = await linkLost(engine, error);
      lease?.release(lost ? "broken" : "ok");
      if (!lost) throw error;
      throw new SandboxRunError(
        "docker-unavailable",
        `The link to engine "${engine.name}" (${engine.address ?? "?"}) broke during the run: ${lost}.`,
        {
          hint: "The sandbox stops by its deadline on its own; once the engine answers again, `sandbox-run gc` (with the same engines) removes what is left.",
          runId: planned.plan.runId,
          lastEvents: timeline.lastEvents(),
          cause: error,
        },
      );
    }
  }

  /** The async-iterable form: iterate the run's events as they arrive, then await `result`. */
  stream<TOutput = unknown>(prompt: string, options: RunCallOptions = {}): RunStream<TOutput> {
    const queue: RunEvent[] = [];
    let wake: (() => void) | undefined;
    let finished = false;
    const result = this.runDetailed<TOutput>(prompt, {
      ...options,
      onEvent: (event) => {
        options.onEvent?.(event);
        queue.push(event);
        wake?.();
      },
    }).finally(() => {
      finished = true;
      wake?.();
    });
    // The iterator never rejects; a failure is reported through `result`.
    result.catch(() => {});
    return {
      result,
      async *[Symbol.asyncIterator]() {
        while (true) {
          while (queue.length > 0) yield queue.shift()!;
          if (finished) return;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
    };
  }

  /**
   * What dead controllers left, on every engine of the pool (not only those this agent's runs
   * reach), and this host's run folders: once per agent, in the background, best effort. An
   * engine that does not answer is left for `sandbox-run gc`.
   */
  private reapEveryEngineOnce(): void {
    if (this.reaped) return;
    this.reaped = true;
    for (const engine of this.pool.engines) {
      void engine
        .ping(AbortSignal.timeout(10_000))
        .then(() => reapContainers(engine))
        .catch(() => {});
    }
    try {
      reapRunDirs();
    } catch {
      // Best effort: a folder we cannot read is not ours to remove.
    }
  }

  /**
   * Checks each engine once per agent (and reaps every engine's orphans in the background), then the runner
   * image a run asked for, once per engine and image: loaded from another engine of the pool that
   * has it, or built. A failed check is forgotten, so the next run retries.
   */
  private async prepare(
    engine: Engine,
    image: string | undefined,
    signal: AbortSignal | undefined,
    onBuild: (line: string) => void,
  ) {
    let engineReady = this.enginesReady.get(engine);
    if (!engineReady) {
      engineReady = (async () => {
        await engine.ping(signal);
        if (this.config.reapOrphans !== false) this.reapEveryEngineOnce();
      })();
      this.enginesReady.set(engine, engineReady);
      engineReady.catch(() => this.enginesReady.delete(engine));
    }
    await engineReady;
    const key = `${engine.name}\0${image ?? ""}`;
    let ready = this.images.get(key);
    if (!ready) {
      ready = ensureRunnerImage(engine, {
        image,
        autoBuild: this.config.autoBuildImage,
        sources: this.pool.engines,
        signal,
        progress: (line) => {
          onBuild(line);
          this.config.onProgress?.(line);
        },
      });
      this.images.set(key, ready);
      ready.catch(() => this.images.delete(key));
    }
    return ready;
  }
}

const LINK_PING_TIMEOUT_MS = 5_000;

/** The `warm` option (or SANDBOX_RUN_WARM, a number) as options; size 0 keeps none. */
function warmOptionsOf(warm: number | WarmOptions | undefined, fromEnv: string | undefined): WarmOptions {
  const options = typeof warm === "number" ? { size: warm } : (warm ?? { size: Number(fromEnv ?? 0) });
  const what = warm === undefined ? `SANDBOX_RUN_WARM ("${fromEnv}")` : `warm.size (${options.size})`;
  if (!Number.isInteger(options.size) || options.size < 0)
    throw usageError(`${what} must be a whole number of warm sandboxes.`, "Pass 0 for none, or e.g. 2.");
  if (options.idleSeconds !== undefined && !(options.idleSeconds > 0))
    throw usageError(`warm.idleSeconds must be positive, got ${options.idleSeconds}.`);
  return options;
}

/**
 * After a failed run: whether the engine itself stopped answering (the link broke, the machine
 * went away), and why. Failures that are the run's own (usage, validation, limits, the caller's
 * abort) are taken as they are.
 */
async function linkLost(engine: Engine, error: unknown): Promise<string | undefined> {
  const own = ["usage", "validation", "limit", "aborted", "model-error", "policy-violation", "image-missing"];
  if (isSandboxRunError(error) && own.includes(error.code)) return undefined;
  const timeout = AbortSignal.timeout(LINK_PING_TIMEOUT_MS);
  try {
    await engine.ping(timeout);
    return undefined;
  } catch (pingError) {
    // A link gone silent answers nothing and closes nothing: say so, not "aborted".
    if (timeout.aborted) return `no answer to its ping within ${LINK_PING_TIMEOUT_MS / 1000} s`;
    const e = pingError as SandboxRunError;
    return (e?.shortMessage ?? e?.message ?? "no answer").replace(/\.$/, "");
  }
}
