// The engine seam: everything sandbox-run asks of a container engine, and nothing more. The rest of
// the library (image/, run/, cli/, the agent) talks to an Engine; only the implementations in this
// folder know dockerode or the Engine API. Every container an Engine creates is hardened the same
// way whatever the caller asks (read-only root, no capabilities, no-new-privileges, private IPC and
// cgroup namespaces, no core dumps, no logs), so no caller can forget a piece of the boundary.
import type { Readable, Writable } from "node:stream";
import type { RunnerPlatform } from "../util/platform.js";
import type { EngineLimitSupport } from "./engine-limits.js";

export interface EngineInfo {
  /** Engine version, e.g. "26.1.5" (Docker) or "4.3.1" (Podman). */
  version: string;
  apiVersion: string;
  /** Registered runtimes (runc, runsc, crun ...) and their arguments. */
  runtimes: Record<string, { path?: string; runtimeArgs?: string[] }>;
  securityOptions: string[];
  /** "1" or "2" where the engine says. */
  cgroupVersion?: string;
  /** Docker, or Podman's Docker-compatible service. */
  product?: "docker" | "podman";
  /** What a Docker engine says it can enforce on a container (its /info); absent for Podman. */
  limits?: EngineLimitSupport;
  /** The engine's own platform; undefined for an architecture no runner image is built for. */
  platform?: RunnerPlatform;
  /** Its architecture as it says it ("x86_64", "aarch64"). */
  architecture?: string;
  /** "Debian GNU/Linux 12 (bookworm)", "Docker Desktop" ... */
  operatingSystem?: string;
  kernelVersion?: string;
  /** Docker Desktop (a VM of its own): no host unix sockets in containers, so runs use copy mode. */
  dockerDesktop?: boolean;
  /** Its containers' uids are other uids on this host (userns-remap, rootless Docker): runs use copy mode. */
  remapsUsers?: "userns" | "rootless";
}

/** What an engine says of one of its images. */
export interface ImageDetails {
  /** The image's content id ("sha256:..."): what a container is made from, whatever a tag names later. */
  id?: string;
  labels: Record<string, string>;
  /** "linux/arm64": the image's own Os and Architecture. */
  platform: string;
  sizeBytes: number;
  /** The paths the image declares as VOLUMEs (the engine makes an anonymous volume at each). */
  volumes?: string[];
}

export interface ImageSummary {
  id: string;
  tags: string[];
}

export interface ContainerSummary {
  id: string;
  labels: Record<string, string>;
  /** "running", "exited", "created" ... */
  state: string;
  /** The id of the image it was made from. */
  image?: string;
}

interface BindMount {
  hostPath: string;
  containerPath: string;
  readOnly: boolean;
}

/** An engine-neutral container description; the engine adds the fixed hardening. */
export interface ContainerSpec {
  name?: string;
  image: string;
  entrypoint: string[];
  cmd: string[];
  env: Record<string, string>;
  /** "uid:gid"; never root (engines refuse nothing here, the plan guarantees it). */
  user: string;
  workingDir?: string;
  labels: Record<string, string>;
  runtime: string;
  network: "none" | "bridge";
  mounts: BindMount[];
  /** Container path -> tmpfs mount options (size, mode, uid ...). */
  tmpfs: Record<string, string>;
  limits: {
    memoryMb: number;
    cpus?: number;
    pids: number;
    /** RLIMIT_FSIZE: the largest file a process in the container may write. */
    fileSizeMb?: number;
  };
  /** Open stdin for attach (the prompt is written there). */
  openStdin: boolean;
  /** Run an init as PID 1 that reaps orphans (the bash tool leaves many). */
  init: boolean;
  /** The platform to run ("linux/arm64"): the engine refuses an image of another one. */
  platform?: RunnerPlatform;
}

export interface ContainerStreams {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
}

export interface ContainerExit {
  exitCode: number;
  oomKilled: boolean;
}

export interface ExecOptions {
  cmd: string[];
  /** "uid:gid" the command runs as. */
  user: string;
  env?: Record<string, string>;
  workingDir?: string;
}

export interface ExecSession {
  /** Ends the process's stdin when ended. */
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** The command's exit code, once both output streams ended. */
  exit: Promise<number>;
}

export interface EngineContainer {
  readonly id: string;
  /** Attaches stdin/stdout/stderr; must happen before start() so no output is lost. */
  attach(signal?: AbortSignal): Promise<ContainerStreams>;
  start(signal?: AbortSignal): Promise<void>;
  /** Resolves when the container exits, with its exit code and OOM state. */
  wait(signal?: AbortSignal): Promise<ContainerExit>;
  /** Stops every process now (SIGKILL); a container that is already gone is fine. */
  kill(): Promise<void>;
  /** Force-removes the container; idempotent, tolerates a container that is already gone. */
  remove(): Promise<void>;
  /** Runs a command in the running container with its stdio attached. */
  exec(options: ExecOptions, signal?: AbortSignal): Promise<ExecSession>;
  /** Gives the container another name (a warm sandbox takes its run's at the claim); optional. */
  rename?(name: string): Promise<void>;
  /** Sets its memory limit, swap included, while it runs (a warm sandbox's, at the claim); optional. */
  setMemoryLimit?(memoryMb: number): Promise<void>;
  /**
   * Reads now what the engine cannot report once the container is gone (Podman's OOM counter),
   * called as each tool of the sandbox's ends; optional, never throws, cheap when called often.
   */
  sampleCounters?(): void;
  /**
   * Its processes on this host, read fresh (the bind-mode disk watch looks at the files they hold
   * open); optional, empty where the engine runs elsewhere, never throws.
   */
  hostPids?(): Promise<number[]>;
}

export interface BuildImageOptions {
  tag: string;
  labels?: Record<string, string>;
  buildArgs?: Record<string, string>;
  /** The platform the build's steps run as (its FROM image must be of it). */
  platform?: RunnerPlatform;
  /** One line of build output at a time. */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

export interface Engine {
  /** "local", or the name an engines file gives it: used in messages and events. */
  readonly name: string;
  /** Where it is, for people: "unix:///var/run/docker.sock", "tcp://build-2:2376 (TLS)" ... */
  readonly address?: string;
  /**
   * Whether paths on this host are paths on the engine's host too (bind mounts work). False for
   * an engine on another machine: a run there must copy the workspace in and out.
   */
  readonly sharesHostFilesystem: boolean;
  /** Throws a SandboxRunError "docker-unavailable" that says how to fix it when the engine does not answer. */
  ping(signal?: AbortSignal): Promise<void>;
  info(signal?: AbortSignal): Promise<EngineInfo>;
  /** The image's labels, or undefined when the engine has no such image. */
  imageLabels(ref: string, signal?: AbortSignal): Promise<Record<string, string> | undefined>;
  /** The image's labels, platform and size, or undefined when the engine has no such image. */
  imageDetails(ref: string): Promise<ImageDetails | undefined>;
  listImages(references: string[]): Promise<ImageSummary[]>;
  /** Removes an image tag; rejects with the engine's reason (e.g. a container still uses it). */
  removeImage(ref: string): Promise<void>;
  /** Builds from a tar of the build context; rejects with the failing step's message. */
  buildImage(context: Readable, options: BuildImageOptions): Promise<void>;
  /** Pulls an image; false when no registry answered within the time. */
  pullImage(ref: string, timeoutMs: number): Promise<boolean>;
  /** Makes an image from a tar of a root filesystem (`docker import`: of the engine's own platform). */
  importImage(rootfsTar: Readable, ref: string): Promise<void>;
  /** The image with its tags and labels as a tar stream (`docker save`), read as it is produced. */
  saveImage(ref: string, signal?: AbortSignal): Promise<Readable>;
  /** Loads a `docker save` tar (streamed, never held whole); resolves once the engine has the image. */
  loadImage(imageTar: Readable, signal?: AbortSignal): Promise<void>;
  createContainer(spec: ContainerSpec, signal?: AbortSignal): Promise<EngineContainer>;
  /** Containers (any state) that carry every one of the given `key=value` labels. */
  listContainers(labels: string[]): Promise<ContainerSummary[]>;
  /**
   * Force-removes a container by id: "removed" by this call, or "gone" (already gone, or another
   * remover took it meanwhile: a reaper leaves that container's run to whoever removed it).
   */
  removeContainer(id: string): Promise<"removed" | "gone">;
  /** Lets go of held connections (an ssh link); the engine may not be used afterwards. */
  close?(): void;
  /**
   * Removes the containers that carry every one of `labels` from a process of its own, which
   * outlives this one: for `process.exit()`, when nothing asynchronous can run here any more.
   * Synchronous and best effort; an engine that cannot (one reached over tcp or ssh) leaves them
   * to stop by themselves and to `gc`.
   */
  removeAfterExit?(labels: string[]): void;
}
