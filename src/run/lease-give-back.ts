// After a root caller's run: its trees back from the sandbox uid, once the container is gone. What
// the hand-back could not give back keeps the lease record, for `sandbox-run gc` (review, session
// 38: the record went whatever the hand-back said, and entries it never reached stayed the sandbox
// uid's after a run that exited 0, unsaid).
import { SANDBOX_UID } from "../sandbox-contract.js";
import {
  handedBackWhole,
  leftBehind,
  type OwnershipLease,
  type OwnershipReport,
} from "../workspace/ownership-lease.js";
import { removeLeaseRecord } from "./lease-record.js";
import type { RunTimeline } from "./run-events.js";

interface GiveBackInput {
  lease: Pick<OwnershipLease, "restore">;
  handBackTo: { uid: number; gid: number };
  runDir: string;
  timeline: Pick<RunTimeline, "sandbox">;
  /** Removes the container (once) and says whether that worked. */
  removeSandbox: () => Promise<boolean>;
}

export async function giveBackLease({
  lease,
  handBackTo,
  runDir,
  timeline,
  removeSandbox,
}: GiveBackInput): Promise<void> {
  if (!(await removeSandbox())) {
    timeline.sandbox("workspace.still-lent", {
      reason: "the container could not be removed; `sandbox-run gc` hands the trees back once it is",
    });
    return;
  }
  const report = await lease.restore(handBackTo);
  if (handedBackWhole(report)) removeLeaseRecord(runDir);
  else timeline.sandbox("workspace.still-lent", stillLentEvent(report));
}

/** The event of a hand-back that left entries; `warning` is what the CLI prints (also with -q). */
function stillLentEvent(report: OwnershipReport): Record<string, unknown> {
  const entries = leftBehind(report);
  const count = report.leftCount;
  return {
    reason: "the hand-back could not give every entry back; the lease is kept, and `sandbox-run gc` hands them back",
    count,
    entries,
    warning: `the hand-back of the run's trees is incomplete: what is at or below ${count === 1 ? "this path" : `these ${count} paths`} may still be owned by the sandbox's uid ${SANDBOX_UID}: ${entries.join(", ")}. Run \`sandbox-run gc\` to hand it back.`,
  };
}
