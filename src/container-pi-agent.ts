// ContainerPiAgent: the Agent seam, backed by one fresh hardened container per call.
// (Over 300 lines because it is the public surface: plan, run, stream, records and engine choice
// each have their method here; the work itself is in run/, image/, engine/ and replay/.)
import path from "node:path";
import type { Agent, JsonSchema } from "./agent.js";
import { DockerEngine } from "./engine/docker-engine.js";
import type { Engine } from "./engine/engine.js";
import { endpointFromEnv } from "./engine/engine-endpoint.js";
import { EnginePool } from "./engine/engine-pool.js";
import { abortedError, errorSummary, isSandboxRunError, SandboxRunError, usageError } from "./errors.js";
import type { ReadyImage } from "./image/ensure-runner-image.js";
import type { RunRecorder } from "./record/run-recorder.js";
import { type ReplaySource, replayRunOptions, versionDrift } from "./replay/replay-source.js";
import { currentVersions } from "./run/current-versions.js";
import { EngineFacts } from "./run/engine-facts.js";
import type { RunDetails } from "./run/execute-run.js";
import { hostTroubleError } from "./run/host-trouble.js";
import { unjudgedRunOver } from "./run/judge-dead-run.js";
import { deadLeaseOver } from "./run/lease-record.js";
import { openRunRecord, type RunRecord } from "./run/open-run-record.js";
import { placeOnEngine } from "./run/place-on-engine.js";
import { refuseNestedGitCredentials, sandboxTrees } from "./run/plan/git-credentials.js";
import { refuseRecordToInsideTrees, treesByAccess } from "./run/plan/held-trees.js";
import { refuseReachableSockets } from "./run/plan/lent-sockets.js";
import {
  type PlannedRun,
  preparePlan,
  recheckProtectedMounts,
  refreshReadOnlyCovers,
} from "./run/plan/prepare-plan.js";
import {
  type ResolvedRun,
  type RunOptions,
  recheckFolders,
  resolveRun,
  useSchemaCompiler,
} from "./run/plan/resolve-options.js";
import { deadApplyOver, reapRunDirs } from "./run/reap-run-dirs.js";
import { recordedSuccess } from "./run/record-outcome.js";
import { checkReplayedRecord } from "./run/replay-upstream.js";
import { checkPiAcceptsSchema, compileResultSchema } from "./run/result-validator.js";
import type { EgressOverrides } from "./run/run-egress.js";
import { callListener, type RunEvent, type RunEventListener, RunTimeline } from "./run/run-events.js";
import { holdTreesOnHost } from "./run/tree-hold-files.js";
import { MAX_TIMEOUT_SECONDS } from "./sandbox-contract.js";
import { controllerHostProblem, nodeVersionProblem } from "./util/controller-host.js";
import type { FromSchema } from "./util/from-schema.js";
import { optionsNow } from "./util/options-now.js";
import { treesOverlap } from "./util/path-inside.js";
import type { RunnerPlatform } from "./util/platform.js";
import { listenForAbort } from "./util/shared-abort-listener.js";
import { refuseMistypedOptions, refuseUnknownOptions } from "./util/unknown-options.js";
import { untilAborted } from "./util/until-aborted.js";
import { AgentWarmPool, type WarmOptions } from "./warm/agent-warm-pool.js";
import type { WarmPoolStats } from "./warm/warm-pool.js";
import { type DeadApply, deadApplySentence } from "./workspace-transfer/dead-apply.js";

// plan() resolves a call with a schema synchronously: the compiler is this module's from the start
// (resolve-options.ts does not import it, so that a --dry-run without a schema loads none of it).
useSchemaCompiler(compileResultSchema);

export interface ContainerPiAgentConfig extends Omit<RunOptions, "signal"> {
  /** The container engine; defaults to the Docker engine DOCKER_HOST (or the local socket) names. */
  engine?: Engine | undefined;
  /**
   * Several engines (instead of `engine`): an EnginePool, or the path of an engines file. Each run
   * goes to the least-loaded engine that answers; default: the file SANDBOX_RUN_ENGINES names.
   */
  engines?: EnginePool | string | undefined;
  /** Build the runner image when it is missing instead of failing (progress goes to onProgress). */
  autoBuildImage?: boolean | undefined;
  /** Human-readable progress lines (image builds); the CLI prints them on stderr. */
  onProgress?: ((line: string) => void) | undefined;
  /** Receives every event of every run made by this agent. */
  onEvent?: RunEventListener | undefined;
  /** Remove containers whose controller died before the first run (default true). */
  reapOrphans?: boolean | undefined;
  /**
   * The host environment the layers start from (provider keys, SANDBOX_RUN_MODEL; the engine:
   * DOCKER_HOST and its TLS variables, SANDBOX_RUN_ENGINES); the constructor's and each run's `env`
   * go on top. Defaults to process.env.
   */
  hostEnv?: Record<string, string | undefined>;
  /**
   * Write a run record of every call into this folder: the n-th call (in the order calls are
   * planned) into `<recordTo>/<n>`, which must be new or empty. `replayRecord(recordTo)` plays
   * them back in the same order. A call's own `record` wins.
   */
  recordTo?: string | undefined;
  /**
   * Answer the model from recorded runs instead of the provider (see `replayRecord` in
   * `sandbox-run/testing`): the n-th call takes the n-th record. A call's own `replay` wins.
   */
  replay?: ReplaySource | undefined;
  /**
   * Keep this many warm sandboxes ready (a number, or `{ size, idleSeconds, calls }`): hardened containers
   * of this agent's shape, started before any call with Pi loaded, each used for one call and
   * removed after it. A call they can serve skips the container's and Pi's start; its workspace is
   * copied in (at /workspace). Default: SANDBOX_RUN_WARM, else none (also when `size` is left out,
   * e.g. `{ calls: 1 }` for an agent that makes one call). `close()` removes them.
   */
  warm?: number | WarmOptions | undefined;
  /**
   * Tests only: stand-ins for the egress proxy's resolver, address guard, ports and upstream trust
   * (run/run-egress.ts). Left out of the published types.
   * @internal
   */
  egressOverrides?: EgressOverrides | undefined;
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
  /**
   * A record the caller opened and completes itself (the CLI's --record): it gets the model traffic,
   * and takes the workspace's state before and after the run while the run holds its trees. A
   * RunRecord also has the run hold the folder it goes into, and keeps the run's hold until it is
   * finished (or abandoned).
   */
  recorder?: Pick<RunRecorder, "traffic"> &
    Partial<Pick<RunRecorder, "captureBefore" | "captureAfter"> & Pick<RunRecord, "heldFolder" | "keepHold">>;
}

export interface RunStream<T> extends AsyncIterable<RunEvent> {
  /** The run's result; rejects like run() does. */
  readonly result: Promise<RunDetails<T>>;
}

export type { PlannedRun } from "./run/plan/prepare-plan.js";
export type { WarmOptions } from "./warm/agent-warm-pool.js";
export type { WarmPoolChange, WarmPoolStats } from "./warm/warm-pool.js";

/** RunCallOptions with a schema written as a literal: the result is typed from it (FromSchema). */
export type RunCallOptionsWithSchema<S extends JsonSchema> = RunCallOptions & { schema: S };

export class ContainerPiAgent implements Agent<RunCallOptions> {
  private readonly pool: EnginePool;
  /** This agent's one reaping of what dead controllers left (started with its first engine check). */
  private reaped?: Promise<void>;
  /** Dead runs' applies this agent's reaping undid (or could not), not yet said by a run. */
  private readonly deadApplies: DeadApply[] = [];
  /** The pool was made here (from a file or the environment), so close() may close it. */
  private readonly ownsPool: boolean;
  /** Each engine checked (and reaped) once per agent. */
  private readonly enginesReady = new Map<Engine, Promise<void>>();
  /** Each runner image asked for, checked (or built, or loaded) once per agent and engine. */
  private readonly images = new Map<string, Promise<ReadyImage>>();
  /** Calls planned so far (numbers `recordTo` folders; a call that cannot be planned gets none). */
  private calls = 0;
  /** What each engine said of itself (docker info), asked once per agent: its platform, Docker Desktop. */
  private readonly facts: EngineFacts;
  /** Warm sandboxes, when asked for. */
  readonly #warm?: AgentWarmPool;
  /** Set by close(): a later call is refused, not run cold behind the caller's back (review, session 28). */
  #closed = false;
  /** Aborted by close(): what the agent still waits for on its own (the warm pool's ping) ends. */
  readonly #closing = new AbortController();
  /** Why the agent's own options could not shape its warm pool (warmUp says it). */
  #warmShapeProblem?: string;

  constructor(private readonly config: ContainerPiAgentConfig = {}) {
    // First: a Node older than package.json's engines crashed a run in the relay's HTTP/2 and left
    // its container behind (Node 18, review of session 37), and a warm pool starts containers here.
    const oldNode = nodeVersionProblem();
    if (oldNode) throw oldNode;
    refuseUnknownOptions(config, AGENT_OPTIONS, "agent");
    refuseMistypedOptions(config, "agent");
    const enginesFile = (config.hostEnv ?? process.env).SANDBOX_RUN_ENGINES;
    const engines = config.engines ?? (config.engine ? undefined : enginesFile || undefined);
    if (typeof engines === "string") {
      this.pool = EnginePool.fromFile(engines);
      // Configuration too: one inside a run's workspace is warned about or refused (E5).
      this.config = { ...config, configFiles: { ...config.configFiles, engines } };
    } else
      this.pool =
        engines ??
        // DOCKER_HOST (and DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) from hostEnv too, as SANDBOX_RUN_ENGINES
        // is: a caller's hostEnv that named another engine ran on the local one (review, session 30).
        EnginePool.of(config.engine ?? new DockerEngine({ endpoint: endpointFromEnv(config.hostEnv ?? process.env) }));
    this.ownsPool = typeof engines === "string" || (!engines && !config.engine);
    this.facts = new EngineFacts(this.pool.engines);
    const warm = warmOptionsOf(config.warm, (config.hostEnv ?? process.env).SANDBOX_RUN_WARM);
    if (warm.size > 0) {
      this.#warm = new AgentWarmPool({
        options: warm,
        engine: this.warmEngine(),
        // The engine pinged first (a short deadline): one that takes connections and never answers
        // would otherwise hold the image check's 30 s answer limit before the call starts cold.
        prepare: async (engine, image, platform) => {
          const timeout = AbortSignal.timeout(WARM_PING_TIMEOUT_MS);
          // close() does not wait the ping out (nor for an engine that ignores its signal).
          const stop = AbortSignal.any([timeout, this.#closing.signal]);
          await untilAborted(engine.ping(stop), stop).catch((error: unknown) => {
            if (!timeout.aborted) throw error;
            throw new SandboxRunError(
              "docker-unavailable",
              `no answer to its ping within ${WARM_PING_TIMEOUT_MS / 1000} s from engine "${engine.name}"`,
            );
          });
          // The pool's platform (review, session 33: an arm64 pool was checked against the host's, and never served).
          return this.prepare(engine, image, platform, undefined, (line) => config.onProgress?.(line));
        },
        // A warm agent's first call should find the run's code loaded: loaded while the pool's
        // first containers boot, after the pool's own start (which it would only delay).
        onStarted: () => void loadRunModule(),
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
    this.#closed = true;
    this.#closing.abort();
    await this.#warm?.close();
    if (this.ownsPool) this.pool.close();
  }

  /** Resolves once every warm sandbox is ready (rejects with why it cannot be); at once without `warm`. */
  async warmUp(signal?: AbortSignal): Promise<void> {
    if (this.#closed)
      throw usageError(
        "This agent was closed (close() removed its warm sandboxes and ended it); it warms no more sandboxes.",
        "Make a new ContainerPiAgent, and close it once its calls are done.",
      );
    if (this.#warm && !this.#warm.shaped)
      throw usageError(
        `The warm pool has no shape yet: the agent's own options do not make a call (${this.#warmShapeProblem ?? "no reason given"}).`,
        "Give the agent what its calls share (model, models, policy), or let the first call shape the pool.",
      );
    await this.#warm?.whenFull(signal);
  }

  /** The warm pool's counts (made, claimed, discarded, ready ...), when the agent keeps one. */
  warmStats(): WarmPoolStats | undefined {
    return this.#warm?.pool?.stats();
  }

  /**
   * Runs the prompt in a fresh sandbox: the agent's text, or with `schema` the validated object,
   * typed from a literal schema (inline or `as const`) or by the type argument: `run<Review>(...)`.
   */
  run<const S extends JsonSchema>(prompt: string, options: RunCallOptionsWithSchema<S>): Promise<FromSchema<S>>;
  run<TOutput = string>(prompt: string, options?: RunCallOptions): Promise<TOutput>;
  async run(prompt: string, options: RunCallOptions = {}): Promise<unknown> {
    const details = await this.runDetailed<unknown>(prompt, options);
    return details.result;
  }

  /** Like run(), with the run's id, usage, duration, image, container id and changed files. */
  runDetailed<const S extends JsonSchema>(
    prompt: string,
    options: RunCallOptionsWithSchema<S>,
  ): Promise<RunDetails<FromSchema<S>>>;
  runDetailed<TOutput = unknown>(prompt: string, options?: RunCallOptions): Promise<RunDetails<TOutput>>;
  async runDetailed(prompt: string, given: RunCallOptions = {}): Promise<RunDetails<unknown>> {
    // As they are now: the caller may change its object for its next call while this one awaits.
    const options = optionsNow(given, "call", CALL_OPTIONS);
    refuseMistypedOptions(options, "call");
    await this.learnEngines();
    const planned = this.plan(prompt, options);
    // Also when this call records elsewhere: its sandbox could still plant a later call's folder.
    if (this.config.recordTo) refuseRecordToInsideTrees(this.config.recordTo, planned);
    const recordDir =
      options.record ?? (this.config.recordTo ? path.join(this.config.recordTo, String(this.calls)) : undefined);
    if (!recordDir) return this.runPlanned(planned, options);
    const recorder = await openRunRecord(recordDir, planned);
    const onEvent = (event: RunEvent) => {
      recorder.onEvent(event);
      if (typeof options.onEvent === "function") callListener(options.onEvent, event);
    };
    try {
      const details = await this.runPlanned(planned, { ...options, onEvent, recorder });
      const notes = await recorder.finish(recordedSuccess(details));
      return notes.length > 0 ? { ...details, recordNotes: notes } : details;
    } catch (error) {
      const e = isSandboxRunError(error) ? error : undefined;
      const notes = await recorder.finish({
        ok: false,
        error: errorSummary(error),
        meta: {
          runId: e?.runId ?? planned.plan.runId,
          usage: e?.usage,
          code: e?.code ?? "internal",
          warm: e?.warm ?? false,
        },
      });
      // Where the record went instead, or what it lacks: the caller's to say, as for a success.
      if (e && notes.length > 0) e.recordNotes = notes;
      throw error;
    }
  }

  /**
   * What a call would do, as data: resolved options and the run plan (mounts, argv, env, limits,
   * routes). Reads files (policy, models, schema, a replayed record) and nothing else: no engine,
   * no command. Input errors are thrown here, before anything exists. With a replay source, the
   * call takes its next record here.
   */
  plan(prompt: string, given: RunCallOptions = {}): PlannedRun {
    const options = optionsNow(given, "call", CALL_OPTIONS);
    refuseUnknownOptions(options, CALL_OPTIONS, "call");
    refuseMistypedOptions(options, "call");
    const source = options.replay ?? this.config.replay;
    const replay = source?.next();
    let planned: PlannedRun;
    try {
      // A replayed call keeps the caller's prompt, schema, policy, image and folders; the model comes from the record.
      const workspacePath = options.workspacePath ?? this.config.workspacePath;
      const effective = replay ? { ...options, ...replayRunOptions(replay.record, workspacePath) } : options;
      const run = resolveRun(prompt, this.config, effective, this.config.hostEnv ?? process.env);
      planned = this.planResolved(run);
      // The record is compared with what this call runs under; one that asks for more is refused here.
      if (replay) planned = { ...planned, replay: checkReplayedRecord(planned, replay) };
    } catch (error) {
      // A call that cannot be planned had no record when it was recorded either.
      if (replay) source?.rewind?.();
      throw error;
    }
    this.calls++;
    if (!replay) return planned;
    const drift = versionDrift(replay.record.versions, currentVersions());
    if (drift) planned.run.warnings.push(`${drift}: Pi's requests may differ from the recorded ones.`);
    return planned;
  }

  /**
   * A plan made before the engines said what they are (plan() asks none: a usage error or a dry run
   * never touches an engine), made again once they have, when that changes it: copy mode on Docker
   * Desktop, the engine's platform's runner image. The same run id; otherwise the same plan object.
   * The CLI calls this between --dry-run and opening a record; run() plans after learnEngines().
   */
  async fitToEngines(planned: PlannedRun): Promise<PlannedRun> {
    await this.learnEngines();
    const place = this.facts.placeFor(planned.run);
    const mode = planned.run.workspaceMode ?? (place.sharesHostFilesystem ? "bind" : "copy");
    if (mode === planned.plan.workspaceMode && place.image === planned.plan.image) return planned;
    if (planned.plan.warmShaped) return planned; // a warm sandbox's plan is copy mode on the warm engine already
    const fitted = this.planResolved(planned.run, planned.plan.runId);
    return planned.replay ? { ...fitted, replay: planned.replay } : fitted;
  }

  /**
   * A resolved call as a plan, placed by what the engines are known to be: for a warm sandbox when
   * the agent keeps them and one can serve it (else cold, with the reason in `warmMiss`).
   */
  private planResolved(run: ResolvedRun, runId?: string): PlannedRun {
    const place = { ...this.facts.placeFor(run), ...(runId ? { runId } : {}) };
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
      const run = resolveRun("(the warm pool's shape)", this.config, {}, this.config.hostEnv ?? process.env, "shape");
      return preparePlan(run, { ...this.facts.placeFor(run), warm: true });
    } catch (error) {
      // Not plannable alone (e.g. the model comes with each call): the first call shapes the pool;
      // warmUp() before it says why.
      this.#warmShapeProblem = isSandboxRunError(error) ? error.shortMessage : (error as Error).message;
      return undefined;
    }
  }

  /** Warm sandboxes live on the pool's first engine that takes runs. */
  private warmEngine(): Engine {
    const load = this.pool.load();
    return this.pool.engines.find((_, i) => (load[i]?.capacity ?? 0) > 0) ?? this.pool.engines[0]!;
  }

  /**
   * Asks every engine of the pool what it is (docker info: its platform, whether it is Docker
   * Desktop), once per agent, so plans made afterwards fit them: copy mode on Docker Desktop, the
   * engine's platform's runner image. Best effort and quick: an engine that does not answer within
   * a few seconds is left to the run's own checks. run() does this before planning, fitToEngines()
   * (what the CLI calls between planning and running) too; plan() alone never does.
   */
  async learnEngines(): Promise<void> {
    await this.facts.learn(LEARN_TIMEOUT_MS);
  }

  /**
   * Runs a plan made by plan(); each plan runs once. Aborting through `signal` rejects with a
   * SandboxRunError with code "aborted" (the signal's reason is its `cause`), whenever it happens
   * while the sandbox runs; once the run has its result, the judgement and the hand-back are not stopped.
   */
  async runPlanned<TOutput = unknown>(
    planned: PlannedRun,
    options: RunPlannedOptions = {},
  ): Promise<RunDetails<TOutput>> {
    const { signal } = options;
    // The run's own signal, linked to the caller's by one listener that goes with the run: engine
    // requests add listeners of their own to the signal they get, which a hijacked stream (attach,
    // exec) never removes, and a service passes one long-lived signal (its shutdown) to every call:
    // two stayed per call, for good (review, session 28).
    const run = new AbortController();
    const unlink = signal ? listenForAbort(signal, () => run.abort(signal.reason)) : undefined;
    try {
      return await this.runPlannedOnce<TOutput>(planned, { ...options, signal: run.signal });
    } catch (error) {
      if (!signal?.aborted || (isSandboxRunError(error) && error.code === "aborted"))
        throw hostTroubleError(error) ?? error;
      // The run's own outcome (it ran: executeRun names its run on every error), also after an
      // abort: a pack it set aside was said nowhere else, and the abort said nothing had started
      // (review of this session's change, fix34b).
      if (isSandboxRunError(error) && (error.containerId || error.changedFiles)) throw error;
      // Aborted before the sandbox existed (waiting for an engine, checking or building the image).
      throw abortedError(signal.reason, { runId: planned.plan.runId }, true);
    } finally {
      unlink?.();
    }
  }

  private async runPlannedOnce<TOutput>(planned: PlannedRun, options: RunPlannedOptions): Promise<RunDetails<TOutput>> {
    options.signal?.throwIfAborted();
    if (this.#closed)
      throw usageError(
        "This agent was closed (close() removed its warm sandboxes and ended it); it takes no more calls.",
        "Make a new ContainerPiAgent for more calls, and close it once they are done.",
      );
    // Before anything is created: a controller that cannot handle host files safely does not start.
    const host = controllerHostProblem();
    if (host) throw host;
    // A schema Pi cannot compile would only show as a run whose every result is refused.
    if (planned.run.schema) await checkPiAcceptsSchema(planned.run.schema);
    const listeners = [this.config.onEvent, options.onEvent].filter((l): l is RunEventListener => Boolean(l));
    // The timeline starts here so an image build on first use shows up in the run's events.
    const timeline = new RunTimeline(planned.plan.runId, listeners);
    // Another run over the same trees (of this process, or another of this user's) goes first: its
    // sandbox must be gone before this one holds them (and the host has judged and written them,
    // its record included: the folder a record goes into is held too, until the record is there).
    const { writable, readOnly } = treesByAccess(planned);
    refuseUnjudgedTrees([...writable, ...readOnly]);
    await this.refuseDeadRunsOver([...writable, ...readOnly]);
    const recordFolder = options.recorder?.heldFolder;
    const trees = await holdTreesOnHost(
      { runId: planned.plan.runId, writable: recordFolder ? [...writable, recordFolder] : writable, readOnly },
      { signal: options.signal, onWaiting: (wait) => timeline.sandbox("workspace.waiting", { ...wait }) },
    );
    try {
      // Again once the trees are held: a run that waited behind one whose controller then died
      // would otherwise start from what that sandbox left.
      refuseUnjudgedTrees([...writable, ...readOnly]);
      // And a lease a run it waited behind left out when its controller died after its judgement,
      // or an apply it left unfinished: no reaper hands back or undoes a tree this run holds
      // (reviews, sessions 35 and 36).
      refuseDeadLease([...writable, ...readOnly]);
      refuseDeadApply([...writable, ...readOnly]);
      this.sayDeadApplies(timeline, [...writable, ...readOnly]);
      recheckFolders(planned.run);
      recheckProtectedMounts(planned);
      // Every repository in what the sandbox sees, nested ones too (the plan checked each tree's top
      // one); the same walk finds a bind-mode sandbox's sockets to a host process (lent-sockets.ts).
      const onWalked = refuseReachableSockets(planned);
      await refuseNestedGitCredentials(sandboxTrees(planned.run), options.signal, onWalked ? { onWalked } : {});
      const held = refreshReadOnlyCovers(planned);
      await options.recorder?.captureBefore?.();
      return await this.runHoldingTrees<TOutput>(held, options, timeline);
    } finally {
      try {
        await options.recorder?.captureAfter?.();
      } finally {
        if (options.recorder?.keepHold) options.recorder.keepHold(trees);
        else trees.release();
      }
    }
  }

  private async runHoldingTrees<TOutput>(
    planned: PlannedRun,
    options: RunPlannedOptions,
    timeline: RunTimeline,
  ): Promise<RunDetails<TOutput>> {
    // The servers, the engine's container and the stream readers load with the first run, while
    // it waits: for a warm sandbox being made, or (cold) for the engine's answers once it is
    // known to answer (a run whose engine is down ends without loading them).
    let runModule = planned.plan.warmShaped && this.#warm ? loadRunModule() : undefined;
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
      // The engine answers; the platform is settled on it (and refused when it cannot run it); then
      // the image is checked, loaded or built (a warm sandbox's pool did that before it made it).
      await this.engineReady(engine, options.signal);
      runModule ??= loadRunModule();
      const placed = placeOnEngine(planned, engine, await this.facts.infoOf(engine, options.signal));
      const platform = placed.planned.plan.platform;
      const image =
        warm ??
        (await this.prepare(engine, planned.run.image, platform, options.signal, (line) =>
          timeline.sandbox("image.build", { line }),
        ));
      if ("staleBase" in image && image.staleBase) timeline.sandbox("image.stale", { warning: image.staleBase });
      const { executeRun } = await runModule;
      const details = await executeRun(placed.planned, {
        engine,
        piVersion: image.piVersion,
        timeline,
        signal: options.signal,
        ...(options.recorder ? { traffic: options.recorder.traffic } : {}),
        ...(warm ? { warm: warm.sandbox } : {}),
        ...(this.config.egressOverrides ? { egressOverrides: this.config.egressOverrides } : {}),
        ...("id" in image && image.id ? { imageId: image.id } : {}),
      });
      lease?.release();
      return details as RunDetails<TOutput>;
    } catch (error) {
      // A sandbox claimed but never handed to the run (its image check failed first) goes too.
      if (warm) await warm.sandbox.destroy();
      const lost = await linkLost(engine, error);
      lease?.release(lost ? "broken" : "ok");
      if (!lost) throw error;
      // A bind-mode sandbox wrote the host's trees directly, and nothing judged them (review, session 33).
      const { plan } = planned;
      const unjudged =
        plan.workspaceMode === "bind"
          ? plan.mounts
              .filter((m) => !m.readOnly && (m.kind === "workspace" || m.kind === "writable-root"))
              .map((m) => m.hostPath)
          : [];
      throw new SandboxRunError(
        "docker-unavailable",
        `The link to engine "${engine.name}" (${engine.address ?? "?"}) broke during the run: ${lost}.`,
        {
          hint:
            unjudged.length > 0
              ? `What the sandbox wrote in ${unjudged.join(", ")} was not judged: protected files included, nothing was checked or put back. The sandbox stops by its deadline on its own; once the engine answers again, run \`sandbox-run gc\` (with the same engines): it removes what is left and judges those trees. Until then, do not run git, direnv or an editor there.`
              : "The sandbox stops by its deadline on its own; once the engine answers again, `sandbox-run gc` (with the same engines) removes what is left.",
          runId: planned.plan.runId,
          lastEvents: timeline.lastEvents(),
          cause: error,
        },
      );
    }
  }

  /** The async-iterable form: iterate the run's events as they arrive, then await `result`. */
  stream<const S extends JsonSchema>(prompt: string, options: RunCallOptionsWithSchema<S>): RunStream<FromSchema<S>>;
  stream<TOutput = unknown>(prompt: string, options?: RunCallOptions): RunStream<TOutput>;
  stream(prompt: string, given: RunCallOptions = {}): RunStream<unknown> {
    const queue: RunEvent[] = [];
    let wake: (() => void) | undefined;
    let finished = false;
    const options = optionsNow(given, "call", CALL_OPTIONS);
    const result = this.runDetailed<unknown>(prompt, {
      ...options,
      onEvent: (event) => {
        // The iterator gets every event whatever the caller's own listener does (it threw before: a
        // throw skipped the push, and the iterator lost every Pi event; review, session 34).
        queue.push(event);
        wake?.();
        if (typeof options.onEvent === "function") callListener(options.onEvent, event);
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
  private reapEveryEngineOnce(): Promise<void> {
    if (this.reaped) return this.reaped;
    const engines = this.pool.engines.map((engine) =>
      engine
        .ping(AbortSignal.timeout(10_000))
        .then(async () => {
          const { handBackGoneRuns, reapContainers } = await import("./run/reap-orphans.js");
          await reapContainers(engine);
          await handBackGoneRuns(engine);
        })
        .catch(() => {}),
    );
    // After the containers: a dead run's folder holds the record its lent trees are handed back from.
    this.reaped = Promise.all(engines).then(() => {
      try {
        reapRunDirs(undefined, false, this.deadApplies);
      } catch {
        // Best effort: a folder we cannot read is not ours to remove.
      }
    });
    return this.reaped;
  }

  /**
   * A dead run still lends one of these trees to the sandbox uid, or left its copy-mode apply of
   * one unfinished: this agent's reaping hands it back or undoes it first (it only may once that
   * run's container is gone, and while no run holds the tree), else the run is refused. Lent again
   * over it, this run's lease would count what that sandbox left as the sandbox's own, and give it
   * back to it; and a reaper handing it back meanwhile would take this sandbox's files (review,
   * session 35). Copied in half applied, the tree this sandbox gets is neither the user's nor the
   * dead run's, and a reaper undoing it meanwhile would change it under this run's apply (session 36).
   */
  private async refuseDeadRunsOver(trees: readonly string[]): Promise<void> {
    if (!deadLeaseOver(trees) && !deadApplyOver(trees)) return;
    if (this.config.reapOrphans !== false) {
      for (const engine of this.pool.engines) await this.engineReady(engine, undefined).catch(() => {});
      await this.reapEveryEngineOnce();
      // A controller that died after this agent's one reaping: its run folders reaped again now.
      if (deadApplyOver(trees)) {
        try {
          reapRunDirs(undefined, false, this.deadApplies);
        } catch {
          // Best effort, as at start-up: the refusal below names gc.
        }
      }
    }
    refuseDeadLease(trees);
    refuseDeadApply(trees);
  }

  /** What this agent's reaping did with dead runs' unfinished applies over `trees`, said once, by the run over them. */
  private sayDeadApplies(timeline: RunTimeline, trees: readonly string[]): void {
    const ours = this.deadApplies.filter((a) => trees.some((tree) => treesOverlap(a.tree, tree)));
    for (const a of ours) this.deadApplies.splice(this.deadApplies.indexOf(a), 1);
    for (const a of ours)
      timeline.sandbox("workspace.dead-apply", {
        tree: a.tree,
        undone: a.undone,
        ...(a.kept ? { kept: a.kept } : {}),
        warning: deadApplySentence(a),
      });
  }

  /**
   * Checks each engine once per agent (and reaps every engine's orphans in the background); a
   * failed check is forgotten, so the next run retries.
   */
  private async engineReady(engine: Engine, signal: AbortSignal | undefined): Promise<void> {
    let engineReady = this.enginesReady.get(engine);
    if (!engineReady) {
      engineReady = (async () => {
        await engine.ping(signal);
        if (this.config.reapOrphans !== false) void this.reapEveryEngineOnce();
      })();
      this.enginesReady.set(engine, engineReady);
      engineReady.catch(() => this.enginesReady.delete(engine));
    }
    await engineReady;
  }

  /**
   * The runner image a run asked for (or its platform's), once per engine, image and platform:
   * loaded from another engine of the pool that has it, or built. A failed check is forgotten.
   */
  private async prepare(
    engine: Engine,
    image: string | undefined,
    platform: RunnerPlatform | undefined,
    signal: AbortSignal | undefined,
    onBuild: (line: string) => void,
  ) {
    const key = `${engine.name}\0${image ?? ""}\0${platform ?? ""}`;
    let ready = this.images.get(key);
    if (!ready) {
      ready = import("./image/ensure-runner-image.js").then(({ ensureRunnerImage }) =>
        ensureRunnerImage(engine, {
          image,
          platform,
          autoBuild: this.config.autoBuildImage,
          sources: this.pool.engines,
          signal,
          progress: (line) => {
            onBuild(line);
            this.config.onProgress?.(line);
          },
        }),
      );
      this.images.set(key, ready);
      ready.catch(() => this.images.delete(key));
    }
    return ready;
  }
}

/**
 * The run's own code (servers, the engine's container, the stream readers), loaded once, ahead of
 * its use: a failure to load surfaces where the promise is awaited, never as an unhandled rejection.
 */
function loadRunModule(): Promise<typeof import("./run/execute-run.js")> {
  const loading = import("./run/execute-run.js");
  loading.catch(() => {});
  return loading;
}

const LINK_PING_TIMEOUT_MS = 5_000;
/** The warm pool's ping before its image check (the engine pool's own ping waits as long). */
const WARM_PING_TIMEOUT_MS = 10_000;
/** How long learnEngines() waits for an engine's docker info. */
const LEARN_TIMEOUT_MS = 3_000;

/** The `warm` option (its size, when not given, SANDBOX_RUN_WARM's number) as options; size 0 keeps none. */
function warmOptionsOf(
  warm: number | WarmOptions | undefined,
  fromEnv: string | undefined,
): WarmOptions & { size: number } {
  const given = typeof warm === "number" ? { size: warm } : (warm ?? {});
  const options = { ...given, size: given.size ?? Number(fromEnv ?? 0) };
  const what = given.size === undefined ? `SANDBOX_RUN_WARM ("${fromEnv}")` : `warm.size (${options.size})`;
  if (!Number.isInteger(options.size) || options.size < 0)
    throw usageError(`${what} must be a whole number of warm sandboxes.`, "Pass 0 for none, or e.g. 2.");
  // A day at most, like a run's timeout: past 2^31 ms Node's timers fire at once.
  if (options.idleSeconds !== undefined && !(options.idleSeconds > 0 && options.idleSeconds <= MAX_TIMEOUT_SECONDS))
    throw usageError(
      `warm.idleSeconds must be positive and at most ${MAX_TIMEOUT_SECONDS} (a day), got ${options.idleSeconds}.`,
    );
  if (options.calls !== undefined && !(Number.isInteger(options.calls) && options.calls >= 0))
    throw usageError(`warm.calls must be a whole number of calls, got ${options.calls}.`, "Leave it out for no end.");
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

/** A dead run still lends one of these trees (lease-record.ts deadLeaseOver): refused, naming gc. */
function refuseDeadLease(trees: readonly string[]): void {
  const leased = deadLeaseOver(trees);
  if (!leased) return;
  throw new SandboxRunError(
    "usage",
    `Run ${leased.runId} lent ${leased.tree} to its sandbox, and its controller died before giving it back: files there may still be the sandbox's.`,
    {
      hint: "Run `sandbox-run gc` (with the same engines): once that run's container is gone it hands the tree back; then run again.",
    },
  );
}

/** A dead run's unfinished copy-mode apply over one of these trees, or its staging folder inside one (reap-run-dirs.ts deadApplyOver): refused, naming gc. */
function refuseDeadApply(trees: readonly string[]): void {
  const dead = deadApplyOver(trees);
  if (!dead) return;
  if (dead.staging)
    throw new SandboxRunError(
      "usage",
      `Run ${dead.runId} left its staging folder ${dead.staging} inside ${dead.tree} when its controller died: a sandbox given that tree could rewrite what the next reaper replays from it.`,
      {
        hint: "Run `sandbox-run gc`: it removes that folder (undoing that run's apply first, if it began one); then run again.",
      },
    );
  throw new SandboxRunError(
    "usage",
    `Run ${dead.runId} was copying its sandbox's changes into ${dead.tree} when its controller died: the tree is half applied, and its journal says how to undo it.`,
    {
      hint: "Run `sandbox-run gc`: it puts the tree back as it was before that run (once no run holds it); then run again.",
    },
  );
}

/**
 * A run over a tree whose earlier bind-mode run was never judged (its controller died first) would
 * start from what that sandbox left, protected files included, and its own judgement would take
 * that as the tree before it: refused until `sandbox-run gc` has judged the earlier run.
 */
function refuseUnjudgedTrees(trees: readonly string[]): void {
  const unjudged = unjudgedRunOver(trees);
  if (!unjudged) return;
  if (unjudged.judgingPid !== undefined)
    throw new SandboxRunError(
      "usage",
      `Run ${unjudged.runId} ${unjudged.treesUnknown ? "was never judged by its controller" : `wrote ${unjudged.tree} and was never judged by its controller`}; sandbox-run gc (pid ${unjudged.judgingPid}) is judging it now.`,
      {
        hint: "Wait for that gc to finish, then run again. Until then, do not run git, direnv or an editor in that run's trees.",
      },
    );
  if (unjudged.treesUnknown)
    throw new SandboxRunError(
      "usage",
      `Run ${unjudged.runId} was never judged (its controller died first, or its judgement failed), and which trees it wrote cannot be read from its saved state: no run starts until it is judged.`,
      {
        hint: "Run `sandbox-run gc`: it judges that run, or says why it cannot and what to remove to give up on it; then run again.",
      },
    );
  throw new SandboxRunError(
    "usage",
    `Run ${unjudged.runId} wrote ${unjudged.tree} and was never judged (its controller died first, or its judgement failed): what that sandbox left there, protected files included, was not checked or put back.`,
    {
      hint: "Run `sandbox-run gc`: it judges that run as its controller would have and puts back what it was not allowed to change; then run again. Until then, do not run git, direnv or an editor in that tree.",
    },
  );
}

/** Every option name of RunOptions, held to it by the compiler (a name added there must be added here). */
const RUN_OPTIONS: Record<keyof RunOptions, true> = {
  cwd: true,
  model: true,
  schema: true,
  sandbox: true,
  additionalWritableDirectories: true,
  env: true,
  signal: true,
  policy: true,
  models: true,
  timeoutMs: true,
  extraArgs: true,
  runtime: true,
  platform: true,
  workspaceMode: true,
  handBack: true,
  image: true,
  workspacePath: true,
  contextFiles: true,
  maxCostUsd: true,
  maxTurns: true,
  configFiles: true,
  refuseWorkspaceConfig: true,
  allowWorkspaceConfig: true,
};
/** Every option name a call takes (refuseUnknownOptions). */
const CALL_OPTIONS: Record<keyof RunCallOptions, true> = { ...RUN_OPTIONS, onEvent: true, record: true, replay: true };
const { signal: _callOnly, ...SHARED_OPTIONS } = RUN_OPTIONS;
/** Every option name the agent's configuration takes. */
const AGENT_OPTIONS: Record<keyof ContainerPiAgentConfig, true> = {
  ...SHARED_OPTIONS,
  engine: true,
  engines: true,
  autoBuildImage: true,
  onProgress: true,
  onEvent: true,
  reapOrphans: true,
  hostEnv: true,
  recordTo: true,
  replay: true,
  warm: true,
  egressOverrides: true,
};
