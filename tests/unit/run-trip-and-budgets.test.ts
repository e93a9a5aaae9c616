// The run's tripwire (first trip wins, every listener hears it) and the budgets checked from Pi's figures.
import { describe, expect, it } from "vitest";
import { budgetTrip } from "../../src/run/budget-tracker.js";
import { RunTrip, type Trip } from "../../src/run/run-trip.js";
import { diskTrip } from "../../src/run/run-workspace.js";

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

describe("diskTrip: what a disk watch's verdict tells the caller", () => {
  const MB = 1024 * 1024;
  it("a trip counted from the trees says how much, and how much of it removed files still held", () => {
    const trip = diskTrip({
      limit: "disk",
      grownBytes: 90 * MB,
      limitBytes: 64 * MB,
      held: { bytes: 60 * MB, files: 3 },
    });
    expect(trip).toMatchObject({ code: "limit", limit: "disk" });
    expect(trip.message).toBe(
      "The sandbox added 90 MiB to the workspace and writable roots (60 MiB of it in 3 files its processes removed but still hold open or mapped), over the 64 MiB disk limit.",
    );
  });

  it("a blind trip names what the host could not look into, and why others' writes counted, for a folder and for held files alike", () => {
    const folder = diskTrip({
      limit: "disk",
      grownBytes: 90 * MB,
      limitBytes: 64 * MB,
      unseen: "/w/h",
      blindTo: "a folder",
    });
    expect(folder.message).toMatch(/^The host could not look into \/w\/h while the run was live/);
    expect(folder.message).toMatch(
      /90 MiB, over the 64 MiB disk limit\. Writes of other programs to that filesystem count too while such a folder is there\.$/,
    );
    const held = diskTrip({
      limit: "disk",
      grownBytes: 90 * MB,
      limitBytes: 64 * MB,
      unseen: "what the container's processes hold (2 of their open files, mappings or threads could not be read)",
      blindTo: "held files",
    });
    expect(held.message).toMatch(/^The host could not look into what the container's processes hold \(2 of/);
    expect(held.message).toMatch(/count too while the host cannot read what they hold\.$/);
    const entries = diskTrip({
      limit: "entries",
      grownEntries: 2_500,
      limitEntries: 2_000,
      unseen: "/w/h",
      blindTo: "a folder",
    });
    expect(entries).toMatchObject({ code: "limit", limit: "entries" });
    expect(entries.message).toMatch(/2500 files and folders, over the limit of 2000 \(limits\.maxEntries\)/);
  });
});
