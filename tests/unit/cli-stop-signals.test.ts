// What the CLI says when it is stopped by a signal (review, session 27: F8) and when a models.json
// provider fails (F14): words for the person at the terminal, not the library's caller.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { reportError } from "../../src/cli/report-error.js";
import { withModelsHint } from "../../src/cli/run-command.js";
import { interruptedError, stopOnSignals } from "../../src/cli/stop-signals.js";
import { abortedError, SandboxRunError } from "../../src/errors.js";

function captureIo(): { io: CliIo; stderr: () => string } {
  let stderr = "";
  const io: CliIo = {
    stdout: () => {},
    stderr: (text) => void (stderr += text),
    readStdin: async () => undefined,
    env: {},
    stderrIsTty: false,
  };
  return { io, stderr: () => stderr };
}

describe("a command stopped by a signal", () => {
  it.each([
    ["SIGINT", "Interrupted by SIGINT (Ctrl-C); the sandbox was stopped and removed."],
    ["SIGTERM", "Interrupted by SIGTERM; the sandbox was stopped and removed."],
  ] as const)("%s: says the CLI was interrupted by it, never the caller's AbortSignal", (name, message) => {
    const signals = new EventEmitter();
    const { io, stderr } = captureIo();
    const stop = stopOnSignals(signals, io, {
      announce: "stopping the sandbox",
      stopped: "the sandbox was stopped and removed",
    });
    signals.emit(name);
    signals.emit(name); // a second one changes nothing
    expect(stop.signal.aborted).toBe(true);
    expect(stop.by()).toBe(name);
    expect(stderr()).toContain(`sandbox-run: ${name} received, stopping the sandbox ...`);
    // The library wraps the signal's reason into the run's "aborted" error (execute path): its words are kept.
    const error = abortedError(stop.signal.reason, { runId: "0123456789ab" });
    const shown = captureIo();
    reportError(error, shown.io);
    expect(shown.stderr()).toContain(`sandbox-run: ${message}\n`);
    expect(shown.stderr()).not.toContain("AbortSignal");
    expect(error.hint).toMatch(/run it again to start over/);
    stop.dispose();
    expect(signals.listenerCount(name)).toBe(0);
  });
});

describe("a failed provider in a run given --models", () => {
  const failed = new SandboxRunError("model-error", "The model provider failed: ECONNREFUSED", {
    hint: "Check ... (`sandbox-run doctor`).",
    runId: "0123456789ab",
    exitCode: 0,
  });

  it("its hint names `sandbox-run doctor --models <file>`; the rest of the error is kept", () => {
    const shown = withModelsHint(failed, "cfg/models.json") as SandboxRunError;
    expect(shown.hint).toContain("`sandbox-run doctor --models cfg/models.json`");
    expect(shown).toMatchObject({
      code: "model-error",
      shortMessage: failed.shortMessage,
      runId: "0123456789ab",
      exitCode: 0,
    });
  });

  it("keeps what a failed run set on the error after it was made (warm, changedFiles, image)", () => {
    const run = new SandboxRunError("model-error", "The model provider failed", { hint: "h" });
    run.warm = true;
    run.image = "sandbox-run/pi:x";
    run.changedFiles = { created: ["a.txt"], modified: [], deleted: [] };
    const shown = withModelsHint(run, "cfg/models.json") as SandboxRunError;
    expect(shown).toMatchObject({ warm: true, image: "sandbox-run/pi:x", changedFiles: { created: ["a.txt"] } });
    expect(shown.message).toBe(`${run.shortMessage}\n${shown.hint}`);
  });

  it("without --models, or for another failure, the error is left as it is", () => {
    expect(withModelsHint(failed, undefined)).toBe(failed);
    const timeout = new SandboxRunError("timeout", "late", { hint: "h" });
    expect(withModelsHint(timeout, "cfg/models.json")).toBe(timeout);
  });
});

describe("what a stopped command says to do next", () => {
  it("is the command's own where it gives one (a run: what it wrote stays), else run it again", () => {
    expect(interruptedError("SIGINT", "the sandbox was stopped", "look at what it left.").hint).toBe(
      "The command was stopped by that signal, not by a failure; look at what it left.",
    );
    expect(interruptedError("SIGTERM", "the checks were stopped").hint).toMatch(/run it again to start over\.$/);
  });
});
