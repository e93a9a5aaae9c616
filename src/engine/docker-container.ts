// One Docker container's life: attach (before start, so no output is lost and the prompt reaches
// stdin), start, wait, exec, and a removal that is idempotent and safe to call from every exit path.
import type { Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import type Docker from "dockerode";
import { SandboxRunError } from "../errors.js";
import { demuxedStreams } from "./attach-demux.js";
import { engineDeadline } from "./bounded-answers.js";
import { waitForExit } from "./container-wait.js";
import { isGoneError } from "./docker-connection.js";
import type { ContainerExit, ContainerStreams, EngineContainer, ExecOptions, ExecSession } from "./engine.js";
import { removeForcibly } from "./forced-removal.js";
import { containerHostPids, hostOomKillCount } from "./host-oom-counter.js";

type HijackedStream = NodeJS.ReadWriteStream & Readable & Writable;

interface DockerContainerOptions {
  /**
   * Podman reports OOMKilled only when the container's own first process was killed, never for a
   * tool the sandbox ran (Docker reports any OOM kill in the container's cgroup). So before the
   * host stops a Podman container on this host, the kernel's OOM kill counter of its memory cgroup
   * is read from this host's cgroupfs.
   */
  readOomCounterBeforeKill?: boolean;
  /** Whether the engine answers at all (its ping), asked when a stop goes unanswered. */
  ping?: (signal: AbortSignal) => Promise<unknown>;
}

/**
 * A stop that gets no answer within this long is followed by a question whether the engine is
 * there at all (kill() below). Generous: a busy engine on two busy cores once took over 15 s to
 * kill a copy-mode sandbox it was still serving.
 */
const KILL_TIMEOUT_MS = 30_000;
/** A stop the engine has not answered while it still answers its ping is asked again for this long in all. */
const SLOW_STOP_LIMIT_MS = 120_000;
/** How long the engine's ping may take to show it is still there after an unanswered stop. */
const LIVENESS_TIMEOUT_MS = 5_000;
/**
 * A removal that gets no answer within this long fails (the caller says the container may be
 * left; gc removes it later): a link gone silent never closes, and an unbounded wait would hold
 * the run forever. Generous, because removing a container whose processes die slowly takes time;
 * short once a stop and the engine's ping went unanswered.
 */
const REMOVE_TIMEOUT_MS = 60_000;
const REMOVE_UNREACHABLE_TIMEOUT_MS = 5_000;

/**
 * The OOM counter is read at most this often while a run goes on (sampleCounters below): a flood
 * of forged tool-end events costs a few small reads a second, and the last one is always followed.
 */
const OOM_SAMPLE_INTERVAL_MS = 100;

export class DockerContainer implements EngineContainer {
  private removal?: Promise<void>;
  #oomKills = 0;
  /** The container's first process, once looked up (its cgroup names the container, host-oom-counter.ts). */
  #pid?: Promise<number>;
  #lastSample = 0;
  #trailingSample?: NodeJS.Timeout;
  /** Ends a pending wait() when the engine cannot be reached to stop the container. */
  readonly #unreachable = new AbortController();
  /** A stop went unanswered and so did the engine's ping: its removal gets a short deadline. */
  #silent = false;
  #killing?: Promise<void>;

  constructor(
    private readonly container: Docker.Container,
    private readonly options: DockerContainerOptions = {},
  ) {}

  get id(): string {
    return this.container.id;
  }

  async attach(signal?: AbortSignal): Promise<ContainerStreams> {
    const stream = (await this.container.attach({
      stream: true,
      hijack: true,
      stdin: true,
      stdout: true,
      stderr: true,
      abortSignal: signal,
    } as Docker.ContainerAttachOptions)) as unknown as HijackedStream;
    sendAtOnce(stream);
    return { stdin: stream, ...demuxedStreams(stream) };
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.container.start({ abortSignal: signal } as object);
  }

  async wait(signal?: AbortSignal): Promise<ContainerExit> {
    const stop = signal ? AbortSignal.any([signal, this.#unreachable.signal]) : this.#unreachable.signal;
    const exitCode = await waitForExit(this.container, stop);
    const info = await this.container.inspect().catch(() => undefined);
    return { exitCode, oomKilled: Boolean(info?.State?.OOMKilled) || this.#oomKills > 0 };
  }

  kill(): Promise<void> {
    // One stop at a time (a settled run's and a timeout's): the second waits for the first.
    this.#killing ??= this.stop().finally(() => (this.#killing = undefined));
    return this.#killing;
  }

  /**
   * Podman: reads the OOM counter now, while the container still runs (called as each of the
   * sandbox's tools ends). Read only before the host's stop, a tool's OOM kill went unreported
   * whenever the container ended by itself first (Pi exits as it settles; its cgroup goes with it):
   * a flaky `engines-podman` test, session 36.
   */
  sampleCounters(): void {
    if (!this.options.readOomCounterBeforeKill || this.#trailingSample) return;
    const wait = this.#lastSample + OOM_SAMPLE_INTERVAL_MS - Date.now();
    const sample = () => {
      this.#trailingSample = undefined;
      this.#lastSample = Date.now();
      void this.oomKillCount().then((count) => (this.#oomKills = Math.max(this.#oomKills, count)));
    };
    if (wait <= 0) sample();
    else this.#trailingSample = setTimeout(sample, wait).unref();
  }

  private async stop(): Promise<void> {
    if (this.options.readOomCounterBeforeKill) this.#oomKills = Math.max(this.#oomKills, await this.oomKillCount());
    const started = Date.now();
    for (;;) {
      const error = await this.container.kill({ abortSignal: engineDeadline(KILL_TIMEOUT_MS) } as object).then(
        () => undefined,
        (failure: unknown) => failure,
      );
      if (error === undefined || isGoneError(error) || String(error).includes("is not running")) return;
      // An answer with a status (Podman: "can only kill running containers") means the engine
      // is there: the caller's to see.
      if ((error as { statusCode?: number })?.statusCode !== undefined) throw error;
      // No answer in time. Docker answers a kill once the container has exited, and a gVisor
      // sandbox that ran a few hundred processes can take over 30 s to die on a loaded host
      // (measured: 35 s, once minutes; CI, session 31), while every request about that container
      // (an inspection) waits with it. An engine that answers its ping is asked again, up to
      // SLOW_STOP_LIMIT_MS in all; a kill of a container that has exited meanwhile ends the loop.
      const answers = this.options.ping
        ? await this.options.ping(engineDeadline(LIVENESS_TIMEOUT_MS)).then(
            () => true,
            () => false,
          )
        : false;
      if (answers && Date.now() - started < SLOW_STOP_LIMIT_MS) continue;
      // No answer at all (a broken link, a silent network), or no stop in all that time: waiting
      // for the exit would never end. The wait fails with this error; the container's own deadline
      // and gc take care of it on the far side. An engine that answers keeps its removal's deadline.
      const seconds = Math.round((Date.now() - started) / 1000);
      const failed = new SandboxRunError(
        "docker-unavailable",
        answers
          ? `The engine did not stop the sandbox's container ${this.id.slice(0, 12)} within ${seconds} s, though it answers.`
          : `The engine did not stop the sandbox's container ${this.id.slice(0, 12)} within ${seconds} s.`,
        {
          hint: "The engine is overloaded or out of reach; `sandbox-run gc` removes the container once it answers.",
          cause: error,
        },
      );
      if (!answers) this.#silent = true;
      // Said in words, never a bare AbortError out of the run (the wait fails with it too).
      this.#unreachable.abort(failed);
      throw failed;
    }
  }

  /**
   * The container's memory cgroup OOM kill counter, read from this host's cgroupfs through the
   * container's pid (host-oom-counter.ts; never by running anything of the image). 0 when it
   * cannot be read.
   */
  private async oomKillCount(): Promise<number> {
    return hostOomKillCount(await this.firstPid(), this.id);
  }

  /** Its processes on this host (host-oom-counter.ts); none for another host's engine. */
  async hostPids(): Promise<number[]> {
    return containerHostPids(await this.firstPid(), this.id);
  }

  /** The container's first process on the engine's host (0 when not running or no answer: asked again next time). */
  private async firstPid(): Promise<number> {
    this.#pid ??= this.container.inspect({ abortSignal: AbortSignal.timeout(5_000) } as object).then(
      (info) => Number(info?.State?.Pid ?? 0),
      () => 0,
    );
    const pid = await this.#pid;
    if (pid <= 0) this.#pid = undefined;
    return pid;
  }

  async rename(name: string): Promise<void> {
    await this.container.rename({ name });
  }

  async setMemoryLimit(memoryMb: number): Promise<void> {
    // Swap included, as at create (docker-create-options.ts): both raised together.
    const bytes = memoryMb * 1024 * 1024;
    await this.container.update({ Memory: bytes, MemorySwap: bytes });
  }

  remove(): Promise<void> {
    const timeoutMs = this.#silent ? REMOVE_UNREACHABLE_TIMEOUT_MS : REMOVE_TIMEOUT_MS;
    this.removal ??= removeForcibly(this.container, timeoutMs).then(() => {});
    return this.removal;
  }

  async exec(options: ExecOptions, signal?: AbortSignal): Promise<ExecSession> {
    const exec = await this.container.exec({
      Cmd: options.cmd,
      User: options.user,
      Env: Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
      ...(options.workingDir ? { WorkingDir: options.workingDir } : {}),
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      abortSignal: signal,
    } as Docker.ExecCreateOptions);
    const stream = (await exec.start({ hijack: true, stdin: true, abortSignal: signal } as object)) as HijackedStream;
    sendAtOnce(stream);
    const { stdout, stderr } = demuxedStreams(stream);
    // The process's output is over when the hijacked stream ends, whether or not anyone read it.
    const ended = new Promise<void>((resolve) => {
      stream.once("end", resolve);
      stream.once("close", resolve);
      stream.once("error", () => resolve());
    });
    const exit = ended.then(async () => {
      const info = await exec.inspect();
      return info.ExitCode ?? -1;
    });
    // Nobody may be waiting yet; a failure is reported to whoever awaits `exit`.
    exit.catch(() => {});
    return { stdin: stream, stdout, stderr, exit };
  }
}

/**
 * Hijacked streams carry conversations (the relay's HTTP/2 frames, the prompt and Pi's events), many
 * of them small writes that wait for an answer. Over TCP (a tcp:// or TLS engine) Nagle's algorithm
 * holds a small write until the previous one is acknowledged, and the engine's delayed ACK makes that
 * ~40 ms: every model request through the relay paid it, several times. Unix sockets ignore this.
 */
function sendAtOnce(stream: HijackedStream): void {
  (stream as Partial<Pick<Socket, "setNoDelay">>).setNoDelay?.(true);
}
