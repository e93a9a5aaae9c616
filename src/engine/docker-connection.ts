// Connects to the Docker engine and turns "it is not there" into an error that says how
// to start it, instead of an ECONNREFUSED stack trace.
import Docker from "dockerode";
import { SandboxRunError } from "../errors.js";

export type DockerClient = Docker;

export function createDockerClient(): DockerClient {
  // dockerode reads DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH like the docker CLI.
  return new Docker();
}

export function dockerUnavailable(cause: unknown): SandboxRunError {
  const where = process.env.DOCKER_HOST ?? "/var/run/docker.sock";
  const detail = (cause as NodeJS.ErrnoException)?.code ?? (cause as Error)?.message ?? String(cause);
  // EACCES: the engine runs, but this user may not use its socket.
  const hint =
    detail === "EACCES"
      ? "This user may not use the Docker socket: add it to the docker group (`sudo usermod -aG docker $USER`, then log in again), " +
        "or point DOCKER_HOST at an engine it may use (rootless Docker: unix:///run/user/$UID/docker.sock)."
      : "Start the engine (`sudo systemctl start docker`, or `sudo dockerd &` where there is no systemd; " +
        "`sudo apt-get install docker.io` installs it on Debian), or point DOCKER_HOST at a running one. " +
        "`sandbox-run doctor` checks the set-up.";
  return new SandboxRunError("docker-unavailable", `Docker is not reachable at ${where} (${detail}).`, { hint, cause });
}

/**
 * A run bind-mounts host paths (the workspace, the roots, the gateway's unix socket): on an
 * engine on another machine the same paths would name that machine's files, or nothing. So an
 * ssh:// engine, or tcp:// to anything but loopback, is refused before any request is made.
 */
export function assertLocalEngine(docker: DockerClient): void {
  const modem = docker.modem as { socketPath?: unknown; host?: string; port?: number; protocol?: string };
  if (modem.socketPath) return;
  const host = (modem.host ?? "").replace(/^\[|\]$/g, "");
  const loopback = host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  if (loopback && modem.protocol !== "ssh") return;
  const where = `${modem.protocol ?? "tcp"}://${modem.host ?? ""}${modem.port ? `:${modem.port}` : ""}`;
  throw new SandboxRunError(
    "docker-unavailable",
    `The Docker engine at ${where} is not on this machine; sandbox-run needs a local one.`,
    {
      hint:
        "A run mounts the workspace and the model gateway's socket from this machine, which a remote engine cannot see. " +
        "Run sandbox-run on the engine's machine, or unset DOCKER_HOST to use the local engine.",
    },
  );
}

/** Docker answers 404 for "no such container" and 409 when removal is already under way. */
export function isGoneError(error: unknown): boolean {
  const status = (error as { statusCode?: number })?.statusCode;
  return status === 404 || status === 409 || status === 304;
}
