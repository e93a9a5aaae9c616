// The pool's scheduling, with fake engines (the real ones are in tests/integration/engines-*.test.ts):
// least-loaded first, a full pool waits, a dead engine is skipped and named, runtimes are honoured.
import { describe, expect, it } from "vitest";
import type { Engine, EngineInfo } from "../../src/engine/engine.js";
import { EnginePool } from "../../src/engine/engine-pool.js";
import { isSandboxRunError, SandboxRunError } from "../../src/errors.js";

function fakeEngine(name: string, options: { down?: boolean; runtimes?: string[] } = {}) {
  const state = { down: options.down ?? false, pings: 0 };
  const engine = {
    name,
    address: `tcp://${name}:2376 (TLS)`,
    sharesHostFilesystem: false,
    async ping() {
      state.pings++;
      if (state.down)
        throw new SandboxRunError("docker-unavailable", `Engine "${name}" is not reachable (ECONNREFUSED).`);
    },
    async info(): Promise<EngineInfo> {
      const runtimes = Object.fromEntries((options.runtimes ?? ["runc"]).map((r) => [r, {}]));
      return { version: "1", apiVersion: "1.41", runtimes, securityOptions: [] };
    },
  } as unknown as Engine;
  return { engine, state };
}

describe("EnginePool", () => {
  it("spreads concurrent runs over the engines by load relative to capacity", async () => {
    const a = fakeEngine("a");
    const b = fakeEngine("b");
    const pool = new EnginePool([
      { engine: a.engine, capacity: 2 },
      { engine: b.engine, capacity: 4 },
    ]);
    // Six acquisitions started at once: reservations happen before any ping resolves.
    const leases = await Promise.all(Array.from({ length: 6 }, () => pool.acquire()));
    expect(leases.filter((l) => l.engine === a.engine)).toHaveLength(2);
    expect(leases.filter((l) => l.engine === b.engine)).toHaveLength(4);
    expect(pool.load()).toEqual([
      { engine: "a", active: 2, capacity: 2 },
      { engine: "b", active: 4, capacity: 4 },
    ]);
  });

  it("makes a run wait while every engine is full, and hands it the first place given back", async () => {
    const a = fakeEngine("a");
    const pool = new EnginePool([{ engine: a.engine, capacity: 1 }]);
    const first = await pool.acquire();
    let queued = false;
    const second = pool.acquire({ onQueued: () => (queued = true) });
    await new Promise((r) => setImmediate(r));
    expect(queued).toBe(true);
    first.release();
    expect((await second).engine).toBe(a.engine);
    first.release(); // twice is harmless
    expect(pool.load()[0]!.active).toBe(1);
  });

  it("a waiting run stops when its signal aborts", async () => {
    const pool = new EnginePool([{ engine: fakeEngine("a").engine, capacity: 1 }]);
    await pool.acquire();
    const controller = new AbortController();
    const waiting = pool.acquire({ signal: controller.signal });
    controller.abort(new Error("stop"));
    await expect(waiting).rejects.toThrow("stop");
  });

  it("skips an engine that fails its ping, says which and why, and does not ping it again at once", async () => {
    const a = fakeEngine("a", { down: true });
    const b = fakeEngine("b");
    const pool = new EnginePool([
      { engine: a.engine, capacity: 4 },
      { engine: b.engine, capacity: 4 },
    ]);
    const skipped: Array<{ engine: string; reason: string }> = [];
    const lease = await pool.acquire({ onSkipped: (s) => skipped.push(s) });
    expect(lease.engine).toBe(b.engine);
    expect(skipped).toEqual([{ engine: "a", reason: 'failed its ping: Engine "a" is not reachable (ECONNREFUSED)' }]);
    const again: string[] = [];
    await pool.acquire({ onSkipped: (s) => again.push(s.engine) });
    expect(again).toEqual(["a"]);
    expect(a.state.pings).toBe(1);
  });

  it("when no engine answers, the error names every engine and its reason", async () => {
    const pool = new EnginePool([
      { engine: fakeEngine("a", { down: true }).engine, capacity: 1 },
      { engine: fakeEngine("b", { down: true }).engine, capacity: 1 },
    ]);
    const error = await pool.acquire().catch((e: unknown) => e);
    expect(isSandboxRunError(error) && error.code).toBe("docker-unavailable");
    expect((error as SandboxRunError).shortMessage).toBe(
      'No engine of the pool answered: a (tcp://a:2376 (TLS)): Engine "a" is not reachable (ECONNREFUSED); ' +
        'b (tcp://b:2376 (TLS)): Engine "b" is not reachable (ECONNREFUSED).',
    );
  });

  it("a pool of one fails with that engine's own error", async () => {
    const pool = EnginePool.of(fakeEngine("local", { down: true }).engine);
    await expect(pool.acquire()).rejects.toThrow('Engine "local" is not reachable (ECONNREFUSED).');
  });

  it("sends a run only to an engine that offers its runtime (declared, or registered)", async () => {
    const a = fakeEngine("a", { runtimes: ["runc"] });
    const b = fakeEngine("b", { runtimes: ["runc", "runsc"] });
    const c = fakeEngine("c");
    const pool = new EnginePool([
      { engine: a.engine, capacity: 4 },
      { engine: b.engine, capacity: 4 },
      { engine: c.engine, capacity: 4, runtimes: ["runc"] },
    ]);
    const skipped: string[] = [];
    const lease = await pool.acquire({ runtime: "runsc", onSkipped: (s) => skipped.push(`${s.engine}: ${s.reason}`) });
    expect(lease.engine).toBe(b.engine);
    expect(skipped).toEqual(["a: does not offer the runtime runsc"]);
    const onlyRunc = new EnginePool([{ engine: c.engine, capacity: 1, runtimes: ["runc"] }]);
    await expect(onlyRunc.acquire({ runtime: "runsc" })).rejects.toThrow(
      "No engine of the pool offers the runtime runsc (c: runc).",
    );
  });

  it("keeps an engine with capacity 0 out of scheduling but lists it (an image source)", async () => {
    const source = fakeEngine("source");
    const worker = fakeEngine("worker");
    const pool = new EnginePool([
      { engine: source.engine, capacity: 0 },
      { engine: worker.engine, capacity: 1 },
    ]);
    expect((await pool.acquire()).engine).toBe(worker.engine);
    expect(pool.engines.map((e) => e.name)).toEqual(["source", "worker"]);
    expect(source.state.pings).toBe(0);
  });

  it("refuses two engines of the same name", () => {
    expect(
      () =>
        new EnginePool([
          { engine: fakeEngine("a").engine, capacity: 1 },
          { engine: fakeEngine("a").engine, capacity: 1 },
        ]),
    ).toThrow('Two engines of the pool are named "a".');
  });
});
