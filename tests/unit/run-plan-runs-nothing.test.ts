// agent.plan() reads files and nothing else: a models.json `!command` runs only when the run
// starts (resolveRouteCredentials in executeRun), never for a plan or a dry run.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { resolveRouteCredentials } from "../../src/gateway/route-credentials.js";
import { redactPlan } from "../../src/run/plan/redact-plan.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-plan-")));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("agent.plan()", () => {
  it("runs no models.json !command; the run's start does, once", () => {
    const marker = path.join(dir, "command-ran");
    const models = {
      providers: {
        vault: {
          baseUrl: "http://127.0.0.1:9/v1",
          api: "openai-completions",
          apiKey: `!echo run >> ${marker}; echo vault-key-from-command-0123456789`,
          models: [{ id: "m" }],
        },
      },
    };
    // No engine: a plan must not need one.
    const agent = new ContainerPiAgent({ engine: {} as Engine, models, hostEnv: { PATH: "/usr/bin:/bin" } });
    const planned = agent.plan("do it", { model: "vault/m", cwd: dir });
    expect(fs.existsSync(marker)).toBe(false);
    const printed = JSON.stringify(redactPlan(planned));
    expect(printed).not.toContain("vault-key-from-command");
    expect(printed).toContain("command, run when the run starts");

    const routes = resolveRouteCredentials(planned.run.routing, { env: planned.run.hostEnv });
    expect(routes[0]?.headers.authorization).toBe("Bearer vault-key-from-command-0123456789");
    expect(fs.readFileSync(marker, "utf8")).toBe("run\n");
  });
});
