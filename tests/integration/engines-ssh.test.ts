// ssh:// engines against a real OpenSSH server (tests/support/ssh-server.ts) forwarding to this
// host's Docker socket: every Engine API request, attach and exec included, rides ONE held ssh
// connection (docker-modem's own transport opens one per request), and the host key is checked
// against the configured key or known_hosts before anything is sent.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { endpointFromEnv, type SshAccess } from "../../src/engine/engine-endpoint.js";
import type { SandboxRunError } from "../../src/errors.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { containerLabels, SANDBOX_UID } from "../../src/sandbox-contract.js";
import { dockerAvailable } from "../support/harness.js";
import { type SshServer, sshServerAvailable, startSshServer } from "../support/ssh-server.js";

const USER = `${SANDBOX_UID}:${SANDBOX_UID}`;

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

describe.skipIf(!dockerAvailable() || (!sshServerAvailable() && !process.env.CI))("an engine over ssh://", () => {
  let server: SshServer;
  const engines: DockerEngine[] = [];

  const sshEngine = (ssh: Partial<SshAccess> = {}) => {
    const engine = new DockerEngine({
      name: "over-ssh",
      endpoint: {
        kind: "ssh",
        host: "127.0.0.1",
        port: server.port,
        socketPath: "/var/run/docker.sock",
        ssh: { user: server.user, privateKeyFile: server.clientKeyFile, hostKey: server.hostKey, ...ssh },
      },
    });
    engines.push(engine);
    return engine;
  };

  beforeAll(async () => {
    server = await startSshServer();
  });

  afterAll(async () => {
    for (const engine of engines) engine.close();
    await server?.stop();
  });

  it("carries ping, info, image, create/attach/exec/wait/remove over one ssh connection", async () => {
    const before = server.connections();
    const engine = sshEngine();
    expect(engine.sharesHostFilesystem).toBe(false);
    await Promise.all([engine.ping(), engine.ping(), engine.info()]);
    expect(await engine.imageLabels(runnerImageSpec().tag)).toBeDefined();
    const container = await engine.createContainer({
      image: runnerImageSpec().tag,
      entrypoint: ["/bin/sh", "-c", "cat; echo stdin-closed"],
      cmd: [],
      env: {},
      user: USER,
      labels: containerLabels({
        runId: `ssh-${process.pid}`,
        pid: process.pid,
        host: os.hostname(),
        createdAt: new Date(),
      }),
      runtime: "runc",
      network: "none",
      mounts: [],
      tmpfs: {},
      limits: { memoryMb: 128, pids: 64 },
      openStdin: true,
      init: true,
    });
    try {
      const streams = await container.attach();
      await container.start();
      const output = readAll(streams.stdout);
      const execs = await Promise.all(
        [1, 2, 3].map(async (n) => {
          const exec = await container.exec({ cmd: ["/bin/sh", "-c", `cat; echo " exec ${n}"`], user: USER });
          exec.stdin.end(`input ${n}`);
          return [await readAll(exec.stdout), await exec.exit] as const;
        }),
      );
      expect(execs).toEqual([
        ["input 1 exec 1\n", 0],
        ["input 2 exec 2\n", 0],
        ["input 3 exec 3\n", 0],
      ]);
      streams.stdin.end("over the tunnel\n");
      expect(await output).toBe("over the tunnel\nstdin-closed\n");
      expect((await container.wait()).exitCode).toBe(0);
    } finally {
      await container.remove();
    }
    // Dozens of API requests, four hijacked streams: one TCP connection, one ssh session.
    expect(server.connections() - before).toBe(1);
    expect(engine.sshConnections).toBe(1);
  });

  it("refuses a machine whose host key is not the configured one, before logging in", async () => {
    const other = fs.readFileSync(`${server.clientKeyFile}.pub`, "utf8").trim();
    const logins = () =>
      (fs.readFileSync(path.join(server.dir, "sshd.log"), "utf8").match(/Accepted publickey/g) ?? []).length;
    await sshEngine().ping(); // a login with the right key, so the log shows what one looks like
    const loginsBefore = logins();
    const engine = sshEngine({ hostKey: other });
    const error = (await engine.ping().catch((e: unknown) => e)) as SandboxRunError;
    expect(error.code).toBe("docker-unavailable");
    expect(error.shortMessage).toBe(
      `Engine "over-ssh" at ssh://${server.user}@127.0.0.1:${server.port} is not reachable: its host key (ssh-ed25519) is not the one configured: the machine may not be the one you meant.`,
    );
    // The key exchange stopped at the host key: the client never authenticated.
    expect(logins()).toBe(loginsBefore);
    expect(loginsBefore).toBeGreaterThan(0);
  });

  it("finds the host key in known_hosts as [host]:port, and says how to add a missing one", async () => {
    const knownHosts = path.join(server.dir, "known_hosts");
    fs.writeFileSync(knownHosts, `[127.0.0.1]:${server.port} ${server.hostKey}\n`);
    await sshEngine({ hostKey: undefined, knownHostsFile: knownHosts }).ping();
    const empty = path.join(server.dir, "known_hosts.empty");
    fs.writeFileSync(empty, `127.0.0.1 ${server.hostKey}\n`); // port 22's entry is not this port's
    const error = (await sshEngine({ hostKey: undefined, knownHostsFile: empty })
      .ping()
      .catch((e: unknown) => e)) as SandboxRunError;
    expect(error.shortMessage).toContain(`${empty} has no key for [127.0.0.1]:${server.port}`);
    expect(error.hint).toContain(`ssh-keyscan -p ${server.port} 127.0.0.1 >> ${empty}`);
  });

  it("DOCKER_HOST=ssh://user@host:port works as for the docker CLI (~/.ssh/known_hosts and key)", async () => {
    const home = path.join(server.dir, "home");
    fs.mkdirSync(path.join(home, ".ssh"), { recursive: true });
    fs.copyFileSync(server.clientKeyFile, path.join(home, ".ssh", "id_ed25519"));
    fs.writeFileSync(path.join(home, ".ssh", "known_hosts"), `[127.0.0.1]:${server.port} ${server.hostKey}\n`);
    // No SSH_AUTH_SOCK: the key file in that HOME is used, as ssh would.
    const endpoint = endpointFromEnv({ DOCKER_HOST: `ssh://${server.user}@127.0.0.1:${server.port}`, HOME: home });
    const engine = new DockerEngine({ endpoint });
    engines.push(engine);
    await engine.ping();
    expect(engine.address).toBe(`ssh://${server.user}@127.0.0.1:${server.port}`);
  });
});
