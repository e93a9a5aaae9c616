// One warm sandbox, from its making to its claim (or its end): a hardened container of a shape,
// attached before it starts, its relay up (serving no socket), read-only trees' `tar -x` execs
// waiting, and the launcher with Pi loaded. Until a call claims it, it holds nothing of any call;
// anything wrong with it (its relay failed, its launcher died, a ping goes unanswered) is found at
// the claim, and it is removed instead of used.
import { performance } from "node:perf_hooks";
import type { ContainerStreams, Engine, EngineContainer } from "../engine/engine.js";
import { holdProcess, Relay } from "../relay/relay-session.js";
import { type PendingCopyIn, startCopyIn } from "../run/copy-mode/copy-in.js";
import { type WarmSandboxIdentity, type WarmShape, warmContainerSpec } from "../run/plan/warm-shape.js";
import type { ClaimedSandbox } from "../run/warm-claim.js";
import { IMAGE_PATHS, READ_ONLY_OWNER_UID, RELAY_BRIDGE_SOCKET } from "../sandbox-contract.js";

const STDERR_TAIL_CHARS = 2000;

export interface MakeWarmSandbox {
  engine: Engine;
  shape: WarmShape;
  identity: WarmSandboxIdentity;
  /** How long the launcher may take to load Pi (a loaded machine, gVisor) before it counts as broken. */
  loadTimeoutMs: number;
  signal?: AbortSignal;
  /** The checked image's id: made from it, not from the shape's tag (ensure-runner-image.ts). */
  imageId?: string;
}

export class WarmSandbox implements ClaimedSandbox {
  readonly warmId: string;
  /** performance.now() when it was ready to claim. */
  readonly readyAt = performance.now();
  #dead?: string;
  #claimed = false;
  #stderr = "";
  #removal?: Promise<boolean>;
  #removalFailure: unknown;
  readonly #onDeath: Array<(reason: string) => void> = [];
  facts: Record<string, number | string> = {};

  private constructor(
    readonly container: EngineContainer,
    readonly streams: ContainerStreams,
    readonly relay: Relay,
    readonly readOnlyCopies: ReadonlyMap<string, PendingCopyIn>,
    identity: WarmSandboxIdentity,
    /** How long it took to make, and how long its launcher took to load Pi (its own claim). */
    readonly makeMs: number,
    readonly loadedMs: number,
  ) {
    this.warmId = identity.warmId;
    streams.stderr.on("data", this.#keepStderr);
    relay.onFailure((error) => this.#die(error.shortMessage));
    this.#holdProcess(false);
  }

  /** Waiting, it keeps no process alive (see Relay.holdProcess); claimed, it does, like any run. */
  #holdProcess(hold: boolean): void {
    this.relay.holdProcess(hold);
    holdProcess(this.streams.stdin, hold);
    for (const pending of this.readOnlyCopies.values()) pending.holdProcess(hold);
  }

  static async make(options: MakeWarmSandbox): Promise<WarmSandbox> {
    const { engine, shape, identity, signal } = options;
    const started = performance.now();
    // Not aborted half-way: a create the engine carried out after all would leave a container
    // this side never learnt the id of. A pool that closes meanwhile removes it just below.
    const spec = warmContainerSpec(shape, identity);
    const container = await engine.createContainer(options.imageId ? { ...spec, image: options.imageId } : spec);
    let relay: Relay | undefined;
    const readOnly = new Map<string, PendingCopyIn>();
    let stderr = "";
    const keep = (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
    };
    try {
      signal?.throwIfAborted();
      const streams = await container.attach(signal);
      streams.stderr.on("data", keep);
      await container.start(signal);
      relay = await Relay.start({
        container,
        user: shape.user,
        bridgeSocket: RELAY_BRIDGE_SOCKET,
        socketDir: IMAGE_PATHS.socketDir,
        // Nothing to reach before a claim binds the run's sockets.
        sockets: [],
        warm: true,
        signal,
      });
      for (const copy of shape.copies.filter((c) => !c.writable && c.kind !== "ca-bundle")) {
        const owner = `${READ_ONLY_OWNER_UID}:${READ_ONLY_OWNER_UID}`;
        const target = { containerPath: copy.containerPath, user: owner, what: copy.containerPath, sizeMb: 0 };
        readOnly.set(copy.containerPath, await startCopyIn(container, target, signal));
      }
      const loadedMs = await withTimeout(
        untilStopped(container, relay.loaded, signal),
        options.loadTimeoutMs,
        "its launcher did not load Pi",
        signal,
      );
      streams.stderr.off("data", keep);
      const sandbox = new WarmSandbox(
        container,
        streams,
        relay,
        readOnly,
        identity,
        Math.round(performance.now() - started),
        loadedMs,
      );
      return sandbox;
    } catch (error) {
      for (const pending of readOnly.values()) pending.cancel();
      relay?.close();
      await container.remove().catch(() => {});
      const tail = stderr.trim().split("\n").slice(-3).join(" / ");
      if (!tail) throw error;
      // The pool reports the short message (a SandboxRunError's, without its hint): the launcher's words go there.
      const why = (error as { shortMessage?: string })?.shortMessage ?? (error as Error)?.message ?? String(error);
      throw new Error(`${why.replace(/\.$/, "")} (its stderr: ${tail})`, { cause: error });
    }
  }

  /** Why it can no longer be claimed, or undefined while it can. */
  get dead(): string | undefined {
    return this.#dead;
  }

  /** Called once if it dies while it waits (not after its claim: then its run decides). */
  onDeath(listener: (reason: string) => void): void {
    if (this.#dead) listener(this.#dead);
    else this.#onDeath.push(listener);
  }

  /** Whether it still answers: undefined when it does, else why not (it must then be removed, never used). */
  async check(timeoutMs: number): Promise<string | undefined> {
    if (this.#dead) return this.#dead;
    try {
      await this.relay.ping(timeoutMs);
      return undefined;
    } catch (error) {
      const reason = (error as { shortMessage?: string })?.shortMessage ?? String(error);
      this.#die(reason);
      return reason;
    }
  }

  /** It is the run's from now on: what happens to it is the run's to decide and report. */
  claim(facts: Record<string, number | string>): void {
    this.#claimed = true;
    this.#holdProcess(true);
    this.facts = { ...facts, makeMs: this.makeMs, loadedMs: this.loadedMs };
    this.streams.stderr.off("data", this.#keepStderr);
  }

  /** The last lines its launcher wrote before it was claimed (why it died, when it did). */
  get stderrTail(): string {
    return this.#stderr;
  }

  /** Why the engine could not remove its container, once destroy() said it could not. */
  get removalFailure(): unknown {
    return this.#removalFailure;
  }

  /** Removes its container (once); true when the engine did. */
  destroy(): Promise<boolean> {
    this.#die("removed");
    for (const pending of this.readOnlyCopies.values()) pending.cancel();
    this.#removal ??= this.container.remove().then(
      () => true,
      (error: unknown) => {
        this.#removalFailure = error;
        return false;
      },
    );
    // Only once nothing of it runs: the relay's exec ends with the container.
    void this.#removal.then(() => this.relay.close());
    return this.#removal;
  }

  readonly #keepStderr = (chunk: Buffer) => {
    this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
  };

  #die(reason: string): void {
    if (this.#dead) return;
    this.#dead = reason;
    if (this.#claimed) return;
    for (const listener of this.#onDeath.splice(0)) listener(reason);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      done();
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${what} within ${Math.round(ms / 1000)} s`));
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort();
    promise.then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        reject(error);
      },
    );
  });
}

/**
 * `loaded`, or a failure as soon as the container stops while it is made (the launcher's idle
 * deadline, a crash). The relay's end says so too, mostly; but under gVisor an exec's streams can
 * stay open after the sandbox they ran in stopped, and the pool then waited out the whole load
 * timeout (120 s) for a sandbox that was gone in a second.
 */
async function untilStopped<T>(container: EngineContainer, loaded: Promise<T>, signal?: AbortSignal): Promise<T> {
  const waiting = new AbortController();
  const stop = signal ? AbortSignal.any([signal, waiting.signal]) : waiting.signal;
  const stopped = container.wait(stop).then((exit) => {
    throw new Error(`its container stopped while it was made (exit ${exit.exitCode})`);
  });
  try {
    return await Promise.race([loaded, stopped]);
  } finally {
    waiting.abort();
    stopped.catch(() => {});
  }
}
