// A stop signal that comes once the run had its result (red team, round 3, session 42: the CLI said
// "SIGINT received, stopping the sandbox", then applied 9,000 entries and exited 0 "done"). The
// library's contract keeps the result and the hand-back (README: an abort no longer stops the call
// then); the CLI exits with the signal's code and says what came of the stop. The run itself is a
// stand-in here (the judging and the apply are tested with real engines elsewhere): its runPlanned
// gets the signal as the judging does, and resolves with a finished run's details.
import { EventEmitter } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { lateStopLine, runPlannedCommand } from "../../src/cli/run-command.js";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { RunDetails } from "../../src/index.js";

const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-late-stop-")));
const hostEnv = { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-test-0123456789abcdef0123" };
const agent = new ContainerPiAgent({ cwd: ws, model: "openai/gpt-4o", hostEnv, reapOrphans: false });
afterAll(async () => {
  await agent.close();
  fs.rmSync(ws, { recursive: true, force: true });
});

function io() {
  const out = { stdout: "", stderr: "" };
  const cliIo: CliIo = {
    stdout: (text) => void (out.stdout += text),
    stderr: (text) => void (out.stderr += text),
    readStdin: async () => undefined,
    env: {},
    stderrIsTty: false,
  };
  return { cliIo, out };
}

const finished = (planned: { plan: { runId: string } }): RunDetails =>
  ({
    result: "all done",
    runId: planned.plan.runId,
    model: "openai/gpt-4o",
    piVersion: "1.6.0",
    policy: "workspace-write",
    image: "sandbox-run/pi:test",
    containerId: "0123456789ab",
    durationMs: 1234,
    turns: 2,
    usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: 0 },
    changedFiles: { created: ["lib/a.js"], modified: [], deleted: [] },
    warm: false,
    exitCode: 0,
  }) as unknown as RunDetails;

describe("a stop signal after the run had its result", () => {
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)
    it(`${signal}: the result and the work stand, the exit code is the signal's (${code}), and a line says so`, async () => {
      const planned = agent.plan("do it", { cwd: ws });
      const signals = new EventEmitter();
      let sawStop = false;
      const run = {
        fitToEngines: async (p: typeof planned) => p,
        runPlanned: async (p: typeof planned, options: { signal?: AbortSignal }) => {
          // The signal arrives while the host judges and applies: the run goes on (README).
          signals.emit(signal);
          sawStop = options.signal?.aborted === true;
          return finished(p);
        },
      } as unknown as ContainerPiAgent;
      const plain = io();
      expect(await runPlannedCommand(run, planned, {}, plain.cliIo, signals)).toBe(code);
      expect(sawStop).toBe(true);
      expect(plain.out.stdout).toBe("all done\n");
      expect(plain.out.stderr).toContain(`${signal} received, stopping the sandbox`);
      expect(plain.out.stderr).toContain(
        `sandbox-run: ${signal} came after the run had its result, which a stop no longer undoes: the result is above and its changes are in the workspace, judged as any run's (copy mode applied them whole); exit ${code} for the signal.`,
      );
      const json = io();
      expect(await runPlannedCommand(run, agent.plan("do it", { cwd: ws }), { json: true }, json.cliIo, signals)).toBe(
        code,
      );
      expect(JSON.parse(json.out.stdout)).toMatchObject({ ok: true, result: "all done", exitCode: code });
      expect(signals.listenerCount(signal)).toBe(0);
    });

  it("a signal that comes while the result is printed ends in its exit code too (second fix review, round 3, session 42)", async () => {
    const signals = new EventEmitter();
    const run = {
      fitToEngines: async (p: ReturnType<typeof agent.plan>) => p,
      runPlanned: async (p: ReturnType<typeof agent.plan>) => finished(p),
    } as unknown as ContainerPiAgent;
    const out = { stdout: "", stderr: "" };
    const cliIo: CliIo = {
      // The signal arrives as the result is written out.
      stdout: (text) => {
        out.stdout += text;
        signals.emit("SIGTERM");
      },
      stderr: (text) => void (out.stderr += text),
      readStdin: async () => undefined,
      env: {},
      stderrIsTty: false,
    };
    expect(await runPlannedCommand(run, agent.plan("do it", { cwd: ws }), {}, cliIo, signals)).toBe(143);
    expect(out.stderr).toContain("sandbox-run: SIGTERM came after the run had its result");
  });

  it("names the branch or the patch a stop no longer undoes", () => {
    const details = finished({ plan: { runId: "r" } });
    expect(
      lateStopLine(
        "SIGINT",
        { ...details, handBack: { mode: "branch", branch: "sandbox-run/r", commit: "c" } } as never,
        130,
      ),
    ).toContain("the result is above and the branch sandbox-run/r was still made; exit 130 for the signal.");
    expect(lateStopLine("SIGTERM", { ...details, handBack: { mode: "patch" } } as never, 143)).toContain(
      "the patch was still written; exit 143",
    );
  });
});
