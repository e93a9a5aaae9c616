// Finds containers a dead controller left behind. A container is an orphan when its owner
// process on this host no longer exists, or when it is past its deadline (plus grace) on
// any host; `sandbox-run gc --all` removes every container of ours.
import os from "node:os";
import type { DockerClient } from "./docker-engine.js";
import { isGoneError } from "./docker-engine.js";
import { LABEL_DEADLINE, LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_RUN_ID } from "./labels.js";

const DEADLINE_GRACE_MS = 60_000;

export interface ReapedContainer {
  id: string;
  runId?: string;
  reason: string;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export async function reapContainers(docker: DockerClient, options: { all?: boolean } = {}): Promise<ReapedContainer[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  const host = os.hostname();
  const reaped: ReapedContainer[] = [];
  for (const info of containers) {
    const labels = info.Labels ?? {};
    const pid = Number(labels[LABEL_OWNER_PID]);
    const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
    let reason: string | undefined;
    if (options.all) reason = "gc --all";
    else if (labels[LABEL_OWNER_HOST] === host && pid > 0 && !processAlive(pid)) reason = `owner process ${pid} is gone`;
    else if (Number.isFinite(deadline) && Date.now() > deadline + DEADLINE_GRACE_MS) reason = "past its deadline";
    if (!reason) continue;
    try {
      await docker.getContainer(info.Id).remove({ force: true, v: true });
      reaped.push({ id: info.Id, runId: labels[LABEL_RUN_ID], reason });
    } catch (error) {
      if (!isGoneError(error)) throw error;
    }
  }
  return reaped;
}

export async function listManagedContainers(docker: DockerClient): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  return containers.map((c) => c.Id);
}
