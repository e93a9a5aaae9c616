// The warm pool's bookkeeping, with stand-in sandboxes (the real ones, on the real engine, are in
// tests/integration/warm-sandboxes.test.ts): one claim, one sandbox, never two claims for one;
// claims beyond the pool wait for a sandbox being made or start cold with a reason; a sandbox that
// died or does not answer is removed, never handed out; close() removes every unclaimed one.
import { describe, expect, it } from "vitest";
import type { Engine, EngineContainer } from "../../src/engine/engine.js";
import type { WarmShape } from "../../src/run/plan/warm-shape.js";
import { type PoolSandbox, WarmPool, type WarmPoolChange } from "../../src/warm/warm-pool.js";
import type { MakeWarmSandbox } from "../../src/warm/warm-sandbox.js";

interface StandIn extends PoolSandbox {
  die(reason: string): void;
  destroyed: boolean;
  claimedWith?: Record<string, number | string>;
  answer?: string;
}

function standIn(n: number): StandIn {
  const listeners: Array<(reason: string) => void> = [];
  let dead: string | undefined;
  const sandbox: StandIn = {
    warmId: `warm-${n}`,
    container: { id: `container-${n}` } as EngineContainer,
    streams: {} as PoolSandbox["streams"],
    relay: {} as PoolSandbox["relay"],
    readOnlyCopies: new Map(),
    facts: {},
    readyAt: performance.now(),
    makeMs: 1,
    loadedMs: 1,
    stderrTail: "",
    destroyed: false,
    onDeath: (listener) => (dead ? listener(dead) : listeners.push(listener)),
    die(reason) {
      dead = reason;
      for (const listener of listeners.splice(0)) listener(reason);
    },
    check: async () => dead ?? sandbox.answer,
    claim(facts) {
      sandbox.claimedWith = facts;
    },
    destroy: async () => {
      sandbox.destroyed = true;
      return true;
    },
  };
  return sandbox;
}

/** A maker whose sandboxes are made when the test says so (or at once), counting what it made. */
function maker(options: { immediate?: boolean; fail?: string } = {}) {
  const made: StandIn[] = [];
  const waiting: Array<() => void> = [];
  const make = (input: MakeWarmSandbox) =>
    new Promise<PoolSandbox>((resolve, reject) => {
      if (options.fail) return reject(new Error(options.fail));
      const finish = () => {
        const sandbox = standIn(made.length + 1);
        made.push(sandbox);
        resolve(sandbox);
      };
      input.signal?.addEventListener("abort", () => reject(input.signal?.reason));
      if (options.immediate) queueMicrotask(finish);
      else waiting.push(finish);
    });
  return {
    make,
    made,
    /** Finishes the sandboxes being made so far. */
    finishAll: () => {
      for (const finish of waiting.splice(0)) finish();
    },
  };
}

function pool(
  size: number,
  make: WarmPoolOptions["make"],
  changes: WarmPoolChange[] = [],
  extra: Partial<WarmPoolOptions> = {},
): WarmPool {
  return new WarmPool({
    ...extra,
    engine: { name: "test" } as Engine,
    shape: {} as WarmShape,
    size,
    idleMs: 60_000,
    maxRunMs: 60_000,
    make,
    onChange: (change) => changes.push(change),
  });
}
type WarmPoolOptions = ConstructorParameters<typeof WarmPool>[0];

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

describe("the warm pool", () => {
  it("gives each claim its own sandbox: 8 claims at once on a pool of 3 get 6 different ones (3 ready, 3 being made) and 2 start cold", async () => {
    const m = maker();
    const warm = pool(3, m.make);
    warm.start();
    m.finishAll();
    await warm.whenFull();
    const claims = Promise.all(Array.from({ length: 8 }, () => warm.claim()));
    // The three refills the first claims asked for start after the refill delay (200 ms).
    await new Promise((resolve) => setTimeout(resolve, 300));
    m.finishAll();
    const outcomes = await claims;
    const served = outcomes.flatMap((o) => ("sandbox" in o ? [o.sandbox.warmId] : []));
    expect(served).toHaveLength(6);
    expect(new Set(served).size).toBe(6);
    const cold = outcomes.flatMap((o) => ("reason" in o ? [o.reason] : []));
    expect(cold).toEqual([
      "every one of the pool's 3 warm sandbox(es) is taken",
      "every one of the pool's 3 warm sandbox(es) is taken",
    ]);
    await warm.close();
  });

  it("refills in the background: a claim starts the next sandbox at once", async () => {
    const m = maker({ immediate: true });
    const warm = pool(2, m.make);
    warm.start();
    await warm.whenFull();
    expect(m.made).toHaveLength(2);
    const claim = await warm.claim();
    expect("sandbox" in claim && (claim.sandbox as StandIn).claimedWith).toMatchObject({
      waitedMs: expect.any(Number),
    });
    await warm.whenFull();
    expect(m.made).toHaveLength(3);
    expect(warm.stats()).toMatchObject({ made: 3, claimed: 1, ready: 2 });
    // Claimed sandboxes never come back: one claim after another, each gets one never handed out before.
    const ids = ["sandbox" in claim ? claim.sandbox.warmId : ""];
    for (let i = 0; i < 4; i++) {
      const next = await warm.claim();
      ids.push("sandbox" in next ? next.sandbox.warmId : "cold");
      await warm.whenFull();
    }
    expect(new Set(ids).size).toBe(5);
    await warm.close();
  });

  it("with a number of claims to come (a batch's tasks), makes no sandbox beyond them; one that fails its check is still replaced", async () => {
    const m = maker({ immediate: true });
    const warm = pool(2, m.make, [], { claims: 4 });
    warm.start();
    await warm.whenFull();
    m.made[0]!.answer = "no answer to a ping within 2000 ms";
    const served: string[] = [];
    for (let i = 0; i < 4; i++) {
      const claim = await warm.claim();
      served.push("sandbox" in claim ? claim.sandbox.warmId : claim.reason);
      // Past the refill delay: every refill the claims asked for has started.
      await new Promise((resolve) => setTimeout(resolve, 250));
      await warm.whenFull();
    }
    expect(served).toEqual(["warm-2", "warm-3", "warm-4", "warm-5"]);
    // Four claimed, one discarded at its check, none made to be removed at close.
    expect(m.made).toHaveLength(5);
    expect(warm.stats()).toMatchObject({ made: 5, claimed: 4, discarded: 1, ready: 0, making: 0 });
    // A call past them starts cold, and says why.
    const extra = await warm.claim();
    expect("reason" in extra && extra.reason).toBe(
      "the pool was told to expect 4 call(s) (warm.calls), and that many have come",
    );
    await warm.close();
  });

  it("an expected call that starts cold uses up one call: the pool makes one fewer and removes a ready one none is left to claim (review, session 35: four calls, two cold, made six)", async () => {
    const m = maker({ immediate: true });
    const warm = pool(2, m.make, [], { claims: 4 });
    warm.start();
    await warm.whenFull();
    expect(m.made).toHaveLength(2);
    // Two calls start cold (their plans did not fit): two of the four expected calls are gone.
    warm.forgo();
    warm.forgo();
    // Two claims are still to come, and two are ready: nothing more is made for them.
    for (let i = 0; i < 2; i++) {
      expect("sandbox" in (await warm.claim())).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(m.made).toHaveLength(2);
    expect(warm.stats()).toMatchObject({ made: 2, claimed: 2, ready: 0, making: 0 });
    await warm.close();

    // Every expected call cold: the ready sandboxes go at once, not at close().
    const m2 = maker({ immediate: true });
    const all = pool(2, m2.make, [], { claims: 3 });
    all.start();
    await all.whenFull();
    all.forgo();
    expect(all.stats()).toMatchObject({ ready: 2 });
    all.forgo();
    expect(all.stats()).toMatchObject({ ready: 1 });
    expect(m2.made.filter((s) => s.destroyed)).toHaveLength(1);
    all.forgo();
    expect(all.stats()).toMatchObject({ ready: 0, making: 0 });
    expect(m2.made.filter((s) => s.destroyed)).toHaveLength(2);
    expect(m2.made).toHaveLength(2);
    await all.close();
  });

  it("removes a sandbox that died while it waited, and makes another; no claim gets the dead one", async () => {
    const m = maker({ immediate: true });
    const changes: WarmPoolChange[] = [];
    const warm = pool(1, m.make, changes);
    warm.start();
    await warm.whenFull();
    const first = m.made[0]!;
    first.die("the relay exited (code 91)");
    expect(first.destroyed).toBe(true);
    await warm.whenFull();
    const claim = await warm.claim();
    expect("sandbox" in claim && claim.sandbox.warmId).toBe("warm-2");
    expect(changes).toContainEqual(
      expect.objectContaining({ type: "warm.discarded", warmId: "warm-1", reason: "the relay exited (code 91)" }),
    );
    await warm.close();
  });

  it("removes a sandbox that fails its check at the claim and hands out the next one", async () => {
    const m = maker({ immediate: true });
    const warm = pool(2, m.make);
    warm.start();
    await warm.whenFull();
    m.made[0]!.answer = "no answer to a ping within 2000 ms";
    const claim = await warm.claim();
    expect("sandbox" in claim && claim.sandbox.warmId).toBe("warm-2");
    expect(m.made[0]!.destroyed).toBe(true);
    expect(m.made[0]!.claimedWith).toBeUndefined();
    await warm.close();
  });

  it("close() removes every unclaimed sandbox, stops making more, and leaves claimed ones to their runs", async () => {
    const m = maker({ immediate: true });
    const warm = pool(3, m.make);
    warm.start();
    await warm.whenFull();
    const claim = await warm.claim();
    await warm.close();
    const claimed = "sandbox" in claim ? (claim.sandbox as StandIn) : undefined;
    expect(claimed?.destroyed).toBe(false);
    expect(m.made.filter((s) => s !== claimed).every((s) => s.destroyed)).toBe(true);
    const made = m.made.length;
    await tick();
    expect(m.made.length).toBe(made);
    expect(await warm.claim()).toEqual({ reason: "the warm pool is closed" });
  });

  it("a claim waits for a sandbox being made only so long, then the call starts cold", async () => {
    const m = maker(); // never finishes on its own
    const warm = pool(1, m.make, [], { waitMs: 50 });
    warm.start();
    expect(await warm.claim()).toEqual({ reason: "no warm sandbox was ready within 0.05 s" });
    // The one being made still comes, for the next claim.
    m.finishAll();
    await warm.whenFull();
    expect("sandbox" in (await warm.claim())).toBe(true);
    await warm.close();
  });

  it("a pool that cannot make sandboxes sends calls cold with the reason, and backs off instead of spinning", async () => {
    const m = maker({ fail: "Runner image sandbox-run/pi:x is missing" });
    const changes: WarmPoolChange[] = [];
    const warm = pool(2, m.make, changes);
    warm.start();
    await tick();
    expect(await warm.claim()).toEqual({
      reason: "the pool could not make a warm sandbox: Runner image sandbox-run/pi:x is missing",
    });
    await expect(warm.whenFull()).rejects.toThrow("is missing");
    const failures = changes.filter((c) => c.type === "warm.make-failed");
    expect(failures.length).toBeLessThanOrEqual(2);
    expect(failures[0]).toMatchObject({ retryInMs: 1000 });
    await warm.close();
  });

  it("never gives a call a sandbox close to its idle deadline: it is removed and the next one made serves the claim", async () => {
    const m = maker({ immediate: true });
    const changes: WarmPoolChange[] = [];
    // idle 400 ms: a sandbox with less than a quarter of that left (100 ms) would stop itself while
    // the call prepares; its claim would fail the call instead of starting it.
    const warm = new WarmPool({
      engine: { name: "test" } as Engine,
      shape: {} as WarmShape,
      size: 1,
      idleMs: 400,
      maxRunMs: 60_000,
      make: m.make,
      onChange: (change) => changes.push(change),
    });
    warm.start();
    await warm.whenFull();
    await new Promise((resolve) => setTimeout(resolve, 320));
    const claim = await warm.claim();
    expect("sandbox" in claim && claim.sandbox.warmId).toBe("warm-2");
    expect(m.made[0]!.destroyed).toBe(true);
    expect(m.made[0]!.claimedWith).toBeUndefined();
    expect(changes).toContainEqual(
      expect.objectContaining({
        type: "warm.discarded",
        warmId: "warm-1",
        reason: expect.stringMatching(/too near to serve a call/),
      }),
    );
    await warm.close();
  });
});
