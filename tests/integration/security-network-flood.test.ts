// A flood of refused requests from the sandbox: the events the host writes for them are throttled
// (src/run/event-throttle.ts), so the sandbox cannot bury the run's events or the caller's memory.
// Also a load on the relay in copy mode (5,000 requests over its HTTP/2 session; its pacing of
// stream resets under nghttp2's rapid-reset guard has unit tests of its own: relay-session).
// Not in the integration-remote project: the throttle is the controller's and does not depend on
// the engine, and on the remote test engine the flood alone takes ~100 s.
import { describe, expect, it } from "vitest";
import { bash, describeOutcome, finish, runHostile, useHostileModelServer } from "../support/hostile-model.js";

const server = useHostileModelServer();

describe("network", () => {
  it("5,000 refused requests from the sandbox become a few events with counts, not 5,000 events", async () => {
    const flood = [
      "node -e '",
      'const http = require("http"); const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });',
      'let done = 0; const n = 5000; const end = () => { if (++done === n) console.log("sent=" + done); };',
      'for (let i = 0; i < n; i++) http.get({ host: "127.0.0.1", port: 18080, path: "/nope/" + i, agent }, (r) => { r.resume(); r.on("end", end); }).on("error", end);',
      "'",
    ].join(" ");
    // The hostile policy's run timeout (180 s).
    const outcome = await runHostile(server, [bash(flood), finish()]);
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("sent=5000");
    const refused = outcome.events.filter((e) => e.type === "gateway.refused");
    const reported = refused.reduce((sum, e) => sum + 1 + Number(e.data.repeated ?? 0), 0);
    // Every refusal is accounted for, but only a burst per second is written out one by one: per
    // kind of refusal 10 per one-second window (two windows can meet within a second), however
    // long the flood lasts.
    expect(reported).toBe(5000);
    const kinds = new Set(refused.map((e) => `${e.data.reason} ${e.data.method}`));
    const times = refused.map((e) => e.time).sort((a, b) => a - b);
    let densest = 0;
    for (let first = 0, last = 0; last < times.length; last++) {
      while (times[last]! - times[first]! >= 1000) first++;
      densest = Math.max(densest, last - first + 1);
    }
    expect(densest).toBeLessThanOrEqual(20 * kinds.size + 1);
    expect(refused.length).toBeLessThan(1000);
    expect(Buffer.byteLength(JSON.stringify(outcome.events))).toBeLessThan(1024 * 1024);
  });
});
