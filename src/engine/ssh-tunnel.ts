// An engine on another machine reached over ssh: ONE held ssh connection, and each Engine API
// request (attach and exec included) a stream-local forward to the engine's unix socket over it.
// docker-modem's own ssh:// transport opens a new ssh connection and runs `docker system
// dial-stdio` for every request: a full key exchange each time, and a docker CLI on the far side.
// The host key is checked against the configured key (or known_hosts) before anything is sent.
import fs from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";
import type { Client, ConnectConfig } from "ssh2";
import { SandboxRunError } from "../errors.js";
import { CallerFileError, MAX_ENGINE_FILE_BYTES, readCallerFile } from "../util/config-file.js";
import type { SshAccess } from "./engine-endpoint.js";
import { type KnownHostKey, knownHostKeys, parsePublicKeyLine } from "./known-hosts.js";

interface SshTunnelOptions {
  /** The engine's name, for messages. */
  name: string;
  host: string;
  port: number;
  ssh: SshAccess;
  /** The engine's socket on the far machine. */
  socketPath: string;
  env?: Record<string, string | undefined>;
}

export class SshTunnel {
  #client?: Client;
  #ready?: Promise<Client>;
  #closed = false;
  /** ssh connections opened so far (one, unless the link broke and was re-established). */
  connections = 0;
  /** Plain http over the forwarded streams; the socket-level security is ssh's. */
  readonly agent: http.Agent;

  constructor(private readonly options: SshTunnelOptions) {
    const agent = new http.Agent({ keepAlive: false });
    // Node's Agent accepts an asynchronous createConnection (result through the callback).
    (agent as unknown as { createConnection: unknown }).createConnection = (
      _options: unknown,
      callback: (error: Error | null, socket?: Duplex) => void,
    ) => {
      this.forward().then(
        (stream) => callback(null, stream),
        (error: Error) => callback(error),
      );
      return undefined;
    };
    this.agent = agent;
  }

  /** A new stream to the engine's socket over the held connection (connecting first if needed). */
  async forward(): Promise<Duplex> {
    const client = await this.connect();
    const stream = await new Promise<Duplex>((resolve, reject) =>
      client.openssh_forwardOutStreamLocal(this.options.socketPath, (error, channel) =>
        error
          ? reject(this.failure(`could not open ${this.options.socketPath} there (${error.message})`))
          : resolve(channel),
      ),
    );
    // http.ClientRequest treats its connection as a net.Socket; an ssh channel lacks these no-ops.
    const socket = stream as Duplex & Record<string, unknown>;
    for (const method of ["setNoDelay", "setKeepAlive", "setTimeout", "ref", "unref"]) {
      if (typeof socket[method] !== "function") socket[method] = () => socket;
    }
    return stream;
  }

  close(): void {
    this.#closed = true;
    this.#client?.end();
    this.#client = undefined;
    this.#ready = undefined;
    this.agent.destroy();
  }

  private connect(): Promise<Client> {
    if (this.#closed) return Promise.reject(this.failure("the connection was closed"));
    this.#ready ??= this.open().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  private async open(): Promise<Client> {
    const { host, port, ssh } = this.options;
    const accepted = this.acceptedHostKeys();
    const auth = this.authentication();
    // ssh2 is loaded with the first connection: only ssh:// engines need it.
    const { Client: SshClient } = createRequire(import.meta.url)("ssh2") as typeof import("ssh2");
    const client = new SshClient();
    let rejectedKey: string | undefined;
    const config: ConnectConfig = {
      host,
      port,
      username: ssh.user,
      ...auth,
      readyTimeout: 15_000,
      // A link that dies silently is noticed within ~45 s instead of at the next TCP timeout.
      keepaliveInterval: 15_000,
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        if (accepted.some((known) => known.blob.equals(key))) return true;
        rejectedKey = key.subarray(4, 4 + key.readUInt32BE(0)).toString("latin1");
        return false;
      },
    };
    await new Promise<void>((resolve, reject) => {
      client.once("ready", () => resolve());
      client.once("error", (error: Error) => {
        if (rejectedKey)
          reject(
            this.failure(
              `its host key (${rejectedKey}) is not the one configured: the machine may not be the one you meant`,
              "If the key really changed, check its fingerprint on the machine itself (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) and update `hostKey` or known_hosts.",
            ),
          );
        else reject(this.failure(error.message));
      });
      client.connect(config);
    });
    this.connections++;
    this.#client = client;
    // Every API request, attach and exec shares this one TCP connection: small writes (the relay's
    // frames, Pi's events) must not wait ~40 ms for the previous one's delayed ACK (Nagle).
    client.setNoDelay(true);
    // A connection that ends is forgotten: the next request opens a new one.
    client.once("close", () => {
      if (this.#client === client) {
        this.#client = undefined;
        this.#ready = undefined;
      }
    });
    client.on("error", () => {});
    return client;
  }

  private acceptedHostKeys(): KnownHostKey[] {
    const { host, port, ssh } = this.options;
    if (ssh.hostKey) {
      const key = parsePublicKeyLine(ssh.hostKey);
      if (!key) throw this.failure(`its hostKey is not a public key line ("ssh-ed25519 AAAA...")`);
      return [key];
    }
    const file = ssh.knownHostsFile ?? path.join(os.homedir(), ".ssh", "known_hosts");
    let text = "";
    try {
      text = readCallerFile(file, MAX_ENGINE_FILE_BYTES).toString("utf8");
    } catch (error) {
      // No file: no known key, reported below; one that is no regular file (a FIFO) is not read.
      if (!(error instanceof CallerFileError)) throw error;
    }
    const { accepted, revoked } = knownHostKeys(text, host, port);
    const usable = accepted.filter((key) => !revoked.some((r) => r.blob.equals(key.blob)));
    if (usable.length === 0) {
      throw this.failure(
        `${file} has no key for ${port === 22 ? host : `[${host}]:${port}`}, so the machine cannot be verified`,
        `Add its key after checking the fingerprint (\`ssh-keyscan -p ${port} ${host} >> ${file}\`), or set \`hostKey\` in the engines file.`,
      );
    }
    return usable;
  }

  private authentication(): Pick<ConnectConfig, "privateKey" | "agent"> {
    const { ssh } = this.options;
    const env = this.options.env ?? process.env;
    if (ssh.privateKeyFile) return { privateKey: this.readKey(ssh.privateKeyFile) };
    if (ssh.agentSocket) return { agent: ssh.agentSocket };
    if (env.SSH_AUTH_SOCK) return { agent: env.SSH_AUTH_SOCK };
    const home = env.HOME ?? os.homedir();
    for (const name of ["id_ed25519", "id_ecdsa", "id_rsa"]) {
      const file = path.join(home, ".ssh", name);
      if (fs.existsSync(file)) return { privateKey: this.readKey(file) };
    }
    throw this.failure(
      "there is no key to log in with",
      "Set `privateKey` in the engines file, start an ssh agent (SSH_AUTH_SOCK), or create ~/.ssh/id_ed25519.",
    );
  }

  private readKey(file: string): Buffer {
    try {
      return readCallerFile(file, MAX_ENGINE_FILE_BYTES);
    } catch (error) {
      const why = error instanceof CallerFileError ? error.reason : (error as NodeJS.ErrnoException).code;
      throw this.failure(`its private key ${file} cannot be read (${why})`);
    }
  }

  private failure(reason: string, hint?: string): SandboxRunError {
    const { name, host, port, ssh } = this.options;
    return new SandboxRunError(
      "docker-unavailable",
      `Engine "${name}" at ssh://${ssh.user}@${host}:${port} is not reachable: ${reason}.`,
      { hint: hint ?? "Check that `ssh` to the machine works and that its user may use the engine's socket." },
    );
  }
}
