// `doctor`'s end-to-end check of a runtime: start a container from the runner image that only runs
// `true`, with the hardening every container gets, and time it. A runtime can be registered and
// still unable to start anything (a gVisor platform that hangs, a missing binary); this finds out
// before a real run does.
import os from "node:os";
import { performance } from "node:perf_hooks";
import { containerLabels, SANDBOX_UID } from "../sandbox-contract.js";
import { pidnsField } from "../util/own-pid-namespace.js";
import type { RunnerPlatform } from "../util/platform.js";
import type { Engine, EngineContainer } from "./engine.js";

type StartCheck = { ok: true; seconds: number } | { ok: false; reason: string };

export async function checkContainerStart(
  engine: Engine,
  image: string,
  runtime: string,
  timeoutMs = 30_000,
  /** Another platform than the engine's own: `true` then runs under its emulator. */
  platform?: RunnerPlatform,
  /** The check container's run id label (a caller that must find it again gives one of its own). */
  runId = `doctor-${runtime}-${process.pid}`,
): Promise<StartCheck> {
  const started = performance.now();
  let container: EngineContainer | undefined;
  try {
    container = await engine.createContainer({
      image,
      entrypoint: ["true"],
      cmd: [],
      env: {},
      user: `${SANDBOX_UID}:${SANDBOX_UID}`,
      // Labelled like a run's container, so gc finds it if this process dies mid-check.
      labels: containerLabels({
        runId,
        pid: process.pid,
        host: os.hostname(),
        ...pidnsField(),
        createdAt: new Date(),
      }),
      runtime,
      network: "none",
      mounts: [],
      tmpfs: {},
      limits: { memoryMb: 256, pids: 64 },
      openStdin: false,
      // As a run's container: an engine without its init (Podman without catatonit) fails here.
      init: true,
      ...(platform ? { platform } : {}),
    });
    await container.start();
    const exit = await container.wait(AbortSignal.timeout(timeoutMs)).catch(() => "timeout" as const);
    if (exit === "timeout")
      return { ok: false, reason: `a container did not finish \`true\` within ${timeoutMs / 1000} s` };
    if (exit.exitCode !== 0) return { ok: false, reason: `\`true\` exited with code ${exit.exitCode}` };
    return { ok: true, seconds: Math.round(performance.now() - started) / 1000 };
  } catch (error) {
    return { ok: false, reason: ((error as Error)?.message ?? String(error)).trim().split("\n")[0]! };
  } finally {
    await container?.remove().catch(() => {});
  }
}
