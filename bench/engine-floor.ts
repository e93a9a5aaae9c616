// The floor through the Engine API: one container that runs `true`, driven like sandbox-run
// drives Pi's (create, attach before start, start, wait, drain, remove), without the CLI.
// "plain" uses bare options (with and without the default bridge network); "hardened" uses
// the exact create options of a sandbox-run run (read-only root, no capabilities, init, tmpfs,
// limits, mounts, no network) through the engine seam.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { DockerClient } from "../src/engine/docker-connection.js";
import type { ContainerSpec, Engine } from "../src/engine/engine.js";
import { loadPolicy } from "../src/policy/load-policy.js";
import { buildRunPlan } from "../src/run/plan/build-run-plan.js";
import { containerSpecOf } from "../src/run/plan/container-spec.js";
import { BENCH_LABEL } from "./docker-recipe.js";

async function drained(stream: NodeJS.ReadableStream): Promise<void> {
  await new Promise<void>((resolve) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", () => resolve());
    stream.resume();
  });
}

/** Bare options, as `docker run` sends them; `network: "none"` takes the bridge set-up out. */
export async function plainEngineTrue(docker: DockerClient, image: string, network?: "none"): Promise<number> {
  const started = performance.now();
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: ["true"],
    Cmd: [],
    Labels: { [BENCH_LABEL]: "" },
    AttachStdout: true,
    AttachStderr: true,
    ...(network ? { NetworkDisabled: true, HostConfig: { NetworkMode: network } } : {}),
  });
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const done = drained(stream);
    await container.start();
    const result = (await container.wait()) as { StatusCode: number };
    await done;
    if (result.StatusCode !== 0) throw new Error(`true exited with ${result.StatusCode}`);
  } finally {
    await container.remove({ force: true, v: true });
  }
  return performance.now() - started;
}

/** Create options of a real workspace-write run, with `true` instead of the launcher. */
export function hardenedTrueOptions(image: string, workspace: string, runDir: string): ContainerSpec {
  fs.writeFileSync(path.join(runDir, "gateway.sock"), ""); // the bind mount's source must exist
  const plan = buildRunPlan({
    runId: `bench${Date.now().toString(16)}`,
    image,
    policy: loadPolicy("workspace-write"),
    model: "scripted/none",
    cwd: workspace,
    writableRoots: [],
    readOnlyMounts: [],
    runDir,
    caller: { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 },
    sandboxEnv: {},
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 60_000,
    owner: { pid: process.pid, host: os.hostname() },
    now: new Date(),
  });
  return { ...containerSpecOf({ ...plan, entrypoint: ["true"], piArgs: [] }), name: undefined };
}

export async function hardenedEngineTrue(engine: Engine, spec: ContainerSpec): Promise<number> {
  const started = performance.now();
  const container = await engine.createContainer(spec);
  try {
    const streams = await container.attach();
    const done = Promise.all([drained(streams.stdout), drained(streams.stderr)]);
    await container.start();
    streams.stdin.end();
    const exit = await container.wait();
    await done;
    if (exit.exitCode !== 0) throw new Error(`true exited with ${exit.exitCode}`);
  } finally {
    await container.remove();
  }
  return performance.now() - started;
}
