// A Docker engine that cannot enforce the sandbox's limits (no memory or pids cgroup: rootless
// Docker on cgroup v1, a kernel booted without cgroup_enable=memory) accepts them, answers the
// create with "Limitation discarded" and runs the container without them. Its /info says so:
// such an engine is refused before anything is created, and doctor says why (review: a 256 MB
// sandbox allocated 700 MiB and ran 204 processes under a pids limit of 64 on such an engine).
import http from "node:http";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { assertEngineLimits, limitSupportOf, missingLimits } from "../../src/engine/engine-limits.js";
import { isSandboxRunError } from "../../src/errors.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-engine-limits-");
const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0)) await close();
});

/** A Docker engine on a unix socket whose /info says `info`; records the requests it gets. */
async function engineSaying(info: object) {
  const socketPath = path.join(dir(), "engine.sock");
  const requests: string[] = [];
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url?.replace(/^\/v[\d.]+/, "").split("?")[0]}`);
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => bodies.push(body));
    if (req.url?.includes("/_ping")) return res.end("OK");
    if (req.url?.includes("/version")) return res.end(JSON.stringify({ Version: "27.0.0", Components: [] }));
    if (req.url?.includes("/info")) return res.end(JSON.stringify(info));
    res.writeHead(201, { "content-type": "application/json" });
    res.end(JSON.stringify({ Id: "c0ffee", Warnings: [] }));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  open.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { engine: new DockerEngine({ name: "nolimits", endpoint: { kind: "unix", socketPath } }), requests, bodies };
}

const spec = (cpus?: number) => ({
  image: "x",
  entrypoint: ["true"],
  cmd: [],
  env: {},
  user: "65532:65532",
  labels: {},
  runtime: "runc",
  network: "none" as const,
  mounts: [],
  tmpfs: {},
  limits: { memoryMb: 256, pids: 64, ...(cpus !== undefined ? { cpus } : {}) },
  openStdin: false,
  init: false,
});

describe("an engine that cannot enforce the sandbox's limits", () => {
  it("is refused before any container is created, naming the limits and what to do", async () => {
    const { engine, requests } = await engineSaying({ MemoryLimit: false, PidsLimit: false, CpuCfsQuota: true });
    let error: unknown;
    try {
      await engine.createContainer(spec());
    } catch (thrown) {
      error = thrown;
    }
    expect(isSandboxRunError(error) && error.code).toBe("docker-unavailable");
    expect(isSandboxRunError(error) && error.shortMessage).toBe(
      `Engine "nolimits" cannot enforce the sandbox's memory, pids limits (its /info says so; it would run the container without them).`,
    );
    expect(isSandboxRunError(error) && error.hint).toContain("cgroup_enable=memory");
    expect(requests).not.toContain("POST /containers/create");
    expect((await engine.info()).limits).toEqual({ memory: false, pids: false, cpu: true, swap: true });
  });

  it("creates where the engine enforces them; a CPU limit only matters when the policy sets one", async () => {
    const { engine, requests } = await engineSaying({ MemoryLimit: true, PidsLimit: true, CpuCfsQuota: false });
    await engine.createContainer(spec());
    expect(requests).toContain("POST /containers/create");
    await expect(engine.createContainer(spec(0.5))).rejects.toThrow(/cannot enforce the sandbox's cpu limits/);
  });

  it("reads the engine's flags; an engine that says nothing (older ones) counts as enforcing", () => {
    expect(limitSupportOf({})).toEqual({ memory: true, pids: true, cpu: true, swap: true });
    expect(limitSupportOf({ SwapLimit: false }).swap).toBe(false);
    expect(missingLimits(limitSupportOf({ PidsLimit: false }), false)).toEqual(["pids"]);
    expect(missingLimits(limitSupportOf({ CpuCfsQuota: false }), false)).toEqual([]);
    expect(() => assertEngineLimits(limitSupportOf({ MemoryLimit: false }), "e", false)).toThrow(/memory limits/);
  });

  it("gives a container at most the engine's CPUs: a built-in policy's 2 on a one-CPU engine is 1, not a refused create", async () => {
    expect(limitSupportOf({ NCPU: 1 }).cpus).toBe(1);
    const { engine, bodies } = await engineSaying({ MemoryLimit: true, PidsLimit: true, CpuCfsQuota: true, NCPU: 1 });
    await engine.createContainer(spec(2));
    await engine.createContainer(spec(0.5));
    const nanoCpus = bodies
      .filter((b) => b.includes("HostConfig"))
      .map((b) => (JSON.parse(b) as { HostConfig: { NanoCpus?: number } }).HostConfig.NanoCpus);
    expect(nanoCpus).toEqual([1e9, 0.5e9]);
  });
});
