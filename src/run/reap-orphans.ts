// Finds and removes what a dead controller left behind: its containers (on any engine, by label)
// and, for a root caller, the trees it lent to the sandbox uid (handed back to the caller), then
// its run folders. A container is an orphan when its owner process on this host no longer exists,
// or when it is past its deadline (plus grace) on any host; `gc --all` removes every container of ours.
// A warm sandbox (made before any call) is one too once it stopped by itself after its idle deadline:
// a live controller would have claimed it before, and never claims a stopped one.
import fs from "node:fs";
import os from "node:os";
import type { Engine } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import {
  LABEL_DEADLINE,
  LABEL_HAND_BACK,
  LABEL_IDLE_DEADLINE,
  LABEL_LENT_ROOTS,
  LABEL_MANAGED,
  LABEL_OWNER_HOST,
  LABEL_OWNER_PID,
  LABEL_RUN_ID,
  LABEL_WARM,
  SANDBOX_UID,
} from "../sandbox-contract.js";
import { handBackOrphanedTree } from "../workspace/ownership-lease.js";
import { processAlive } from "./run-dirs.js";

const DEADLINE_GRACE_MS = 60_000;

export interface ReapedContainer {
  id: string;
  runId?: string;
  reason: string;
  /** Lent trees that could not be handed back (path: why). */
  notHandedBack?: string[];
}

/** Why a container with these labels is an orphan, or undefined while its controller may still need it. */
export function orphanReason(
  labels: Record<string, string>,
  context: { all?: boolean; host: string; now: number; alive: (pid: number) => boolean },
  state?: string,
): string | undefined {
  if (context.all) return "gc --all";
  const warm = labels[LABEL_WARM] === "true" ? "warm sandbox: " : "";
  const pid = Number(labels[LABEL_OWNER_PID]);
  if (labels[LABEL_OWNER_HOST] === context.host && pid > 0 && !context.alive(pid))
    return `${warm}owner process ${pid} is gone`;
  const deadline = Date.parse(labels[LABEL_DEADLINE] ?? "");
  if (Number.isFinite(deadline) && context.now > deadline + DEADLINE_GRACE_MS) return `${warm}past its deadline`;
  const idle = Date.parse(labels[LABEL_IDLE_DEADLINE] ?? "");
  if (
    warm &&
    state !== undefined &&
    state !== "running" &&
    Number.isFinite(idle) &&
    context.now > idle + DEADLINE_GRACE_MS
  )
    return `${warm}stopped at its idle deadline`;
  return undefined;
}

export async function reapContainers(engine: Engine, options: { all?: boolean } = {}): Promise<ReapedContainer[]> {
  const containers = await engine.listContainers([`${LABEL_MANAGED}=true`]);
  const context = { all: options.all, host: os.hostname(), now: Date.now(), alive: processAlive };
  const reaped: ReapedContainer[] = [];
  const failed: string[] = [];
  for (const { id, labels, state } of containers) {
    const reason = orphanReason(labels, context, state);
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
    const notHandedBack = engine.sharesHostFilesystem ? await handBackLentTrees(labels) : [];
    reaped.push({ id, runId: labels[LABEL_RUN_ID], reason, ...(notHandedBack.length ? { notHandedBack } : {}) });
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
async function handBackLentTrees(labels: Record<string, string>): Promise<string[]> {
  const handBack = /^(\d+):(\d+)$/.exec(labels[LABEL_HAND_BACK] ?? "");
  if (!handBack) return [];
  const failed: string[] = [];
  const to = { uid: Number(handBack[1]), gid: Number(handBack[2]) };
  for (const root of lentRootsOf(labels)) {
    // A tree deleted since (a temporary workspace) has nothing to hand back; a tree that cannot be
    // walked must not keep the reaper from the others.
    if (!fs.existsSync(root)) continue;
    await handBackOrphanedTree(root, { uid: SANDBOX_UID, gid: SANDBOX_UID }, to).catch((error: Error) =>
      failed.push(`${root}: ${error.message}`),
    );
  }
  return failed;
}

function lentRootsOf(labels: Record<string, string>): string[] {
  try {
    const roots: unknown = JSON.parse(labels[LABEL_LENT_ROOTS] ?? "[]");
    return Array.isArray(roots) ? roots.filter((r): r is string => typeof r === "string" && r.startsWith("/")) : [];
  } catch {
    return [];
  }
}
