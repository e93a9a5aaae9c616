// ContainerPiAgent: the Agent seam, backed by one fresh hardened container per call.
import type { Agent } from "./agent.js";
import { DockerEngine } from "./engine/docker-engine.js";
import type { Engine } from "./engine/engine.js";
import { ensureRunnerImage, type ReadyImage } from "./image/ensure-runner-image.js";
import { runnerImageSpec } from "./image/runner-image.js";
import { executeRun, type RunDetails } from "./run/execute-run.js";
import { type PlannedRun, preparePlan } from "./run/prepare-plan.js";
import { reapContainers } from "./run/reap-orphans.js";
import { reapRunDirs } from "./run/run-dirs.js";
import { type RunEvent, type RunEventListener, RunTimeline } from "./run/run-events.js";
import { resolveRun, type RunOptions } from "./run/resolve-options.js";

export interface ContainerPiAgentConfig extends Omit<RunOptions, "signal"> {
  /** The container engine; defaults to the Docker engine DOCKER_HOST (or the local socket) names. */
  engine?: Engine;
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
}

export interface RunCallOptions extends RunOptions {
  /** Receives this run's events as they arrive. */
  onEvent?: RunEventListener;
}

export interface RunStream<T> extends AsyncIterable<RunEvent> {
  /** The run's result; rejects like run() does. */
  readonly result: Promise<RunDetails<T>>;
}

export type { PlannedRun } from "./run/prepare-plan.js";

export class ContainerPiAgent implements Agent {
  private readonly engine: Engine;
  private engineReady?: Promise<void>;
  /** Each runner image asked for, checked (or built) once per agent; "" is this version's. */
  private readonly images = new Map<string, Promise<ReadyImage>>();

  constructor(private readonly config: ContainerPiAgentConfig = {}) {
    this.engine = config.engine ?? new DockerEngine();
  }

  async run<TOutput = string>(prompt: string, options: RunCallOptions = {}): Promise<TOutput> {
    const details = await this.runDetailed<TOutput>(prompt, options);
    return details.result;
  }

  /** Like run(), with the run's id, usage, duration, image, container id and changed files. */
  async runDetailed<TOutput = unknown>(prompt: string, options: RunCallOptions = {}): Promise<RunDetails<TOutput>> {
    return this.runPlanned<TOutput>(this.plan(prompt, options), options);
  }

  /**
   * What a call would do, as data: resolved options and the run plan (mounts, argv, env, limits,
   * routes). Reads files (policy, models, schema) and nothing else: no engine, no command. Input
   * errors are thrown here, before anything exists.
   */
  plan(prompt: string, options: RunOptions = {}): PlannedRun {
    const run = resolveRun(prompt, this.config, options, this.config.hostEnv ?? process.env);
    return preparePlan(run, {
      image: run.image ?? runnerImageSpec().tag,
      sharesHostFilesystem: this.engine.sharesHostFilesystem,
      engineName: this.engine.name,
    });
  }

  /** Runs a plan made by plan(); each plan runs once. */
  async runPlanned<TOutput = unknown>(
    planned: PlannedRun,
    options: Pick<RunCallOptions, "onEvent" | "signal"> = {},
  ): Promise<RunDetails<TOutput>> {
    options.signal?.throwIfAborted();
    const listeners = [this.config.onEvent, options.onEvent].filter((l): l is RunEventListener => Boolean(l));
    // The timeline starts here so an image build on first use shows up in the run's events.
    const timeline = new RunTimeline(planned.plan.runId, listeners);
    // The plan names the image already (plan() resolved it); here it is checked, or built.
    const image = await this.prepare(planned.run.image, options.signal, (line) =>
      timeline.sandbox("image.build", { line }),
    );
    const details = await executeRun(planned, {
      engine: this.engine,
      piVersion: image.piVersion,
      timeline,
      signal: options.signal,
    });
    return details as RunDetails<TOutput>;
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
   * Checks the engine once per agent (and reaps orphans in the background), then the runner image
   * a run asked for, once per image. A failed check is forgotten, so the next run retries.
   */
  private async prepare(image: string | undefined, signal: AbortSignal | undefined, onBuild: (line: string) => void) {
    const engineReady = (this.engineReady ??= (async () => {
      await this.engine.ping(signal);
      if (this.config.reapOrphans !== false) {
        void reapContainers(this.engine).catch(() => {});
        try {
          reapRunDirs();
        } catch {
          // Best effort: a folder we cannot read is not ours to remove.
        }
      }
    })());
    engineReady.catch(() => (this.engineReady = undefined));
    await engineReady;
    const key = image ?? "";
    let ready = this.images.get(key);
    if (!ready) {
      ready = ensureRunnerImage(this.engine, {
        image,
        autoBuild: this.config.autoBuildImage,
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
