// ContainerPiAgent: the Agent seam, backed by one fresh hardened container per call.
import type { Agent } from "./agent.js";
import { createDockerClient, pingDocker, type DockerClient } from "./docker/docker-engine.js";
import { IMAGE_LABEL_APT_PACKAGES, IMAGE_LABEL_CONTENT_HASH, IMAGE_LABEL_PI_VERSION } from "./docker/labels.js";
import { reapContainers, reapRunDirs } from "./docker/reaper.js";
import { SandboxRunError } from "./errors.js";
import { buildRunnerImage } from "./image/build-runner-image.js";
import { runnerImageSpec } from "./image/runner-image.js";
import { executeRun, newRunId, type RunDetails } from "./run/execute-run.js";
import { resolveRun, type RunOptions } from "./run/resolve-options.js";
import type { RunPlan } from "./run/run-plan.js";
import { RunTimeline, type RunEvent, type RunEventListener } from "./run/run-events.js";

export interface ContainerPiAgentConfig extends Omit<RunOptions, "signal"> {
  /** Docker client (dockerode); defaults to one built from DOCKER_HOST or the local socket. */
  docker?: DockerClient;
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
  /** Receives the run plan before anything starts. */
  onPlan?: (plan: RunPlan) => void;
}

export interface RunStream<T> extends AsyncIterable<RunEvent> {
  /** The run's result; rejects like run() does. */
  readonly result: Promise<RunDetails<T>>;
}

export class ContainerPiAgent implements Agent {
  private readonly docker: DockerClient;
  private engineReady?: Promise<void>;
  /** Each runner image asked for, checked (or built) once per agent; "" is this version's. */
  private readonly images = new Map<string, Promise<{ tag: string; piVersion: string }>>();

  constructor(private readonly config: ContainerPiAgentConfig = {}) {
    this.docker = config.docker ?? createDockerClient();
  }

  async run<TOutput = string>(prompt: string, options: RunCallOptions = {}): Promise<TOutput> {
    const details = await this.runDetailed<TOutput>(prompt, options);
    return details.result;
  }

  /** Like run(), with the run's id, usage, duration, image and container id. */
  async runDetailed<TOutput = unknown>(prompt: string, options: RunCallOptions = {}): Promise<RunDetails<TOutput>> {
    // Input errors and an aborted signal fail before any container (or engine call) exists.
    const resolved = resolveRun(prompt, this.config, options, this.config.hostEnv ?? process.env);
    options.signal?.throwIfAborted();
    const listeners = [this.config.onEvent, options.onEvent].filter((l): l is RunEventListener => Boolean(l));
    // The timeline starts here so an image build on first use shows up in the run's events.
    const timeline = new RunTimeline(newRunId(), listeners);
    const { tag: image, piVersion } = await this.prepare(resolved.image, options.signal, (line) =>
      timeline.sandbox("image.build", { line }),
    );
    const details = await executeRun(resolved, {
      docker: this.docker,
      image,
      piVersion,
      listeners,
      timeline,
      signal: options.signal,
      onPlan: options.onPlan,
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
   * Checks the engine once per agent (and reaps orphans in the background), then the runner
   * image a run asked for, once per image. A failed check is forgotten, so the next run retries.
   */
  private async prepare(
    image: string | undefined,
    signal: AbortSignal | undefined,
    onBuild: (line: string) => void,
  ): Promise<{ tag: string; piVersion: string }> {
    const engineReady = (this.engineReady ??= (async () => {
      await pingDocker(this.docker, signal);
      if (this.config.reapOrphans !== false) {
        void reapContainers(this.docker).catch(() => {});
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
      ready = this.ensureImage(image, onBuild);
      this.images.set(key, ready);
      ready.catch(() => this.images.delete(key));
    }
    return ready;
  }

  private async ensureImage(
    image: string | undefined,
    onBuild: (line: string) => void,
  ): Promise<{ tag: string; piVersion: string }> {
    const spec = runnerImageSpec();
    const tag = image ?? spec.tag;
    let labels: Record<string, string> | undefined;
    try {
      labels = (await this.docker.getImage(tag).inspect()).Config?.Labels ?? {};
    } catch {
      labels = undefined;
    }
    if (labels) {
      // A chosen image must be built from the runner image (its launcher runs Pi), which
      // passes on the runner's labels; anything else would fail in a less helpful way later.
      const piVersion = labels[IMAGE_LABEL_PI_VERSION];
      if (!piVersion) {
        throw new SandboxRunError(
          "usage",
          `The image ${tag} is not a sandbox-run runner image (it has no ${IMAGE_LABEL_PI_VERSION} label).`,
          {
            hint: `Build it FROM ${spec.tag} (\`sandbox-run image tag\` prints it), or add Debian packages with \`sandbox-run image build --apt <packages>\`.`,
          },
        );
      }
      // An `image build --apt` image on another version's runner image carries that version's
      // launcher; it is rebuilt with the same packages in one command.
      const aptPackages = labels[IMAGE_LABEL_APT_PACKAGES];
      if (aptPackages && labels[IMAGE_LABEL_CONTENT_HASH] !== spec.contentHash) {
        throw new SandboxRunError(
          "image-missing",
          `The image ${tag} was built on the runner image of another sandbox-run version.`,
          {
            hint: `Rebuild it for this version: sandbox-run image build --apt ${aptPackages.split(" ").join(",")}`,
          },
        );
      }
      return { tag, piVersion };
    }
    if (image || !this.config.autoBuildImage) {
      throw new SandboxRunError("image-missing", `The runner image ${tag} is not built (or is out of date).`, {
        hint: image
          ? "Check the tag (`docker images`), or build it: `sandbox-run image build` for the runner image, with `--apt <packages>` for one with more tools."
          : "Build it with `sandbox-run image build` (about a minute; it needs the npm registry and a Debian mirror).",
      });
    }
    const built = await buildRunnerImage(this.docker, {
      progress: (line) => {
        onBuild(line);
        this.config.onProgress?.(line);
      },
    });
    return { tag: built.tag, piVersion: spec.piVersion };
  }
}
