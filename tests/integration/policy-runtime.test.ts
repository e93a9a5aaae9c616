// The runtime field on the real engine: one schema run on runc and on gVisor (runsc), with
// proof from inside that gVisor really is the kernel the sandbox talks to, and the doctor's
// report of how runsc is registered.
import { spawn } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { checkContainerStart } from "../../src/engine/start-check.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  bashThenFinal,
  containersOfRuns,
  docker,
  dockerAvailable,
  engine,
  eventLog,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

const cli = path.resolve(import.meta.dirname, "../../dist/cli/main.js");
const schema = {
  type: "object",
  properties: { files: { type: "integer" }, kernel: { type: "string" } },
  required: ["files", "kernel"],
  additionalProperties: false,
} as const;
const final = { files: 2, kernel: "checked" };
// What the kernel says about itself: gVisor reports its own fixed version; runc the host's
// (and CAP_SYSLOG is dropped, so reading it fails).
// Then the pids limit (read-only: 256) as work meets it: twelve node processes at once (a test
// runner's workers, ~11 threads each) run, and forks stop with EAGAIN below the limit. Under runsc
// the pids cgroup also counts gVisor's own threads, so before the limit moved into gVisor's kernel
// (RLIMIT_NPROC) the twelve failed gVisor's kernel and the run with it.
const FORK_UNTIL_REFUSED = `perl -e 'my @k; while (@k < 1000) { my $p = fork; if (!defined $p) { print "refused-after=", scalar(@k), " $!\\n"; last } if ($p == 0) { sleep 60; exit 0 } push @k, $p } kill "KILL", @k; waitpid($_, 0) for @k;'`;
const probe = [
  "ls | wc -l; cat /proc/version; dmesg 2>&1 | head -3",
  'for i in $(seq 1 12); do node -e "setTimeout(() => {}, 1500)" & done; wait; echo parallel=$?',
  FORK_UNTIL_REFUSED,
].join("; ");

describe.skipIf(!dockerAvailable())("runtime runc and runsc", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;

  beforeAll(async () => {
    server = await startModel({ runc: bashThenFinal(probe, final), runsc: bashThenFinal(probe, final) });
    agent = new ContainerPiAgent({ models: modelsFor(server, ["runc", "runsc"]), sandbox: "read-only" });
  });
  afterAll(async () => {
    await server?.close();
  });

  it.each(["runc", "runsc"] as const)("the same schema run succeeds on %s", async (runtime) => {
    const log = eventLog();
    const runtimes: Array<Promise<string>> = [];
    const details = await agent.runDetailed("count", {
      cwd: makeWorkspace({ "a.txt": "a", "b.txt": "b" }),
      model: `scripted/${runtime}`,
      schema,
      runtime,
      onEvent: (event) => {
        log.onEvent(event);
        // While the container exists, the engine's own record says which runtime runs it.
        if (event.type === "container.created") {
          runtimes.push(
            docker
              .getContainer(String(event.data.containerId))
              .inspect()
              .then((i) => i.HostConfig.Runtime ?? ""),
          );
        }
      },
    });
    expect(details.result).toEqual(final);
    expect(await Promise.all(runtimes)).toEqual([runtime]);
    const out = lastToolResult(server, runtime);
    expect(out).toMatch(/^2\n/);
    expect(out).toContain("parallel=0");
    const refused = /refused-after=(\d+) Resource temporarily unavailable/.exec(out);
    expect(refused, out).not.toBeNull();
    expect(Number(refused![1])).toBeLessThan(256);
    if (runtime === "runsc") {
      // gVisor's kernel, and the sandbox's seccomp profile refuses syslog (dmesg) there too.
      expect(out).toContain("Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016");
      expect(out).toMatch(/dmesg: read kernel buffer failed: Operation not permitted/);
    } else {
      expect(out).not.toContain("gVisor");
      expect(out).toMatch(/dmesg: read kernel buffer failed: Operation not permitted/);
    }
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("doctor reports runsc as registered with the arguments sandbox-run needs, and a container starting on each runtime", async () => {
    const run = await new Promise<{ status: number | null; stderr: string; pid?: number }>((resolve, reject) => {
      const child = spawn(process.execPath, [cli, "doctor"], { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      child.on("error", reject);
      child.on("close", (status) => resolve({ status, stderr, pid: child.pid }));
    });
    expect(run.stderr).toMatch(/ok {4}gVisor runtime runsc is registered \(.*--host-uds=open.*\)\n/);
    expect(run.stderr).toMatch(/ok {4}a hardened container starts and exits on runc \(\d+\.\d\d s\)/);
    expect(run.stderr).toMatch(/ok {4}a hardened container starts and exits on runsc \(\d+\.\d\d s\)/);
    expect(run.status).toBe(0);
    // The check containers are labelled with doctor's pid, and gone when it ends.
    expect(await containersOfRuns([`doctor-runc-${run.pid}`, `doctor-runsc-${run.pid}`])).toEqual([]);
  });
});

describe.skipIf(!dockerAvailable())("doctor's container start check", () => {
  it("a runtime the engine does not know fails the check with Docker's reason, and leaves nothing", async () => {
    const check = await checkContainerStart(engine, inject("runnerImage"), "no-such-runtime");
    expect(check.ok).toBe(false);
    expect(!check.ok && check.reason).toMatch(/no-such-runtime/);
    expect(await containersOfRuns([`doctor-no-such-runtime-${process.pid}`])).toEqual([]);
  });
});
