// The egress proxies' DNS lookups go a few at a time (libuv's worker threads are the controller's
// too): one per run, three for the whole process, however many a sandbox asks for and however
// slowly they answer.
import { describe, expect, it } from "vitest";
import { LOOKUPS_PER_PROCESS, limitedResolver, Slots } from "../../src/proxy/limited-resolver.js";

function slowResolver() {
  const counts = { inFlight: 0, most: 0 };
  const resolve = async (host: string) => {
    counts.inFlight++;
    counts.most = Math.max(counts.most, counts.inFlight);
    await new Promise((r) => setTimeout(r, 5));
    counts.inFlight--;
    if (host === "fails.example") throw Object.assign(new Error("no such name"), { code: "ENOTFOUND" });
    return [{ address: "192.0.2.1", family: 4 }];
  };
  return { counts, resolve };
}

describe("limitedResolver", () => {
  it("one run looks up one name at a time, answers every one, and passes failures on", async () => {
    const { counts, resolve } = slowResolver();
    const run = limitedResolver(resolve, new Slots(LOOKUPS_PER_PROCESS));
    const hosts = Array.from({ length: 20 }, (_, i) => (i === 7 ? "fails.example" : `h${i}.example`));
    const results = await Promise.allSettled(hosts.map((host) => run(host)));
    expect(counts.most).toBe(1);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(19);
    expect(results[7]).toMatchObject({ status: "rejected", reason: { code: "ENOTFOUND" } });
  });

  it("all runs of the process together hold at most LOOKUPS_PER_PROCESS, and every run gets its turn", async () => {
    const { counts, resolve } = slowResolver();
    const shared = new Slots(LOOKUPS_PER_PROCESS);
    const runs = Array.from({ length: 8 }, () => limitedResolver(resolve, shared));
    const answered = await Promise.all(
      runs.flatMap((run, r) => Array.from({ length: 5 }, (_, i) => run(`r${r}-${i}.example`))),
    );
    expect(answered).toHaveLength(40);
    expect(counts.most).toBe(LOOKUPS_PER_PROCESS);
  });

  it("drops a lookup whose client left while it waited for a slot: it never runs, and frees the queue", async () => {
    const started: string[] = [];
    let release = () => {};
    const blocked = new Promise<void>((r) => (release = r));
    const resolve = async (host: string) => {
      started.push(host);
      await blocked;
      return [{ address: "192.0.2.1", family: 4 }];
    };
    const shared = new Slots(LOOKUPS_PER_PROCESS);
    const run = limitedResolver(resolve, shared);
    const first = run("first.example");
    const gone = Array.from({ length: 50 }, () => new AbortController());
    const queued = gone.map((c, i) => run(`gone-${i}.example`, c.signal));
    const kept = run("kept.example");
    for (const c of gone) c.abort(new Error("the client left"));
    const settled = await Promise.allSettled(queued);
    expect(settled.every((r) => r.status === "rejected")).toBe(true);
    release();
    await Promise.all([first, kept]);
    expect(started).toEqual(["first.example", "kept.example"]);
    expect(shared.waiting).toBe(0);
  });
});
