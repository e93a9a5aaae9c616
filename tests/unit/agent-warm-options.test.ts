// The `warm` option's size: given, or else SANDBOX_RUN_WARM's (so `{ calls: 1 }`, what a single
// CLI call passes, keeps a warm sandbox only when the environment asks); a bad value names where
// it came from. (The pool itself: warm-pool.test.ts; on the real engine: warm-sandboxes.test.ts.)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { ContainerPiAgent, type ContainerPiAgentConfig } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { isSandboxRunError } from "../../src/errors.js";
import { resolveRun } from "../../src/run/plan/resolve-options.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-warm-options-")));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const agents: ContainerPiAgent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

const models = {
  providers: { p: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] } },
};

/** An agent on an engine that never answers (nothing here may need one), planning one call. */
function planWith(config: Partial<ContainerPiAgentConfig>) {
  const engine = { name: "none", ping: () => new Promise(() => {}) } as unknown as Engine;
  const agent = new ContainerPiAgent({ engine, models, reapOrphans: false, ...config });
  agents.push(agent);
  return agent.plan("do it", { model: "p/m", cwd: dir });
}

describe("the warm option's size", () => {
  it("left out: SANDBOX_RUN_WARM decides, and without it the call is planned cold with no pool", () => {
    expect(planWith({ warm: { calls: 1 }, hostEnv: { SANDBOX_RUN_WARM: "1" } }).plan.warmShaped).toBe(true);
    const cold = planWith({ warm: { calls: 1 }, hostEnv: {} });
    expect(cold.plan.warmShaped).toBeFalsy();
    expect(planWith({ warm: { calls: 1 }, hostEnv: { SANDBOX_RUN_WARM: "0" } }).plan.warmShaped).toBeFalsy();
  });

  it("given: it wins over SANDBOX_RUN_WARM", () => {
    expect(planWith({ warm: { size: 0, calls: 1 }, hostEnv: { SANDBOX_RUN_WARM: "3" } }).plan.warmShaped).toBeFalsy();
    expect(planWith({ warm: 1, hostEnv: {} }).plan.warmShaped).toBe(true);
  });

  it("a bad value is a usage error naming where it came from", () => {
    expect(() => planWith({ warm: { calls: 1 }, hostEnv: { SANDBOX_RUN_WARM: "two" } })).toThrow(
      /SANDBOX_RUN_WARM \("two"\) must be a whole number/,
    );
    expect(() => planWith({ warm: { size: -1 }, hostEnv: { SANDBOX_RUN_WARM: "1" } })).toThrow(
      /warm\.size \(-1\) must be a whole number/,
    );
    // Past 2^31 ms (~24.8 days) Node's timer fires at once: the sandbox would stop as soon as it is made.
    expect(() => planWith({ warm: { size: 1, idleSeconds: 30 * 24 * 3600 } })).toThrow(
      /warm\.idleSeconds must be positive and at most 86400 \(a day\), got 2592000/,
    );
  });
});

describe("the warm pool's shape", () => {
  const never = () => ({ name: "none", ping: () => new Promise(() => {}) }) as unknown as Engine;

  it("does not hang on the process's folder: a service started in / (systemd's default) still shapes its pool", () => {
    const cwd = vi.spyOn(process, "cwd").mockReturnValue("/");
    try {
      const shape = resolveRun("(shape)", { models, model: "p/m" }, {}, {}, "shape");
      expect(shape.cwd).not.toBe("/");
      // A call from there is still refused: the folder is the call's.
      expect(() => resolveRun("do it", { models, model: "p/m" }, {}, {})).toThrow(/root of the host/);
    } finally {
      cwd.mockRestore();
    }
  });

  it("warmUp() says why a pool has no shape yet, and refuses on a closed agent, as SandboxRunErrors", async () => {
    const unshaped = new ContainerPiAgent({ engine: never(), models, reapOrphans: false, warm: { size: 1 } });
    agents.push(unshaped);
    const error = await unshaped.warmUp().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toMatch(/The warm pool has no shape yet: .*model/);
    const closed = new ContainerPiAgent({
      engine: never(),
      models,
      model: "p/m",
      reapOrphans: false,
      warm: { size: 1 },
    });
    await closed.close();
    await expect(closed.warmUp()).rejects.toMatchObject({
      code: "usage",
      message: expect.stringMatching(/was closed/),
    });
  });
});

describe("the agent's engine", () => {
  it("comes from hostEnv's DOCKER_HOST as SANDBOX_RUN_ENGINES does, not from the process's environment", async () => {
    const socket = path.join(dir, "no-engine-here.sock");
    const agent = new ContainerPiAgent({ models, reapOrphans: false, hostEnv: { DOCKER_HOST: `unix://${socket}` } });
    agents.push(agent);
    await expect(agent.run("do it", { model: "p/m", cwd: dir })).rejects.toMatchObject({
      code: "docker-unavailable",
      message: expect.stringContaining(socket),
    });
  });
});

describe("option names", () => {
  it("an option the library does not take is a usage error naming what it probably meant, never silently dropped", () => {
    const engine = { name: "none", ping: () => new Promise(() => {}) } as unknown as Engine;
    // JavaScript callers reach for the CLI's flag names: `workspace: "copy"` ran in bind mode before.
    expect(() => new ContainerPiAgent({ engine, models, workspace: "copy" } as never)).toThrow(
      /Unknown agent option: workspace \(did you mean workspaceMode\?\)/,
    );
    const agent = new ContainerPiAgent({ engine, models, reapOrphans: false });
    agents.push(agent);
    const refused = (options: object) => {
      try {
        agent.plan("do it", { model: "p/m", cwd: dir, ...options });
      } catch (error) {
        return isSandboxRunError(error) ? `${error.code}: ${error.shortMessage}` : String(error);
      }
      return "planned";
    };
    expect(refused({ writable: [dir] })).toBe(
      "usage: Unknown call option: writable (did you mean additionalWritableDirectories?).",
    );
    expect(refused({ modle: "p/m", timeout: 5 })).toBe(
      "usage: Unknown call options: modle (did you mean model?), timeout (did you mean timeoutMs?).",
    );
    expect(refused({ timeoutMs: 5000, workspaceMode: "copy" })).toBe("planned");
  });
});
