// Connects to the Docker engine and turns "it is not there" into an error that says how
// to start it, instead of an ECONNREFUSED stack trace.
import Docker from "dockerode";
import { SandboxRunError } from "../errors.js";

export type DockerClient = Docker;

export function createDockerClient(): DockerClient {
  // dockerode reads DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH like the docker CLI.
  return new Docker();
}

export async function pingDocker(docker: DockerClient, signal?: AbortSignal): Promise<void> {
  try {
    await docker.ping({ abortSignal: signal } as never);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw dockerUnavailable(error);
  }
}

export function dockerUnavailable(cause: unknown): SandboxRunError {
  const where = process.env.DOCKER_HOST ?? "/var/run/docker.sock";
  const detail = (cause as NodeJS.ErrnoException)?.code ?? (cause as Error)?.message ?? String(cause);
  return new SandboxRunError("docker-unavailable", `Docker is not reachable at ${where} (${detail}).`, {
    hint:
      "Start the engine (`sudo systemctl start docker`, or `sudo dockerd &` where there is no systemd; " +
      "`sudo apt-get install docker.io` installs it on Debian), or point DOCKER_HOST at a running one. " +
      "`sandbox-run doctor` checks the set-up.",
    cause,
  });
}

/** Docker answers 404 for "no such container" and 409 when removal is already under way. */
export function isGoneError(error: unknown): boolean {
  const status = (error as { statusCode?: number })?.statusCode;
  return status === 404 || status === 409 || status === 304;
}
