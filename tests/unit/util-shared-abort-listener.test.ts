// A service's one long-lived signal shared by many calls holds one listener, whatever their number,
// and none once no call listens (Node warns past ten listeners on an AbortSignal).
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { listenForAbort } from "../../src/util/shared-abort-listener.js";

describe("listenForAbort", () => {
  it("twelve calls on one signal: one listener on it, each call told once at the abort, none left after", () => {
    const shutdown = new AbortController();
    const told: number[] = [];
    const unlinks = Array.from({ length: 12 }, (_, i) => listenForAbort(shutdown.signal, () => told.push(i)));
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(1);
    unlinks[3]!();
    shutdown.abort(new Error("stop"));
    expect(told.sort((a, b) => a - b)).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]);
    for (const unlink of unlinks) unlink();
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
  });

  it("the last call gone, the listener goes; an aborted signal tells at once", () => {
    const shutdown = new AbortController();
    const a = listenForAbort(shutdown.signal, () => {});
    const b = listenForAbort(shutdown.signal, () => {});
    a();
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(1);
    b();
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
    let told = 0;
    listenForAbort(AbortSignal.abort(), () => told++)();
    expect(told).toBe(1);
  });
});
