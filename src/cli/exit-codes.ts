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
  interrupted: 130,
  terminated: 143,
} as const;

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
