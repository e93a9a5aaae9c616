// One byte budget per run (limits.maxOutputMb) for everything the sandbox makes the host handle: what
// it writes to stdout and stderr, and the events the host writes about what it does (refused gateway
// requests, egress decisions). Past the budget the run trips with limit "output".
import type { RunTrip } from "./run-trip.js";

export class OutputBudget {
  #used = 0;

  constructor(
    private readonly limitMb: number,
    private readonly trip: RunTrip,
  ) {}

  /** Counts `bytes`; false (and the run trips) once the budget is spent. */
  spend(bytes: number): boolean {
    this.#used += bytes;
    if (this.#used <= this.limitMb * 1024 * 1024) return true;
    this.trip.fire({
      code: "limit",
      limit: "output",
      message: `The sandbox's output (and the host events it caused) passed the ${this.limitMb} MiB output limit.`,
    });
    return false;
  }
}
