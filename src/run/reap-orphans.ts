// Finds and removes what a dead controller left behind: its containers (on any engine, by label)
// and, for a root caller, the trees it lent to the sandbox uid (handed back to the caller), then
// its run folders. A container is an orphan when its owner process on this host no longer exists,
// or when it is past its deadline (plus grace) on any host; `gc --all` removes every container of ours.
import os from "node:os";
import type { Engine } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import {
  LABEL_DEADLINE,
  LABEL_HAND_BACK,
  LABEL_LENT_ROOTS,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_RUN_ID,
  SANDBOX_UID,
} from "../sandbox-contract.js";
import { handBackOrphanedTree } from "../workspace/ownership-lease.js";
import { processAlive } from "./run-dirs.js";

const DEADLINE_GRACE_MS = 60_000;

export interface ReapedContainer {
  id: string;
  runId?: string;
  reason: string;
}

/** Why a container with these labels is an orphan, or undefined while its controller may still need it. */
export function orphanReason(
  labels: Record<string, string>,
  context: { all?: boolean; host: string; now: number; alive: (pid: number) => boolean },
): string | undefined {
  if (context.all) return "gc --all";
  const pid = Number(labels[LABEL_OWNER_PID]);
  if (labels[LABEL_OWNER_HOST] === context.host && pid > 0 && !context.alive(pid))
    return `owner process ${pid} is gone`;
  const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
  if (Number.isFinite(deadline) && context.now > deadline + DEADLINE_GRACE_MS) return "past its deadline";
  return undefined;
}

export async function reapContainers(engine: Engine, options: { all?: boolean } = {}): Promise<ReapedContainer[]> {
  const containers = await engine.listContainers([`${LABEL_MANAGED}=true`]);
  const context = { all: options.all, host: os.hostname(), now: Date.now(), alive: processAlive };
  const reaped: ReapedContainer[] = [];
  const failed: string[] = [];
  for (const { id, labels } of containers) {
    const reason = orphanReason(labels, context);
    if (!reason) continue;
    try {
      await engine.removeContainer(id);
    } catch (error) {
      // One container the engine cannot kill yet (a fork bomb takes a while to die) must not stop
      // the others; it is reported below, and the next gc gets it. Its trees stay lent until then:
      // handing them back while its processes live would let them write as the caller.
      failed.push(`${id.slice(0, 12)}: ${(error as Error)?.message ?? String(error)}`);
      continue;
    }
    reaped.push({ id, runId: labels[LABEL_RUN_ID], reason });
    if (engine.sharesHostFilesystem) await handBackLentTrees(labels);
  }
  if (failed.length > 0) {
    throw new SandboxRunError(
      "docker-unavailable",
      `The engine could not remove ${failed.length} orphaned container(s): ${failed.join("; ")}`,
      {
        hint: "A container whose processes are still dying cannot be removed yet; run `sandbox-run gc` again in a minute (or `docker rm -f <id>`).",
      },
    );
  }
  return reaped;
}

/**
 * What a dead controller could not do itself for a root caller: hand every tree it lent to the
 * sandbox uid (workspace and writable roots, whatever the mode) back to the caller.
 */
async function handBackLentTrees(labels: Record<string, string>): Promise<void> {
  const handBack = /^(\d+):(\d+)$/.exec(labels[LABEL_HAND_BACK] ?? "");
  if (!handBack) return;
  const to = { uid: Number(handBack[1]), gid: Number(handBack[2]) };
  for (const root of lentRootsOf(labels)) {
    await handBackOrphanedTree(root, { uid: SANDBOX_UID, gid: SANDBOX_UID }, to);
  }
}

function lentRootsOf(labels: Record<string, string>): string[] {
  try {
    const roots: unknown = JSON.parse(labels[LABEL_LENT_ROOTS] ?? "[]");
    return Array.isArray(roots) ? roots.filter((r): r is string => typeof r === "string" && r.startsWith("/")) : [];
  } catch {
    return [];
  }
}
