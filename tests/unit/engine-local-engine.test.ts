// A run mounts host paths, so only an engine on this machine will do: remote ones are refused
// before any request, with a message that says why and what to do.
import net from "node:net";
import Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { assertLocalEngine, dockerUnavailable } from "../../src/engine/docker-connection.js";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";

function refusal(docker: Docker): SandboxRunError | undefined {
  try {
    assertLocalEngine(docker);
    return undefined;
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
}

const MODELS = {
  providers: {
    scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "unused", models: [{ id: "x" }] },
  },
};

describe("assertLocalEngine", () => {
  it.each([
    ["the default unix socket", {}],
    ["a unix socket path", { socketPath: "/run/user/1000/docker.sock" }],
    ["tcp to 127.0.0.1", { host: "127.0.0.1", port: 2375 }],
    ["tcp to localhost", { host: "localhost", port: 2375 }],
    ["tcp to [::1]", { host: "[::1]", port: 2375 }],
  ])("accepts %s", (_name, options) => {
    expect(refusal(new Docker(options as Docker.DockerOptions))).toBeUndefined();
  });

  it.each([
    ["tcp to another machine", { host: "10.0.0.5", port: 2376, protocol: "https" }, "https://10.0.0.5:2376"],
    ["ssh, even to localhost", { host: "localhost", protocol: "ssh", username: "me" }, "ssh://localhost"],
  ])("refuses %s, naming it", (_name, options, where) => {
    const error = refusal(new Docker(options as Docker.DockerOptions));
    expect(error?.code).toBe("docker-unavailable");
    expect(error?.shortMessage).toBe(
      `The Docker engine at ${where} is not on this machine; sandbox-run needs a local one.`,
    );
    expect(error?.hint).toMatch(/unset DOCKER_HOST/);
  });

  it("a run on a remote engine fails before any connection is made", async () => {
    let connections = 0;
    const listener = net.createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, "0.0.0.0", resolve));
    const port = (listener.address() as net.AddressInfo).port;
    // This machine's own address, not loopback: the kind of address a remote engine has.
    const docker = new Docker({ host: "0.0.0.0", port });
    const agent = new ContainerPiAgent({
      engine: new DockerEngine(docker),
      model: "scripted/x",
      models: MODELS,
      reapOrphans: false,
    });
    const error = await agent.run("task", { cwd: process.cwd() }).catch((e: unknown) => e);
    await new Promise<void>((resolve) => listener.close(() => resolve()));
    expect(isSandboxRunError(error) && error.code, String(error)).toBe("docker-unavailable");
    expect((error as SandboxRunError).shortMessage).toMatch(
      /^The Docker engine at http:\/\/0\.0\.0\.0:\d+ is not on this machine/,
    );
    expect(connections).toBe(0);
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
});
