// The CLI's exit codes, one per kind of failure, so scripts can branch on them.
import type { SandboxRunErrorCode } from "../errors.js";

export const EXIT = {
  ok: 0,
  agentFailed: 1,
  usage: 2,
  unavailable: 3,
  /** A replay's request differed from the recording (`sandbox-run replay`). */
  replayDivergence: 4,
  timeout: 124,
  /** SIGHUP: the terminal or session closed. */
  hungUp: 129,
  interrupted: 130,
  terminated: 143,
} as const;

/** The signals that stop a run (or a batch) the way Ctrl-C does: its sandbox stopped, judged and removed. */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

/** The exit code of a run a signal stopped: 128 + the signal's number, as a shell reports it. */
export function exitCodeForSignal(name: StopSignal): number {
  return name === "SIGHUP" ? EXIT.hungUp : name === "SIGTERM" ? EXIT.terminated : EXIT.interrupted;
}

export function exitCodeFor(code: SandboxRunErrorCode): number {
  switch (code) {
    case "usage":
      return EXIT.usage;
    case "docker-unavailable":
    case "image-missing":
      return EXIT.unavailable;
    case "timeout":
      return EXIT.timeout;
    case "aborted":
      return EXIT.interrupted;
    case "replay-divergence":
      return EXIT.replayDivergence;
    default:
      return EXIT.agentFailed;
  }
}
