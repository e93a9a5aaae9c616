// What a failed run's evidence means, in words: which limit an exit points to, what to do about a
// tripped limit, why Pi or the launcher exited. Pure functions over the evidence.
import { LAUNCHER_EXIT } from "../sandbox-contract.js";

/** A limit the container's exit (or its stderr) shows was hit, if any. */
export function limitFromExit(
  exit: { exitCode: number; oomKilled: boolean },
  stderr: string,
): { limit: string; message: string } | undefined {
  if (exit.oomKilled)
    return { limit: "memory", message: "The sandbox ran out of memory and was killed (memory limit)." };
  // Words on stderr are the sandbox's to write (/proc/1/fd/2): they name a limit only for a run
  // that failed by its exit, never turn one whose model answered into a failure.
  if (/ENOSPC|no space left on device/i.test(stderr) && exit.exitCode !== 0) {
    return {
      limit: "tmpfs",
      message: "The sandbox's temporary space (/tmp or home tmpfs) is full (tmpfs size limit).",
    };
  }
  if (/EFBIG|File too large/i.test(stderr) && exit.exitCode !== 0) {
    return { limit: "disk", message: "A process in the sandbox wrote a file past the disk limit (limits.diskMb)." };
  }
  if (/EAGAIN.*(spawn|fork)|fork: retry|Resource temporarily unavailable/i.test(stderr) && exit.exitCode !== 0) {
    return { limit: "pids", message: "The sandbox could not start more processes (pids limit)." };
  }
  return undefined;
}

/** What to do when the model kept answering with a final result the schema refuses. */
export const invalidResultHint =
  "Check that the schema asks for what the prompt asks for (and can be satisfied), say in the prompt what each field must hold, or use a stronger model.";

export function limitHint(limit?: string): string {
  switch (limit) {
    case "memory":
      return "Raise limits.memoryMb in a policy file, or make the task use less memory.";
    case "tmpfs":
      return "Raise limits.tmpMb / limits.homeMb in a policy file, or keep tool output smaller.";
    case "pids":
      // EAGAIN at a fork is the pids cgroup or RLIMIT_NPROC: the latter comes from the engine
      // (a daemon's default-ulimits nproc, which under runc counts the sandbox uid's processes on
      // the whole host: review, session 33) and no policy field changes it.
      return "Raise limits.pids in a policy file if the task really needs more processes. If the run started few, the limit may be the engine's per-user one: a `nproc` in the Docker daemon's default-ulimits (daemon.json) counts the sandbox uid's processes on the whole host; remove it there.";
    case "output":
      return "Raise limits.maxOutputMb in a policy file, or keep tool output smaller.";
    case "turns":
      return "Raise the turn budget (limits.maxTurns in a policy file, or --max-turns / maxTurns for one run), or give the agent a smaller task.";
    case "cost":
      return "Raise the cost budget (--max-cost / maxCostUsd), or use a cheaper model.";
    case "line":
      return "Raise limits.maxLineMb in a policy file; a single event this large usually means runaway tool output, or a final result over half the limit (Pi's events carry a result twice).";
    case "disk":
      return "Raise limits.diskMb in a policy file, or keep what the task writes to the workspace smaller.";
    case "entries":
      return "Raise limits.maxEntries in a policy file if the task really creates that many files (a large node_modules can), or keep generated files out of the workspace.";
    case "records":
      return "Something in the sandbox wrote into Pi's event stream (e.g. to /proc/1/fd/1); treat this run's output as untrusted.";
    case "refusals":
      return "Code in the sandbox kept sending model requests the gateway refuses (Pi sends none such) or the provider turns down; if the provider was failing, check its status, and otherwise treat this run's output as untrusted.";
    default:
      return "See the policy's limits (`sandbox-run policy show`).";
  }
}

/** Why Pi (or the launcher, or the runtime) exited with `code`, as a parenthesised clause. */
export function crashReason(code: number, runtime: string, pids?: number): string {
  if (code === LAUNCHER_EXIT.setupFailed) return " (the launcher could not prepare the sandbox)";
  // Pi never exits 2; Go's fatal errors do. Under runsc that is gVisor's own kernel failing,
  // usually out of host threads: the pids cgroup counts them (google/gvisor#2490). The sandbox's
  // tasks stop at limits.pids inside gVisor (RLIMIT_NPROC), with room for ~10 host threads each
  // (engine/docker-create-options.ts); a fork bomb's exiting tasks can still use that room up.
  if (code === 2 && runtime === "runsc") {
    const limit = pids === undefined ? "limits.pids" : `limits.pids (${pids})`;
    return ` (gVisor's sandbox kernel failed: it ran out of host threads, which under runsc are counted against ${limit} ten times over plus 256; processes started and ended faster than it reaps them, a fork bomb, or a burst of memory do this; raise limits.pids, or start fewer processes at once)`;
  }
  if (code === LAUNCHER_EXIT.controllerGone) return " (the sandbox lost its connection to the host controller)";
  if (code === LAUNCHER_EXIT.deadlinePassed) return " (the sandbox stopped itself at the run's deadline)";
  if (code === 137) return " (killed)";
  return "";
}
