// `doctor`'s end-to-end check of a runtime: start a container from the runner image that
// only runs `true`, under the same basic hardening a run gets, and time it. A runtime can be
// registered and still unable to start anything (a gVisor platform that hangs, a missing
// binary); this finds out before a real run does.
import os from "node:os";
import { performance } from "node:perf_hooks";
import type { DockerClient } from "./docker-engine.js";
import { LABEL_CREATED_AT, LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_RUN_ID } from "./labels.js";
import { SandboxContainer } from "./sandbox-container.js";

export type StartCheck = { ok: true; seconds: number } | { ok: false; reason: string };

export async function checkContainerStart(
  docker: DockerClient,
  image: string,
  runtime: string,
  timeoutMs = 30_000,
): Promise<StartCheck> {
  const started = performance.now();
  let container: SandboxContainer | undefined;
  try {
    container = await SandboxContainer.create(docker, {
      Image: image,
      Entrypoint: ["true"],
      Cmd: [],
      User: "65532:65532",
      // Labelled like a run's container, so gc finds it if this process dies mid-check.
      Labels: {
        [LABEL_MANAGED]: "true",
        [LABEL_RUN_ID]: `doctor-${runtime}-${process.pid}`,
        [LABEL_OWNER_PID]: String(process.pid),
        [LABEL_OWNER_HOST]: os.hostname(),
        [LABEL_CREATED_AT]: new Date().toISOString(),
      },
      HostConfig: {
        Runtime: runtime,
        NetworkMode: "none",
        ReadonlyRootfs: true,
        CapDrop: ["ALL"],
        SecurityOpt: ["no-new-privileges"],
        LogConfig: { Type: "none", Config: {} },
      },
    });
    const created = container;
    await created.start();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    const exit = await Promise.race([created.wait(), timedOut]).finally(() => clearTimeout(timer));
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
