// The run's tripwire (first trip wins, every listener hears it) and the budgets checked from Pi's figures.
import { describe, expect, it } from "vitest";
import { budgetTrip } from "../../src/run/budget-tracker.js";
import { RunTrip, type Trip } from "../../src/run/run-trip.js";

describe("RunTrip", () => {
  it("the first trip decides; later ones are ignored; listeners hear it once, even when added late", () => {
    const trip = new RunTrip();
    const heard: Trip[] = [];
    trip.onTrip((t) => heard.push(t));
    expect(trip.fire({ code: "limit", limit: "disk", message: "disk" })).toBe(true);
    expect(trip.fire({ code: "timeout", message: "late" })).toBe(false);
    const late: Trip[] = [];
    trip.onTrip((t) => late.push(t));
    expect(trip.tripped).toEqual({ code: "limit", limit: "disk", message: "disk" });
    expect(heard).toEqual([{ code: "limit", limit: "disk", message: "disk" }]);
    expect(late).toEqual(heard);
  });

  it("a listener that throws does not keep the others from hearing", () => {
    const trip = new RunTrip();
    const heard: string[] = [];
    trip.onTrip(() => {
      throw new Error("broken listener");
    });
    trip.onTrip((t) => heard.push(t.message));
    trip.fire({ code: "aborted", message: "stop" });
    expect(heard).toEqual(["stop"]);
  });
});

describe("budgetTrip", () => {
  it("trips on the turn past the budget, at turn_start only", () => {
    expect(budgetTrip({ maxTurns: 2 }, "turn_start", 2, 0)).toBeUndefined();
    expect(budgetTrip({ maxTurns: 2 }, "message_end", 3, 0)).toBeUndefined();
    expect(budgetTrip({ maxTurns: 2 }, "turn_start", 3, 0)).toEqual({
      code: "limit",
      limit: "turns",
      message: "The agent started turn 3, over the budget of 2 turns.",
    });
  });

  it("trips on the cost past the budget, when a message's usage arrives", () => {
    expect(budgetTrip({ maxCostUsd: 0.5 }, "message_end", 1, 0.5)).toBeUndefined();
    expect(budgetTrip({ maxCostUsd: 0.5 }, "message_end", 1, 0.51)).toEqual({
      code: "limit",
      limit: "cost",
      message: "The run cost $0.5100, over the budget of $0.5.",
    });
    expect(budgetTrip({}, "message_end", 99, 99)).toBeUndefined();
  });
});
