// Engines are reached as Docker's conventions say (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH),
// plain tcp never leaves the machine, and an engine on another machine is never handed a host path.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { dockerUnavailable } from "../../src/engine/docker-connection.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import {
  assertSafeEndpoint,
  endpointFromEnv,
  sharesHostFilesystemByDefault,
} from "../../src/engine/engine-endpoint.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";

const MODELS = {
  providers: {
    scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "unused", models: [{ id: "x" }] },
  },
};

/** A port on this machine that counts the connections made to it. */
async function countingListener() {
  let connections = 0;
  const listener = net.createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, "0.0.0.0", resolve));
  return {
    port: (listener.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => listener.close(() => resolve())),
  };
}

describe("endpointFromEnv", () => {
  it("reads DOCKER_HOST like the docker CLI", () => {
    expect(endpointFromEnv({})).toEqual({ kind: "unix", socketPath: "/var/run/docker.sock" });
    expect(endpointFromEnv({ DOCKER_HOST: "unix:///run/user/1000/docker.sock" })).toEqual({
      kind: "unix",
      socketPath: "/run/user/1000/docker.sock",
    });
    expect(endpointFromEnv({ DOCKER_HOST: "tcp://127.0.0.1:2375" })).toEqual({
      kind: "tcp",
      host: "127.0.0.1",
      port: 2375,
    });
    expect(
      endpointFromEnv({ DOCKER_HOST: "tcp://build-2", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: "/certs" }),
    ).toEqual({
      kind: "tcp",
      host: "build-2",
      port: 2376,
      tls: { ca: "/certs/ca.pem", cert: "/certs/cert.pem", key: "/certs/key.pem" },
    });
    // Relative, it would be read from the current folder (often the repository under test): refused.
    expect(() =>
      endpointFromEnv({ DOCKER_HOST: "tcp://build-2", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: "certs/build-2" }),
    ).toThrow(/DOCKER_CERT_PATH=certs\/build-2 is a relative path/);
    expect(endpointFromEnv({ DOCKER_HOST: "ssh://ci@build-3:2222", HOME: "/nonexistent/ci" })).toEqual({
      kind: "ssh",
      host: "build-3",
      port: 2222,
      socketPath: "/var/run/docker.sock",
      ssh: { user: "ci", knownHostsFile: "/nonexistent/ci/.ssh/known_hosts" },
    });
  });

  it("refuses a scheme it cannot reach, and an address that is none", () => {
    expect(() => endpointFromEnv({ DOCKER_HOST: "fd://3" })).toThrow(/cannot reach/);
    expect(() => endpointFromEnv({ DOCKER_HOST: "tcp://" })).toThrow(/is not an address/);
  });

  it("only a unix socket or loopback tcp shares this machine's files by default", () => {
    expect(sharesHostFilesystemByDefault({ kind: "unix", socketPath: "/x" })).toBe(true);
    expect(sharesHostFilesystemByDefault({ kind: "tcp", host: "localhost", port: 2375 })).toBe(true);
    expect(sharesHostFilesystemByDefault({ kind: "tcp", host: "[::1]", port: 2375 })).toBe(true);
    expect(
      sharesHostFilesystemByDefault({ kind: "tcp", host: "10.0.0.5", port: 2376, tls: { ca: "", cert: "", key: "" } }),
    ).toBe(false);
    expect(
      sharesHostFilesystemByDefault({ kind: "ssh", host: "localhost", port: 22, socketPath: "/s", ssh: { user: "u" } }),
    ).toBe(false);
  });
});

describe("plain tcp to another machine", () => {
  it("is refused before any connection is made, naming the engine and what to use instead", async () => {
    const listener = await countingListener();
    // This machine's own address, not loopback: the kind of address a remote engine has.
    const engine = new DockerEngine({ endpoint: { kind: "tcp", host: "0.0.0.0", port: listener.port } });
    const agent = new ContainerPiAgent({ engine, model: "scripted/x", models: MODELS, reapOrphans: false });
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "engine-endpoints-"));
    const error = await agent.run("task", { cwd }).catch((e: unknown) => e);
    fs.rmSync(cwd, { recursive: true });
    await listener.close();
    expect(isSandboxRunError(error) && error.code, String(error)).toBe("docker-unavailable");
    expect((error as SandboxRunError).shortMessage).toBe(
      `Engine "local" at tcp://0.0.0.0:${listener.port} would be reached without TLS: anyone on the network could read and drive it.`,
    );
    expect((error as SandboxRunError).hint).toMatch(/DOCKER_TLS_VERIFY=1/);
    expect(listener.connections()).toBe(0);
  });

  it("to loopback: allowed for an unprivileged controller, refused for root (any local user can take the port)", () => {
    const loopback = { kind: "tcp", host: "127.0.0.1", port: 2375 } as const;
    expect(() => assertSafeEndpoint(loopback, "local", 1000)).not.toThrow();
    expect(() => assertSafeEndpoint({ ...loopback, tls: { ca: "", cert: "", key: "" } }, "local", 0)).not.toThrow();
    expect(() => assertSafeEndpoint({ kind: "unix", socketPath: "/var/run/docker.sock" }, "local", 0)).not.toThrow();
    const refused = (() => {
      try {
        assertSafeEndpoint(loopback, "local", 0);
      } catch (error) {
        return error as SandboxRunError;
      }
    })();
    expect(refused?.code).toBe("docker-unavailable");
    expect(refused?.shortMessage).toBe(
      'Engine "local" at tcp://127.0.0.1:2375 would be reached without TLS, and this controller runs as root: any local user could listen on that port and answer as the engine.',
    );
    expect(refused?.hint).toMatch(/unix socket.*DOCKER_TLS_VERIFY=1.*`tls` in the engines file.*ssh:\/\//);
  });

  it.runIf(process.geteuid?.() === 0)("to loopback as root: gc's engine sends nothing to the port", async () => {
    const listener = await countingListener();
    const engine = new DockerEngine({ endpoint: { kind: "tcp", host: "127.0.0.1", port: listener.port } });
    const error = await engine.listContainers([]).catch((e: unknown) => e);
    await listener.close();
    expect((error as SandboxRunError).shortMessage).toMatch(/this controller runs as root/);
    expect(listener.connections()).toBe(0);
  });

  it("DOCKER_HOST with DOCKER_TLS_VERIFY makes a TLS client from DOCKER_CERT_PATH, and says which file is missing", () => {
    const env = { DOCKER_HOST: "tcp://10.0.0.5:2376", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: "/nonexistent" };
    expect(() => new DockerEngine({ endpoint: endpointFromEnv(env) })).toThrow(
      /the TLS ca file \/nonexistent\/ca\.pem cannot be read \(it does not exist\)/,
    );
  });

  it("a TLS file that is a FIFO is refused at once, not waited on (session 35's second review: the CLI hung)", () => {
    const certs = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-tls-fifo-"));
    try {
      execFileSync("mkfifo", [path.join(certs, "ca.pem")]);
      const env = { DOCKER_HOST: "tcp://10.0.0.5:2376", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certs };
      expect(() => new DockerEngine({ endpoint: endpointFromEnv(env) })).toThrow(
        /the TLS ca file .*ca\.pem cannot be read \(it is not a regular file \(a FIFO\)\)/,
      );
    } finally {
      fs.rmSync(certs, { recursive: true, force: true });
    }
  });
});

describe("an engine on another machine", () => {
  it("is never handed a host path to mount: the run is refused before any request", async () => {
    const listener = await countingListener();
    const engine = new DockerEngine({
      name: "far",
      endpoint: { kind: "tcp", host: "127.0.0.1", port: listener.port },
      sharesHostFilesystem: false,
    });
    const error = await engine
      .createContainer({
        image: "x",
        entrypoint: ["true"],
        cmd: [],
        env: {},
        user: "65532:65532",
        labels: {},
        runtime: "runc",
        network: "none",
        mounts: [{ hostPath: "/home/me/repo", containerPath: "/home/me/repo", readOnly: false }],
        tmpfs: {},
        limits: { memoryMb: 64, pids: 16 },
        openStdin: false,
        init: false,
      })
      .catch((e: unknown) => e);
    await listener.close();
    expect((error as SandboxRunError).code).toBe("usage");
    expect((error as SandboxRunError).shortMessage).toBe(
      `Engine "far" (tcp://127.0.0.1:${listener.port}) is on another machine: /home/me/repo cannot be mounted there.`,
    );
    expect(listener.connections()).toBe(0);
  });
});

describe("dockerUnavailable", () => {
  it("says how to get access when the socket refuses this user (EACCES)", () => {
    const error = dockerUnavailable(
      Object.assign(new Error("connect EACCES /var/run/docker.sock"), { code: "EACCES" }),
    );
    expect(error.code).toBe("docker-unavailable");
    expect(error.shortMessage).toMatch(/\(EACCES\)\.$/);
    expect(error.hint).toMatch(/docker group/);
  });

  it("says how to start the engine when nothing listens (ENOENT, ECONNREFUSED)", () => {
    for (const code of ["ENOENT", "ECONNREFUSED"]) {
      const error = dockerUnavailable(Object.assign(new Error(code), { code }));
      expect(error.hint).toMatch(/Start the engine/);
      expect(error.hint).not.toMatch(/docker group/);
    }
  });

  it("names an engine of an engines file and where it is", () => {
    const error = dockerUnavailable(Object.assign(new Error("x"), { code: "ECONNREFUSED" }), {
      name: "build-2",
      endpoint: { kind: "tcp", host: "10.0.0.5", port: 2376, tls: { ca: "", cert: "", key: "" } },
    });
    expect(error.shortMessage).toBe('Engine "build-2" at tcp://10.0.0.5:2376 (TLS) is not reachable (ECONNREFUSED).');
  });
});
