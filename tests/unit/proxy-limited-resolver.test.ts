// The egress proxy's DNS lookups go a few at a time (libuv's worker threads are the controller's
// too): however many the sandbox asks for at once, and however slowly they answer.
import { describe, expect, it } from "vitest";
import { limitedResolver, MAX_CONCURRENT_LOOKUPS } from "../../src/proxy/limited-resolver.js";

describe("limitedResolver", () => {
  it("runs at most MAX_CONCURRENT_LOOKUPS lookups at once, answers every one, and passes failures on", async () => {
    let inFlight = 0;
    let most = 0;
    const slow = async (host: string) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight--;
      if (host === "fails.example") throw Object.assign(new Error("no such name"), { code: "ENOTFOUND" });
      return [{ address: "192.0.2.1", family: 4 }];
    };
    const resolve = limitedResolver(slow);
    const hosts = Array.from({ length: 40 }, (_, i) => (i === 7 ? "fails.example" : `h${i}.example`));
    const results = await Promise.allSettled(hosts.map((host) => resolve(host)));
    expect(most).toBe(MAX_CONCURRENT_LOOKUPS);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(39);
    expect(results[7]).toMatchObject({ status: "rejected", reason: { code: "ENOTFOUND" } });
    // Calls that come while slots change hands never take one more than the limit.
    const again = await Promise.all(hosts.slice(10).map((host) => resolve(host)));
    expect(again).toHaveLength(30);
    expect(most).toBe(MAX_CONCURRENT_LOOKUPS);
  });
});
