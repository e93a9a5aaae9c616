// Sandbox-driven events: a burst per key and window passes, the rest are counted into `repeated`.
import { describe, expect, it } from "vitest";
import { EventThrottle, type ThrottledEvent } from "../../src/run/event-throttle.js";

function throttle(burst = 2) {
  let now = 0;
  const out: ThrottledEvent[] = [];
  const t = new EventThrottle((e) => out.push(e), { burst, windowMs: 1000, now: () => now });
  return { t, out, at: (ms: number) => (now = ms) };
}

const refusal = (n: number) => ({ type: "gateway.refused", data: { n } });

describe("EventThrottle", () => {
  it("passes a burst per key and window, folds the rest into the next event that passes", () => {
    const { t, out, at } = throttle();
    for (let i = 0; i < 5; i++) t.offer("a", refusal(i));
    t.offer("b", refusal(100));
    expect(out).toEqual([refusal(0), refusal(1), refusal(100)]);
    at(1000);
    t.offer("a", refusal(5));
    expect(out.at(-1)).toEqual({ type: "gateway.refused", data: { n: 5, repeated: 3 } });
  });

  it("reports what is still held when the run ends, once", () => {
    const { t, out } = throttle(1);
    for (let i = 0; i < 40_000; i++) t.offer("a", refusal(i));
    t.flush();
    t.flush();
    expect(out).toEqual([refusal(0), { type: "gateway.refused", data: { n: 39_999, repeated: 39_998 } }]);
  });
});
