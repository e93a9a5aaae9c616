// Connects to a Docker(-compatible) engine where an endpoint says, and turns "it is not there" into
// an error that says how to fix it, instead of an ECONNREFUSED stack trace.
import type Docker from "dockerode";
import { SandboxRunError, usageError } from "../errors.js";
import { CallerFileError, MAX_ENGINE_FILE_BYTES, readCallerFile } from "../util/config-file.js";
import type { AnswerLimits } from "./answer-limits.js";
import { boundAnswers } from "./bounded-answers.js";
import { describeEndpoint, type EngineEndpoint, endpointFromEnv, type TlsFiles } from "./engine-endpoint.js";
import { loadDockerode } from "./load-dockerode.js";
import { SshTunnel } from "./ssh-tunnel.js";

export type DockerClient = Docker;

interface DockerConnection {
  docker: DockerClient;
  /** The held ssh connection of an ssh:// engine. */
  tunnel?: SshTunnel;
}

/** How to reach an engine, checked (TLS files read) but not connected: `client()` makes the dockerode client. */
interface DockerConnectionPlan {
  client(): DockerClient;
  /** The held ssh connection of an ssh:// engine. */
  tunnel?: SshTunnel;
}

/** A dockerode client for the endpoint (default: what DOCKER_HOST and friends say, like the docker CLI). */
export function createDockerClient(endpoint: EngineEndpoint = endpointFromEnv()): DockerClient {
  return connectDocker(endpoint, "local").docker;
}

function connectDocker(endpoint: EngineEndpoint, name: string): DockerConnection {
  const plan = planDockerConnection(endpoint, name);
  return { docker: plan.client(), ...(plan.tunnel ? { tunnel: plan.tunnel } : {}) };
}

/**
 * Reads what the connection needs now (so a bad TLS file is a usage error at once); connects on
 * `client()`. The client's non-stream answers are bounded in bytes and time (bounded-answers.ts).
 */
export function planDockerConnection(
  endpoint: EngineEndpoint,
  name: string,
  answers?: AnswerLimits,
): DockerConnectionPlan {
  // dockerode loads on the first client: `--help`, `--dry-run` and a run's planning never need it.
  const engine = { name, address: describeEndpoint(endpoint) };
  const client = (options: Docker.DockerOptions) => () => boundAnswers(new (loadDockerode())(options), engine, answers);
  // Every field is given, so dockerode's own reading of DOCKER_HOST never mixes in.
  const none = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
  };
  if (endpoint.kind === "unix") return { client: client({ ...none, socketPath: endpoint.socketPath }) };
  if (endpoint.kind === "tcp") {
    const host = endpoint.host.replace(/^\[|\]$/g, "");
    if (!endpoint.tls) return { client: client({ ...none, host, port: endpoint.port, protocol: "http" }) };
    return {
      client: client({
        ...none,
        host,
        port: endpoint.port,
        protocol: "https",
        ...readTlsFiles(endpoint.tls, name),
      }),
    };
  }
  const tunnel = new SshTunnel({
    name,
    host: endpoint.host,
    port: endpoint.port,
    ssh: endpoint.ssh,
    socketPath: endpoint.socketPath,
  });
  // Plain http over the tunnel's streams; "localhost" only fills the Host header.
  // docker-modem passes `agent` on to http.request; @types/dockerode does not list it.
  const options = { ...none, host: "localhost", port: 80, protocol: "http", agent: tunnel.agent };
  return { client: client(options as Docker.DockerOptions), tunnel };
}

function readTlsFiles(files: TlsFiles, name: string): { ca: Buffer; cert: Buffer; key: Buffer } {
  const read = (what: keyof TlsFiles) => {
    try {
      return readCallerFile(files[what], MAX_ENGINE_FILE_BYTES);
    } catch (error) {
      const why =
        error instanceof CallerFileError
          ? error.reason
          : ((error as NodeJS.ErrnoException).code ?? (error as Error).message);
      throw usageError(
        `Engine "${name}": the TLS ${what} file ${files[what]} cannot be read (${why}).`,
        "Point DOCKER_CERT_PATH (or `tls` in the engines file) at the folder with ca.pem, cert.pem and key.pem.",
      );
    }
  };
  return { ca: read("ca"), cert: read("cert"), key: read("key") };
}

export function dockerUnavailable(cause: unknown, where?: { name: string; endpoint: EngineEndpoint }): SandboxRunError {
  if (cause instanceof SandboxRunError) return cause;
  const detail = (cause as NodeJS.ErrnoException)?.code ?? (cause as Error)?.message ?? String(cause);
  if (where && where.name !== "local") {
    return new SandboxRunError(
      "docker-unavailable",
      `Engine "${where.name}" at ${describeEndpoint(where.endpoint)} is not reachable (${detail}).`,
      {
        hint: "Check that the engine runs and that this machine may reach it (`sandbox-run doctor --engines <file>` checks each engine).",
        cause,
      },
    );
  }
  const at = where ? describeEndpoint(where.endpoint) : (process.env.DOCKER_HOST ?? "/var/run/docker.sock");
  // EACCES: the engine runs, but this user may not use its socket.
  const hint =
    detail === "EACCES"
      ? "This user may not use the Docker socket: add it to the docker group (`sudo usermod -aG docker $USER`, then log in again), " +
        "or point DOCKER_HOST at an engine it may use (rootless Docker: unix:///run/user/$UID/docker.sock)."
      : "Start the engine (`sudo systemctl start docker`, or `sudo dockerd &` where there is no systemd; " +
        "`sudo apt-get install docker.io` installs it on Debian), or point DOCKER_HOST at a running one. " +
        "`sandbox-run doctor` checks the set-up.";
  return new SandboxRunError("docker-unavailable", `Docker is not reachable at ${at} (${detail}).`, { hint, cause });
}

/** Docker answers 404 for "no such container" and 409 when removal is already under way. */
export function isGoneError(error: unknown): boolean {
  const status = (error as { statusCode?: number })?.statusCode;
  return status === 404 || status === 409 || status === 304;
}
