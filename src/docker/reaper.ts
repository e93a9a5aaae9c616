// Finds containers a dead controller left behind. A container is an orphan when its owner
// process on this host no longer exists, or when it is past its deadline (plus grace) on
// any host; `sandbox-run gc --all` removes every container of ours.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type Docker from "dockerode";
import { IMAGE_PATHS } from "../image/runner-image.js";
import { decodeLentRoots, handBackOrphanedTree } from "../workspace/ownership-lease.js";
import { SANDBOX_UID } from "../run/run-plan.js";
import type { DockerClient } from "./docker-engine.js";
import { isGoneError } from "./docker-engine.js";
import { SandboxRunError } from "../errors.js";
import {
  LABEL_DEADLINE,
  LABEL_HAND_BACK,
  LABEL_LENT_ROOTS,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_RUN_ID,
} from "./labels.js";

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

export async function reapContainers(
  docker: DockerClient,
  options: { all?: boolean } = {},
): Promise<ReapedContainer[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  const host = os.hostname();
  const reaped: ReapedContainer[] = [];
  const failed: string[] = [];
  for (const info of containers) {
    const labels = info.Labels ?? {};
    const pid = Number(labels[LABEL_OWNER_PID]);
    const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
    let reason: string | undefined;
    if (options.all) reason = "gc --all";
    else if (labels[LABEL_OWNER_HOST] === host && pid > 0 && !processAlive(pid))
      reason = `owner process ${pid} is gone`;
    else if (Number.isFinite(deadline) && Date.now() > deadline + DEADLINE_GRACE_MS) reason = "past its deadline";
    if (!reason) continue;
    try {
      await docker.getContainer(info.Id).remove({ force: true, v: true });
      reaped.push({ id: info.Id, runId: labels[LABEL_RUN_ID], reason });
    } catch (error) {
      // One container Docker cannot kill yet (a fork bomb takes a while to die) must not stop
      // the others; it is reported below, and the next gc gets it.
      if (!isGoneError(error)) failed.push(`${info.Id.slice(0, 12)}: ${(error as Error)?.message ?? String(error)}`);
      if (!isGoneError(error)) continue;
    }
    await handBackAfter(info);
  }
  if (failed.length > 0) {
    throw new SandboxRunError(
      "docker-unavailable",
      `Docker could not remove ${failed.length} orphaned container(s): ${failed.join("; ")}`,
      {
        hint: "A container whose processes are still dying cannot be removed yet; run `sandbox-run gc` again in a minute (or `docker rm -f <id>`).",
      },
    );
  }
  return reaped;
}

/**
 * What a dead controller could not do itself for a root caller: hand the trees it lent to the
 * sandbox uid back (the workspace in every mode, and the writable roots). Its run folder goes
 * with reapRunDirs. The container is gone by now (removed above, or already gone).
 */
async function handBackAfter(info: Docker.ContainerInfo): Promise<void> {
  const handBack = /^(\d+):(\d+)$/.exec(info.Labels?.[LABEL_HAND_BACK] ?? "");
  if (!handBack) return;
  const to = { uid: Number(handBack[1]), gid: Number(handBack[2]) };
  let roots = decodeLentRoots(info.Labels?.[LABEL_LENT_ROOTS]);
  if (roots.length === 0) {
    // Containers from before the lent-roots label: their read-write bind mounts.
    const socketDir = `${IMAGE_PATHS.socketDir}/`;
    roots = (info.Mounts ?? [])
      .filter((m) => m.Type === "bind" && m.RW && !m.Destination.startsWith(socketDir))
      .map((m) => m.Source);
  }
  for (const root of roots) {
    await handBackOrphanedTree(root, { uid: SANDBOX_UID, gid: SANDBOX_UID }, to).catch(() => {});
  }
}

/** Marker file in each run's host folder (sockets): owner pid and host name. */
export const RUN_DIR_MARKER = ".sandbox-run-owner";

/** Removes run folders in the temp dir whose owner process on this host is gone. */
export function reapRunDirs(tmpDir = os.tmpdir()): string[] {
  const removed: string[] = [];
  const host = os.hostname();
  for (const name of fs.readdirSync(tmpDir)) {
    if (!name.startsWith("sandbox-run-")) continue;
    const dir = path.join(tmpDir, name);
    let owner: string[];
    try {
      owner = fs.readFileSync(path.join(dir, RUN_DIR_MARKER), "utf8").split("\n");
    } catch {
      continue; // not a run folder (or not ours to judge)
    }
    const pid = Number(owner[0]);
    if (owner[1] === host && pid > 0 && !processAlive(pid)) {
      fs.rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    }
  }
  return removed;
}

export async function listManagedContainers(docker: DockerClient): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  return containers.map((c) => c.Id);
}
