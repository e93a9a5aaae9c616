// The Engine for a Docker (or Docker-compatible: Podman's service) engine reached through dockerode:
// the local socket, whatever DOCKER_HOST names, or an entry of an engines file (tcp:// with mutual
// TLS, ssh:// over one held connection). The only module that calls dockerode's API, with
// docker-container.ts.
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import { SandboxRunError } from "../errors.js";
import type { AnswerLimits } from "./answer-limits.js";
import { dockerUnavailable, isGoneError, planDockerConnection } from "./docker-connection.js";
import { DockerContainer } from "./docker-container.js";
import { dockerCreateOptions, type PodmanVariant } from "./docker-create-options.js";
import type {
  BuildImageOptions,
  ContainerSpec,
  ContainerSummary,
  Engine,
  EngineContainer,
  EngineInfo,
  ImageDetails,
  ImageSummary,
} from "./engine.js";
import {
  assertSafeEndpoint,
  describeEndpoint,
  type EngineEndpoint,
  endpointFromEnv,
  sharesHostFilesystemByDefault,
} from "./engine-endpoint.js";
import { engineKindOf, type RawEngineInfo, type RawEngineVersion } from "./engine-kind.js";
import {
  assertEngineLimits,
  cpusFor,
  type EngineLimitSupport,
  limitSupportOf,
  type RawLimitFlags,
} from "./engine-limits.js";
import { removeForcibly } from "./forced-removal.js";
import {
  assertPodmanLimits,
  assertPodmanRuntime,
  detectPodman,
  type PodmanService,
  podmanDefaultUlimits,
  podmanRuntimes,
  type Ulimit,
} from "./podman-compat.js";
import { followProgress } from "./progress-stream.js";
import { spawnRemovalHelper } from "./remove-after-exit.js";
import type { SshTunnel } from "./ssh-tunnel.js";

export interface DockerEngineOptions {
  /** "local" by default; engines files name each engine. */
  name?: string;
  /** Where the engine is; default: what DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH say. */
  endpoint?: EngineEndpoint;
  /** Default: true for a unix socket or tcp to loopback, false for anything over a network. */
  sharesHostFilesystem?: boolean;
  /**
   * What the host takes in answer to a request that is not a stream: at most 16 MiB, within 30 s
   * unless the call has a deadline of its own. An engine past either is an error that names it.
   */
  answers?: AnswerLimits;
  /**
   * A ready dockerode client (tests); its endpoint is read back from it.
   * @internal dockerode's types stay out of the published declarations (its @types are not a dependency).
   */
  docker?: Docker;
}

export class DockerEngine implements Engine {
  readonly name: string;
  readonly address: string;
  readonly sharesHostFilesystem: boolean;
  #docker?: Docker;
  readonly #connect?: () => Docker;
  readonly #endpoint: EngineEndpoint;
  readonly #tunnel?: SshTunnel;
  /** Plain tcp to another machine: refused at the first request, before any byte is sent. */
  #refusal?: SandboxRunError;
  readonly #removalTimeoutMs: number;
  #podman?: Promise<PodmanService | undefined>;
  /** What a Docker engine's /info says it can enforce; asked once. */
  #limitSupport?: Promise<EngineLimitSupport>;
  #podmanUlimits?: Promise<Ulimit[]>;

  constructor(options?: DockerEngineOptions);
  /** @internal A ready dockerode client (tests). */
  constructor(docker: Docker);
  constructor(options: DockerEngineOptions | Docker = {}) {
    const given: DockerEngineOptions = isDockerClient(options) ? { docker: options } : options;
    this.name = given.name ?? "local";
    this.#removalTimeoutMs = given.answers?.removalTimeoutMs ?? REMOVAL_TIMEOUT_MS;
    if (given.docker) {
      this.#docker = given.docker;
      this.#endpoint = given.endpoint ?? endpointOfClient(given.docker);
    } else {
      this.#endpoint = given.endpoint ?? endpointFromEnv();
      // Checked now (a bad TLS file is a usage error here); dockerode is loaded at the first request.
      const connection = planDockerConnection(this.#endpoint, this.name, given.answers);
      this.#connect = connection.client;
      this.#tunnel = connection.tunnel;
    }
    this.address = describeEndpoint(this.#endpoint);
    this.sharesHostFilesystem = given.sharesHostFilesystem ?? sharesHostFilesystemByDefault(this.#endpoint);
    try {
      assertSafeEndpoint(this.#endpoint, this.name);
    } catch (error) {
      this.#refusal = error as SandboxRunError;
    }
  }

  /** @internal The dockerode client (made on first use). */
  get docker(): Docker {
    this.#docker ??= this.#connect!();
    return this.#docker;
  }

  /** The dockerode client, unless this engine may not be used at all. */
  private get api(): Docker {
    if (this.#refusal) throw this.#refusal;
    return this.docker;
  }

  /** ssh connections this engine opened (tests check that requests share one). */
  get sshConnections(): number | undefined {
    return this.#tunnel?.connections;
  }

  async ping(signal?: AbortSignal): Promise<void> {
    try {
      await this.api.ping({ abortSignal: signal } as never);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw this.unavailable(error);
    }
  }

  close(): void {
    this.#tunnel?.close();
  }

  /** @internal Podman's Docker-compatible service (it names itself in /version), or undefined for Docker; asked once. */
  podman(): Promise<PodmanService | undefined> {
    this.#podman ??= detectPodman(this.api).catch((error: unknown) => {
      this.#podman = undefined;
      throw this.unavailable(error);
    });
    return this.#podman;
  }

  private unavailable(error: unknown): SandboxRunError {
    return dockerUnavailable(error, { name: this.name, endpoint: this.#endpoint });
  }

  async info(): Promise<EngineInfo> {
    const [version, info, podman] = await Promise.all([this.api.version(), this.api.info(), this.podman()]);
    const raw = info as RawEngineInfo &
      RawLimitFlags & {
        Runtimes?: EngineInfo["runtimes"];
        SecurityOptions?: string[];
        CgroupVersion?: string;
      };
    let runtimes = raw.Runtimes ?? {};
    // Podman lists every runtime it knows of, installed or not, and runs only its default.
    if (podman) runtimes = Object.fromEntries(podmanRuntimes(podman).map((name) => [name, runtimes[name] ?? {}]));
    const kind = engineKindOf(raw, version as RawEngineVersion);
    return {
      version: version.Version,
      apiVersion: version.ApiVersion,
      runtimes,
      securityOptions: (Array.isArray(raw.SecurityOptions) ? raw.SecurityOptions : []).filter(
        (o: unknown): o is string => typeof o === "string",
      ),
      cgroupVersion: raw.CgroupVersion,
      // Podman's flags describe its host, not what it can do for a container (assertPodmanLimits).
      ...(podman ? {} : { limits: limitSupportOf(raw) }),
      ...(podman ? { product: "podman" as const } : { product: "docker" as const }),
      ...kind,
    };
  }

  async imageLabels(ref: string): Promise<Record<string, string> | undefined> {
    try {
      return (await this.api.getImage(ref).inspect()).Config?.Labels ?? {};
    } catch (error) {
      if (isGoneError(error)) return undefined;
      throw this.unavailable(error);
    }
  }

  async imageDetails(ref: string): Promise<ImageDetails | undefined> {
    try {
      const image = await this.api.getImage(ref).inspect();
      return {
        id: image.Id,
        labels: image.Config?.Labels ?? {},
        platform: `${image.Os}/${image.Architecture}`,
        sizeBytes: image.Size,
        volumes: Object.keys(image.Config?.Volumes ?? {}),
      };
    } catch (error) {
      if (isGoneError(error)) return undefined;
      throw this.unavailable(error);
    }
  }

  async listImages(references: string[]): Promise<ImageSummary[]> {
    const images = await this.api.listImages({ filters: { reference: references } });
    return images.map((image) => ({ id: image.Id, tags: image.RepoTags ?? [] }));
  }

  async removeImage(ref: string): Promise<void> {
    try {
      await this.api.getImage(ref).remove();
    } catch (error) {
      const reason = (error as { json?: { message?: string } })?.json?.message ?? (error as Error)?.message;
      throw new Error((reason ?? String(error)).trim().split("\n")[0]);
    }
  }

  async buildImage(context: Readable, options: BuildImageOptions): Promise<void> {
    const stream = await this.api.buildImage(
      context as unknown as NodeJS.ReadableStream,
      {
        t: options.tag,
        ...(options.buildArgs ? { buildargs: options.buildArgs } : {}),
        ...(options.labels ? { labels: options.labels } : {}),
        ...(options.platform ? { platform: options.platform } : {}),
        rm: true,
        forcerm: true,
        abortSignal: options.signal,
      } as Docker.ImageBuildOptions,
    );
    await this.follow(stream, options.onProgress, `Building ${options.tag}`);
  }

  async pullImage(ref: string, timeoutMs: number): Promise<boolean> {
    try {
      const stream = await this.api.pull(ref, { abortSignal: AbortSignal.timeout(timeoutMs) });
      await this.follow(stream, undefined, `Pulling ${ref}`);
      return true;
    } catch {
      return false;
    }
  }

  async importImage(rootfsTar: Readable, ref: string): Promise<void> {
    const colon = ref.lastIndexOf(":");
    const stream = await this.api.importImage(rootfsTar as unknown as string, {
      repo: ref.slice(0, colon),
      tag: ref.slice(colon + 1),
    });
    await this.follow(stream, undefined, `Importing ${ref}`);
  }

  async saveImage(ref: string, signal?: AbortSignal): Promise<Readable> {
    // dockerode's image.get() takes no abort signal; the same request, through its modem.
    const modem = this.api.modem as unknown as {
      dial(options: object, callback: (error: unknown, stream: Readable) => void): void;
    };
    return new Promise((resolve, reject) =>
      modem.dial(
        {
          path: `/images/${encodeURIComponent(ref)}/get`,
          method: "GET",
          isStream: true,
          abortSignal: signal,
          statusCodes: { 200: true, 404: "no such image", 500: "server error" },
        },
        (error, stream) => (error ? reject(this.unavailable(error)) : resolve(stream)),
      ),
    );
  }

  async loadImage(imageTar: Readable, signal?: AbortSignal): Promise<void> {
    const stream = await this.api.loadImage(
      imageTar as unknown as NodeJS.ReadableStream,
      {
        quiet: true,
        abortSignal: signal,
      } as object,
    );
    await this.follow(stream, undefined, `Loading an image onto engine "${this.name}"`);
  }

  async createContainer(spec: ContainerSpec, signal?: AbortSignal): Promise<EngineContainer> {
    if (!this.sharesHostFilesystem && spec.mounts.length > 0) {
      // The path would name the engine machine's file, or nothing: never the caller's.
      throw new SandboxRunError(
        "usage",
        `Engine "${this.name}" (${this.address}) is on another machine: ${spec.mounts[0]!.hostPath} cannot be mounted there.`,
        { hint: "Runs on an engine of another machine copy the workspace in and out: use --workspace copy." },
      );
    }
    const podman = await this.podmanVariant(spec);
    let placed = spec;
    if (!podman) {
      const support = await this.limitSupport();
      assertEngineLimits(support, this.name, spec.limits.cpus !== undefined);
      const cpus = cpusFor(spec.limits.cpus, support);
      if (cpus !== spec.limits.cpus) placed = { ...spec, limits: { ...spec.limits, cpus } };
    }
    const options = { ...dockerCreateOptions(placed, podman), abortSignal: signal } as Docker.ContainerCreateOptions;
    return new DockerContainer(await this.api.createContainer(options), {
      // Read from this host's cgroupfs: a Podman service of another machine's is not readable here.
      readOomCounterBeforeKill: Boolean(podman) && this.sharesHostFilesystem,
      ping: (signal) => this.ping(signal),
    });
  }

  private limitSupport(): Promise<EngineLimitSupport> {
    this.#limitSupport ??= this.api.info().then(
      (info) => limitSupportOf(info as RawLimitFlags),
      (error: unknown) => {
        this.#limitSupport = undefined;
        throw this.unavailable(error);
      },
    );
    return this.#limitSupport;
  }

  /** For Podman: refuses a runtime the service does not run, and learns its default ulimits once. */
  private async podmanVariant(spec: ContainerSpec): Promise<PodmanVariant | undefined> {
    const podman = await this.podman();
    if (!podman) return undefined;
    assertPodmanRuntime(podman, spec.runtime, this.name);
    assertPodmanLimits(podman, this.name, spec.limits.cpus !== undefined);
    this.#podmanUlimits ??= podmanDefaultUlimits(this.api, spec.image, spec.labels);
    this.#podmanUlimits.catch(() => (this.#podmanUlimits = undefined));
    return { defaultUlimits: await this.#podmanUlimits, rootless: podman.rootless };
  }

  async listContainers(labels: string[]): Promise<ContainerSummary[]> {
    const containers = await this.api.listContainers({ all: true, filters: { label: labels } });
    return containers.map((c) => ({
      id: c.Id,
      labels: c.Labels ?? {},
      state: c.State,
      ...(c.ImageID ? { image: c.ImageID } : {}),
    }));
  }

  async removeContainer(id: string): Promise<"removed" | "gone"> {
    // Its own deadline, longer than an ordinary answer's: a container whose processes die slowly
    // (a fork bomb, gVisor under load) keeps a working engine busy with its removal for a while.
    return removeForcibly(this.api.getContainer(id), this.#removalTimeoutMs);
  }

  removeAfterExit(labels: string[]): void {
    // Only where the engine's socket is a file on this host: a helper reaches it with no client.
    if (this.#endpoint.kind === "unix" && !this.#refusal) spawnRemovalHelper(this.#endpoint.socketPath, labels);
  }

  /** Follows a progress stream (build, pull, import, load) to its end; a failed step rejects with its message. */
  private async follow(stream: NodeJS.ReadableStream, onLine: ((line: string) => void) | undefined, what: string) {
    const failed = await followProgress(stream, (event) => {
      const line = (event.stream ?? event.status ?? "").trimEnd();
      if (line) onLine?.(line);
    }).catch((error: Error) => `${error.message} (engine "${this.name}")`);
    if (failed === undefined) return;
    throw new SandboxRunError("image-missing", `${what} failed: ${failed}`, {
      hint: "Read the build output above; `sandbox-run doctor` checks the engine and network.",
    });
  }
}

function isDockerClient(value: DockerEngineOptions | Docker): value is Docker {
  return typeof (value as Docker).listContainers === "function";
}

/** How long one orphan's removal may take (as a run's own removal: docker-container.ts). */
const REMOVAL_TIMEOUT_MS = 60_000;

/** The endpoint a ready dockerode client talks to, read back from its modem (for messages and defaults). */
function endpointOfClient(docker: Docker): EngineEndpoint {
  const modem = docker.modem as { socketPath?: unknown; host?: string; port?: number | string; protocol?: string };
  if (modem.socketPath || !modem.host)
    return {
      kind: "unix",
      socketPath: typeof modem.socketPath === "string" ? modem.socketPath : "/var/run/docker.sock",
    };
  const port = Number(modem.port ?? 2375);
  if (modem.protocol === "ssh")
    return { kind: "ssh", host: modem.host, port: port || 22, socketPath: "/var/run/docker.sock", ssh: { user: "" } };
  const tls = modem.protocol === "https" ? { ca: "", cert: "", key: "" } : undefined;
  return { kind: "tcp", host: modem.host, port, ...(tls ? { tls } : {}) };
}
