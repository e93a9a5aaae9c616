// One run's tripwire: the first limit, budget, timeout or abort that fires decides how the run
// ends; later ones are ignored. Everything that can stop a run (the stream supervisor, the model
// gateway's turn count, the invalid-result watch, the disk watch, the timer, the caller's signal)
// fires the same object, and
// the supervisor listens once to stop the container.

export interface Trip {
  code: "timeout" | "aborted" | "limit" | "replay-divergence" | "invalid-result";
  /** Which limit, for code "limit": memory, pids, output, line, records, turns, cost, disk, ... */
  limit?: string;
  message: string;
  /** For code "timeout": the run was waiting for the model's reply when its time ran out. */
  waitingOnModel?: boolean;
  /** What to do next, where the code's own hint does not fit. */
  hint?: string;
}

export class RunTrip {
  #trip: Trip | undefined;
  readonly #listeners: Array<(trip: Trip) => void> = [];

  get tripped(): Trip | undefined {
    return this.#trip;
  }

  /** Fires the trip unless one already fired; true when this call decided the outcome. */
  fire(trip: Trip): boolean {
    if (this.#trip) return false;
    this.#trip = trip;
    for (const listener of this.#listeners) {
      try {
        listener(trip);
      } catch {
        // A listener's failure must not keep the others from stopping the run.
      }
    }
    return true;
  }

  /** Calls `listener` on the trip (at once when it already fired). */
  onTrip(listener: (trip: Trip) => void): void {
    this.#listeners.push(listener);
    if (this.#trip) listener(this.#trip);
  }
}
