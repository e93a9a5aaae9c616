// Where an engine is and how to reach it, as Docker's own conventions say: a unix socket, tcp://
// with mutual TLS (DOCKER_TLS_VERIFY + DOCKER_CERT_PATH), or ssh:// to the engine's socket on
// another machine. Parsed once, validated here, and turned into a client by docker-connection.ts.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { SandboxRunError, usageError } from "../errors.js";

export interface TlsFiles {
  /** PEM files: the CA that signed the engine's certificate, and this client's certificate and key. */
  ca: string;
  cert: string;
  key: string;
}

export interface SshAccess {
  user: string;
  /** A private key file; without one, the ssh agent (agentSocket, else SSH_AUTH_SOCK) is asked. */
  privateKeyFile?: string;
  agentSocket?: string;
  /** The engine host's public key ("ssh-ed25519 AAAA..."), or else a known_hosts file to find it in. */
  hostKey?: string;
  knownHostsFile?: string;
}

export type EngineEndpoint =
  | { kind: "unix"; socketPath: string }
  | { kind: "tcp"; host: string; port: number; tls?: TlsFiles }
  | { kind: "ssh"; host: string; port: number; ssh: SshAccess; socketPath: string };

export const DEFAULT_SOCKET = "/var/run/docker.sock";

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  return bare === "localhost" || bare === "::1" || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

/** "unix:///var/run/docker.sock", "tcp://10.0.0.5:2376 (TLS)", "ssh://ci@build-2:22". */
export function describeEndpoint(endpoint: EngineEndpoint): string {
  if (endpoint.kind === "unix") return `unix://${endpoint.socketPath}`;
  if (endpoint.kind === "ssh") return `ssh://${endpoint.ssh.user}@${endpoint.host}:${endpoint.port}`;
  return `tcp://${endpoint.host}:${endpoint.port}${endpoint.tls ? " (TLS)" : ""}`;
}

/**
 * Whether a path on this machine names the same file on the engine's: true for a unix socket and
 * for tcp to loopback (a port-forwarded local engine), false for anything reached over a network.
 * Only such an engine can take bind mounts of the caller's paths. On macOS and Windows every
 * engine runs in a Linux VM (Docker Desktop, Colima, Podman machine ...), where host paths arrive
 * through the VM's file sharing and host unix sockets not at all: never "shared" there. (On Linux,
 * Docker Desktop is recognised from its docker info instead: engine-kind.ts.)
 */
export function sharesHostFilesystemByDefault(endpoint: EngineEndpoint, hostOs: string = process.platform): boolean {
  if (hostOs !== "linux") return false;
  if (endpoint.kind === "unix") return true;
  return endpoint.kind === "tcp" && isLoopbackHost(endpoint.host);
}

/**
 * Plain tcp carries the Engine API, which is root on the engine's machine, unauthenticated and in
 * clear text: never to another machine. Loopback stays allowed for an unprivileged controller
 * (nothing crosses a network), not for root: any local user can listen on a free loopback port and
 * answer as the engine, and root acts on the host on what the engine says (gc, reaping).
 */
export function assertSafeEndpoint(endpoint: EngineEndpoint, name: string, euid = process.geteuid?.()): void {
  if (endpoint.kind !== "tcp" || endpoint.tls) return;
  if (isLoopbackHost(endpoint.host)) {
    if (euid !== 0) return;
    throw new SandboxRunError(
      "docker-unavailable",
      `Engine "${name}" at tcp://${endpoint.host}:${endpoint.port} would be reached without TLS, and this controller runs as root: any local user could listen on that port and answer as the engine.`,
      {
        hint: "Use the engine's unix socket (DOCKER_HOST=unix:///var/run/docker.sock, or unset), mutual TLS (DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH, or `tls` in the engines file), or ssh://.",
      },
    );
  }
  throw new SandboxRunError(
    "docker-unavailable",
    `Engine "${name}" at tcp://${endpoint.host}:${endpoint.port} would be reached without TLS: anyone on the network could read and drive it.`,
    {
      hint: "Use mutual TLS (DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH with ca.pem, cert.pem and key.pem, or `tls` in the engines file), or ssh://.",
    },
  );
}

/**
 * The endpoint the environment names, as the docker CLI reads it: DOCKER_HOST (unix://, tcp://,
 * ssh://; none means the local socket), DOCKER_TLS_VERIFY (any value but "" turns on mutual TLS)
 * and DOCKER_CERT_PATH (default ~/.docker). ssh:// uses ~/.ssh/known_hosts and the ssh agent or
 * the usual key files, like ssh itself.
 */
export function endpointFromEnv(env: Record<string, string | undefined> = process.env): EngineEndpoint {
  const host = env.DOCKER_HOST?.trim();
  if (!host) return { kind: "unix", socketPath: DEFAULT_SOCKET };
  if (host.startsWith("unix://")) return { kind: "unix", socketPath: host.slice("unix://".length) || DEFAULT_SOCKET };
  const url = parseUrl(host.includes("://") ? host : `tcp://${host}`, "DOCKER_HOST");
  const home = env.HOME ?? os.homedir();
  if (url.protocol === "ssh:") {
    // As ssh does: the agent when there is one, else the first of the usual key files.
    const keyFile = ["id_ed25519", "id_ecdsa", "id_rsa"]
      .map((name) => path.join(home, ".ssh", name))
      .find((file) => fs.existsSync(file));
    return {
      kind: "ssh",
      host: url.hostname,
      port: Number(url.port || 22),
      socketPath: DEFAULT_SOCKET,
      ssh: {
        user: decodeURIComponent(url.username) || env.USER || os.userInfo().username,
        knownHostsFile: path.join(home, ".ssh", "known_hosts"),
        ...(env.SSH_AUTH_SOCK ? { agentSocket: env.SSH_AUTH_SOCK } : keyFile ? { privateKeyFile: keyFile } : {}),
      },
    };
  }
  if (url.protocol !== "tcp:" && url.protocol !== "http:" && url.protocol !== "https:") {
    throw usageError(
      `DOCKER_HOST=${host} uses ${url.protocol.replace(/:$/, "")}://, which sandbox-run cannot reach.`,
      "Use unix://, tcp:// (with DOCKER_TLS_VERIFY=1 for another machine) or ssh://.",
    );
  }
  const tlsOn = Boolean(env.DOCKER_TLS_VERIFY) || url.protocol === "https:";
  // A relative folder would be read from the current one, which is often the repository under test:
  // whoever writes it would choose the CA the engine's link trusts and the client key.
  if (tlsOn && env.DOCKER_CERT_PATH && !path.isAbsolute(env.DOCKER_CERT_PATH)) {
    throw usageError(
      `DOCKER_CERT_PATH=${env.DOCKER_CERT_PATH} is a relative path: it would be read from the current folder.`,
      "Give the absolute path of the folder holding ca.pem, cert.pem and key.pem (outside any workspace).",
    );
  }
  const certDir = env.DOCKER_CERT_PATH || path.join(home, ".docker");
  return {
    kind: "tcp",
    host: url.hostname,
    port: Number(url.port || (tlsOn ? 2376 : 2375)),
    ...(tlsOn ? { tls: tlsFilesIn(certDir) } : {}),
  };
}

/** A path an engines file names, as it is read: relative to the file's folder, `~` the home folder. */
export function enginesFilePath(enginesFile: string, named: string): string {
  return path.resolve(path.dirname(path.resolve(enginesFile)), named.replace(/^~(?=\/|$)/, os.homedir()));
}

/** ca.pem, cert.pem and key.pem in a folder, as DOCKER_CERT_PATH holds them. */
export function tlsFilesIn(dir: string): TlsFiles {
  return { ca: path.join(dir, "ca.pem"), cert: path.join(dir, "cert.pem"), key: path.join(dir, "key.pem") };
}

function parseUrl(text: string, what: string): URL {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    // Reported below.
  }
  if (!url?.hostname)
    throw usageError(`${what}=${text} is not an address.`, "Write it like tcp://build-2:2376 or ssh://ci@build-2.");
  return url;
}
