// The Engine for a Docker (or Docker-compatible) engine reached through dockerode: the local socket,
// or whatever DOCKER_HOST names. The only module that calls dockerode's API, with docker-container.ts.
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import { SandboxRunError } from "../errors.js";
import { assertLocalEngine, createDockerClient, dockerUnavailable, isGoneError } from "./docker-connection.js";
import { DockerContainer } from "./docker-container.js";
import { dockerCreateOptions } from "./docker-create-options.js";
import type {
  BuildImageOptions,
  ContainerSpec,
  ContainerSummary,
  Engine,
  EngineContainer,
  EngineInfo,
  ImageSummary,
} from "./engine.js";

export class DockerEngine implements Engine {
  readonly sharesHostFilesystem = true;

  constructor(
    readonly docker: Docker = createDockerClient(),
    readonly name = "local",
  ) {}

  async ping(signal?: AbortSignal): Promise<void> {
    assertLocalEngine(this.docker);
    try {
      await this.docker.ping({ abortSignal: signal } as never);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw dockerUnavailable(error);
    }
  }

  async info(): Promise<EngineInfo> {
    const [version, info] = await Promise.all([this.docker.version(), this.docker.info()]);
    const raw = info as { Runtimes?: EngineInfo["runtimes"]; SecurityOptions?: string[]; CgroupVersion?: string };
    return {
      version: version.Version,
      apiVersion: version.ApiVersion,
      runtimes: raw.Runtimes ?? {},
      securityOptions: raw.SecurityOptions ?? [],
      cgroupVersion: raw.CgroupVersion,
    };
  }

  async imageLabels(ref: string): Promise<Record<string, string> | undefined> {
    try {
      return (await this.docker.getImage(ref).inspect()).Config?.Labels ?? {};
    } catch (error) {
      if (isGoneError(error)) return undefined;
      throw dockerUnavailable(error);
    }
  }

  async listImages(references: string[]): Promise<ImageSummary[]> {
    const images = await this.docker.listImages({ filters: { reference: references } });
    return images.map((image) => ({ id: image.Id, tags: image.RepoTags ?? [] }));
  }

  async removeImage(ref: string): Promise<void> {
    try {
      await this.docker.getImage(ref).remove();
    } catch (error) {
      const reason = (error as { json?: { message?: string } })?.json?.message ?? (error as Error)?.message;
      throw new Error((reason ?? String(error)).trim().split("\n")[0]);
    }
  }

  async buildImage(context: Readable, options: BuildImageOptions): Promise<void> {
    const stream = await this.docker.buildImage(
      context as unknown as NodeJS.ReadableStream,
      {
        t: options.tag,
        ...(options.buildArgs ? { buildargs: options.buildArgs } : {}),
        ...(options.labels ? { labels: options.labels } : {}),
        rm: true,
        forcerm: true,
        abortSignal: options.signal,
      } as Docker.ImageBuildOptions,
    );
    await this.follow(stream, options.onProgress, `Building ${options.tag}`);
  }

  async pullImage(ref: string, timeoutMs: number): Promise<boolean> {
    try {
      const stream = await this.docker.pull(ref, { abortSignal: AbortSignal.timeout(timeoutMs) });
      await this.follow(stream, undefined, `Pulling ${ref}`);
      return true;
    } catch {
      return false;
    }
  }

  async importImage(rootfsTar: Readable, ref: string): Promise<void> {
    const colon = ref.lastIndexOf(":");
    const stream = await this.docker.importImage(rootfsTar as unknown as string, {
      repo: ref.slice(0, colon),
      tag: ref.slice(colon + 1),
    });
    await this.follow(stream, undefined, `Importing ${ref}`);
  }

  async createContainer(spec: ContainerSpec, signal?: AbortSignal): Promise<EngineContainer> {
    const options = { ...dockerCreateOptions(spec), abortSignal: signal } as Docker.ContainerCreateOptions;
    return new DockerContainer(await this.docker.createContainer(options));
  }

  async listContainers(labels: string[]): Promise<ContainerSummary[]> {
    const containers = await this.docker.listContainers({ all: true, filters: { label: labels } });
    return containers.map((c) => ({ id: c.Id, labels: c.Labels ?? {}, state: c.State }));
  }

  async removeContainer(id: string): Promise<void> {
    await this.docker
      .getContainer(id)
      .remove({ force: true, v: true })
      .catch((error: unknown) => {
        if (!isGoneError(error)) throw error;
      });
  }

  /** Follows a progress stream (build, pull, import) to its end; a failed step rejects with its message. */
  private follow(stream: NodeJS.ReadableStream, onLine: ((line: string) => void) | undefined, what: string) {
    return new Promise<void>((resolve, reject) =>
      this.docker.modem.followProgress(
        stream,
        (error: Error | null, output: Array<{ error?: string }>) => {
          const failed = error?.message ?? output.find((o) => o.error)?.error;
          if (!failed) return resolve();
          reject(
            new SandboxRunError("image-missing", `${what} failed: ${failed}`, {
              hint: "Read the build output above; `sandbox-run doctor` checks the engine and network.",
            }),
          );
        },
        (event: { stream?: string; status?: string }) => {
          const line = (event.stream ?? event.status ?? "").trimEnd();
          if (line) onLine?.(line);
        },
      ),
    );
  }
}
