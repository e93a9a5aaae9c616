// The run's budget of model responses, kept by the gateway (code in the sandbox that calls the
// gateway without Pi cannot get around it). A generation counts the moment it is forwarded: a
// client that gives up before the upstream answers has still made the provider work, so it is
// not refunded. The one refund is for a request the upstream turned down (a non-2xx status) or
// never received (the gateway could not reach it): no output was produced, and Pi retries those.

export interface BudgetTicket {
  /** Give the generation back (idempotent). */
  refund(): void;
}

export class GenerationBudget {
  #spent = 0;
  #stopped: string | undefined;

  constructor(readonly limit: number | undefined) {}

  /** Why no generation is given any more (the run has stopped), or undefined. */
  get stopped(): string | undefined {
    return this.#stopped;
  }

  /** No generation after this: the run stopped, and what its sandbox still asks would be paid for nothing. */
  stop(reason: string): void {
    this.#stopped ??= reason;
  }

  /** Generations forwarded and not refunded. */
  get spent(): number {
    return this.#spent;
  }

  /** Counts one generation, or returns undefined when the budget is spent. */
  take(): BudgetTicket | undefined {
    if (this.#stopped !== undefined) return undefined;
    if (this.limit !== undefined && this.#spent >= this.limit) return undefined;
    this.#spent++;
    let refunded = false;
    return {
      refund: () => {
        if (refunded) return;
        refunded = true;
        this.#spent--;
      },
    };
  }
}
