// A unix socket in a tree a bind-mode sandbox sees is a door to the host process serving it: a
// bind mount (read-only too) still takes connect(), under runc and under gVisor alike (runsc runs
// with --host-uds=open, which the gateway's socket needs). A non-root caller's sandbox runs as the
// caller's uid, so an owner-only mode and the server's peer-uid check both pass: a project-local
// PostgreSQL (`.devenv/state/postgres`, 0700, peer auth) ran a program on the host at the sandbox's
// request (review, session 38, N2). A root caller's sandbox runs as SANDBOX_UID, and the lease keeps
// a socket's owner (ownership-lease.ts), but one that uid, its group or others may write is as open.
// Such a run does not start; copy mode never carries a socket into the sandbox.
import fs from "node:fs";
import path from "node:path";
import { usageError } from "../../errors.js";
import type { RunPlan } from "../../sandbox-contract.js";
import type { FoundRepositories } from "../../workspace/nested-repositories.js";
import type { ResolvedRun } from "./resolve-options.js";

interface SandboxIds {
  uid: number;
  gid: number;
}

const MAX_NAMED = 5;

/**
 * Whether a process of `ids` (no capabilities, no supplementary group: the sandbox's) may connect
 * to the socket: connect() needs write permission, judged by the owner's bits, else the group's,
 * else the others'.
 */
export function sandboxMayConnect(stat: fs.Stats, ids: SandboxIds): boolean {
  if (stat.uid === ids.uid) return (stat.mode & 0o200) !== 0;
  if (stat.gid === ids.gid) return (stat.mode & 0o020) !== 0;
  return (stat.mode & 0o002) !== 0;
}

/**
 * The check of one walked tree (run/plan/git-credentials.ts refuseNestedGitCredentials walks each
 * once) for a bind-mode plan; undefined in copy mode.
 */
export function refuseReachableSockets(planned: {
  plan: Pick<RunPlan, "workspaceMode" | "user" | "handBackTo">;
  run: Pick<ResolvedRun, "cwd" | "writableRoots">;
}): ((tree: string, found: FoundRepositories) => void) | undefined {
  const { plan, run } = planned;
  if (plan.workspaceMode !== "bind") return undefined;
  const [uid, gid] = plan.user.split(":").map(Number) as [number, number];
  const ids = { uid, gid };
  return (tree, found) => {
    const reachable: string[] = [];
    for (const socket of found.sockets) {
      let stat: fs.Stats;
      try {
        stat = fs.lstatSync(socket);
      } catch {
        continue; // Gone since it was listed.
      }
      if (stat.isSocket() && sandboxMayConnect(stat, ids)) reachable.push(describe(socket, tree, stat));
    }
    if (reachable.length === 0) return;
    const where =
      tree === run.cwd
        ? "The workspace"
        : run.writableRoots.includes(tree)
          ? `The writable root ${tree}`
          : `The read-only mount ${tree}`;
    const more = reachable.length > MAX_NAMED ? ` and ${reachable.length - MAX_NAMED} more` : "";
    // A root caller lends its trees to the sandbox uid; a non-root caller's sandbox is the caller.
    const who = plan.handBackTo
      ? `The sandbox (uid ${uid}) may write it, so the program serving it takes the sandbox's requests.`
      : "In bind mode the sandbox runs as your own uid, so the program serving it takes the sandbox's requests as yours (its peer-uid check passes).";
    throw usageError(
      `${where} holds ${reachable.length === 1 ? "a unix socket" : "unix sockets"} the sandbox could connect to: ${reachable.slice(0, MAX_NAMED).join(", ")}${more}. ${who}`,
      "Run with --workspace copy (sockets are not copied into the sandbox), or stop the program serving it or have it put its socket outside the trees the run lends (a socket left by a program that has stopped can be removed). A socket that appears while the run goes on is not checked (docs/security.md P7).",
    );
  };
}

function describe(socket: string, tree: string, stat: fs.Stats): string {
  const mode = (stat.mode & 0o7777).toString(8).padStart(4, "0");
  return `${path.relative(tree, socket)} (mode ${mode}, owner uid ${stat.uid})`;
}
