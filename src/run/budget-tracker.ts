// The run's budgets, checked against Pi's own figures as its events stream past: a turn starts, or a
// message's usage (with cost) arrives, and the run trips as soon as one is exceeded. Pi's figures are
// claims from inside the sandbox; the model gateway keeps its own count of model responses for the
// turn budget (which code in the sandbox cannot get around), this is the early, friendly check.
import type { Trip } from "./run-trip.js";

export interface Budgets {
  maxTurns?: number;
  maxCostUsd?: number;
}

export function budgetTrip(budgets: Budgets, eventType: string, turns: number, costUsd: number): Trip | undefined {
  const { maxTurns, maxCostUsd } = budgets;
  if (maxTurns !== undefined && eventType === "turn_start" && turns > maxTurns) {
    return {
      code: "limit",
      limit: "turns",
      message: `The agent started turn ${turns}, over the budget of ${maxTurns} turns.`,
    };
  }
  if (maxCostUsd !== undefined && eventType === "message_end" && costUsd > maxCostUsd) {
    return {
      code: "limit",
      limit: "cost",
      message: `The run cost $${costUsd.toFixed(4)}, over the budget of $${maxCostUsd}.`,
    };
  }
  return undefined;
}
