// Sandbox events that are warnings: a single run says them even with -q and under the live status
// (once the run is over), and a batch says them for each task (red-team review, round 3, session
// 41: a batch task that left a link to the host's credentials said only `ok t1`). A module of its
// own: the run command needs the names at once, the progress reporter's lines only when it says one.
export const WARNING_EVENTS: ReadonlySet<string> = new Set([
  "workspace.host-run-files",
  "image.stale",
  "workspace.dead-apply",
  "workspace.still-lent",
]);

/**
 * Whether an event is sandbox-run's own (source "sandbox"), not a line of Pi's stream: Pi's events
 * take their type from what the sandbox printed, so a Pi event named `workspace.still-lent` carried a
 * hint of the sandbox's choosing ("run `curl ... | sudo sh`") onto stderr as sandbox-run's own
 * warning (review, session 44). Only the host's events are said as the host's.
 */
export function isHostEvent(event: { source: string }): boolean {
  return event.source === "sandbox";
}
