// One container's life: create, attach (before start, so no output is lost and the prompt
// reaches stdin), start, wait, and a removal that is idempotent and safe to call from every
// exit path.
import { PassThrough, type Readable, type Writable } from "node:stream";
import type Docker from "dockerode";
import type { DockerClient } from "./docker-engine.js";
import { isGoneError } from "./docker-engine.js";
import { AttachDemuxer } from "./attach-demux.js";

export interface ContainerStreams {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
}

export interface ContainerExit {
  exitCode: number;
  oomKilled: boolean;
}

export class SandboxContainer {
  private removal?: Promise<void>;

  private constructor(private readonly container: Docker.Container) {}

  get id(): string {
    return this.container.id;
  }

  static async create(
    docker: DockerClient,
    options: Docker.ContainerCreateOptions,
    signal?: AbortSignal,
  ): Promise<SandboxContainer> {
    const container = await docker.createContainer({
      ...options,
      abortSignal: signal,
    } as Docker.ContainerCreateOptions);
    return new SandboxContainer(container);
  }

  /** Attach stdin/stdout/stderr; must happen before start(). */
  async attach(): Promise<ContainerStreams> {
    const stream = (await this.container.attach({
      stream: true,
      hijack: true,
      stdin: true,
      stdout: true,
      stderr: true,
    })) as unknown as NodeJS.ReadWriteStream & Readable & Writable;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const demuxer = new AttachDemuxer(
      (payload) => stdout.write(payload),
      (payload) => stderr.write(payload),
    );
    stream.on("data", (chunk: Buffer) => demuxer.push(chunk));
    const end = () => {
      stdout.end();
      stderr.end();
    };
    stream.on("end", end);
    stream.on("close", end);
    stream.on("error", end);
    return { stdin: stream, stdout, stderr };
  }

  async start(signal?: AbortSignal): Promise<void> {
    await this.container.start({ abortSignal: signal } as object);
  }

  /** Waits for the container to exit; resolves with its exit code and OOM state. */
  async wait(): Promise<ContainerExit> {
    const result = (await this.container.wait()) as { StatusCode: number };
    const info = await this.container.inspect().catch(() => undefined);
    return { exitCode: result.StatusCode, oomKilled: Boolean(info?.State?.OOMKilled) };
  }

  /** Kills the container now (SIGKILL): used for timeouts, aborts and tripped limits. */
  async kill(): Promise<void> {
    await this.container.kill().catch((error: unknown) => {
      if (!isGoneError(error) && !String(error).includes("is not running")) throw error;
    });
  }

  /** Force-removes the container; idempotent, tolerates a container that is already gone. */
  remove(): Promise<void> {
    this.removal ??= this.container.remove({ force: true, v: true }).catch((error: unknown) => {
      if (!isGoneError(error)) throw error;
    });
    return this.removal;
  }
}
