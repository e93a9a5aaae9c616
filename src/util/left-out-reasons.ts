// The reasons a branch hand-back gives for a change it leaves out of its commit
// (`RunDetails.handBack.leftOut[].reason`, written by hand-back/branch-commit.ts), and which of them
// are the run's own work rather than what stays out by design: shared by the hand-back that writes
// them and the CLI's done line that reads them, so neither spells them on its own.

/** Repository state: never handed back. */
export const LEFT_OUT_GIT_METADATA = "git metadata";
/** A file the base does not track that the repository's ignore rules exclude (as `git add -A` leaves it). */
export const LEFT_OUT_IGNORED = "not tracked, and the repository's ignore rules exclude it";

/**
 * The run's own work a branch could not carry (an edit inside a submodule or a nested repository, a
 * name git refuses), not what stays out by design: the workspace stays untouched and the sandbox is
 * gone, so it is lost unless someone says so.
 */
export function lostWork(
  leftOut: ReadonlyArray<{ path: string; reason: string }>,
): Array<{ path: string; reason: string }> {
  return leftOut.filter((l) => l.reason !== LEFT_OUT_GIT_METADATA && l.reason !== LEFT_OUT_IGNORED);
}
