// A prompt read from stdin: while the CLI waits for it, a stop signal ends the command as it ends a
// run (a --json envelope, the signal's exit code, a message), and a wait says what it waits for.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";

function io(stdin: Promise<string | undefined>) {
  const out = { stdout: "", stderr: "" };
  const cliIo: CliIo = {
    stdout: (text) => void (out.stdout += text),
    stderr: (text) => void (out.stderr += text),
    readStdin: () => stdin,
    env: {},
    stderrIsTty: false,
  };
  return { cliIo, out };
}

describe("the prompt on stdin", () => {
  it("a stop signal while stdin never ends: one aborted envelope, the signal's exit code, a message (review, session 33: Node's default handler ended it silently)", async () => {
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
      ["SIGHUP", 129],
    ] as const) {
      const signals = new EventEmitter();
      const { cliIo, out } = io(new Promise(() => {}));
      const running = runCli(["--json", "--model", "scripted/x"], cliIo, signals);
      // The command's module loads first: signal until it listens.
      const again = setInterval(() => signals.emit(signal), 50);
      try {
        expect(await running).toBe(code);
      } finally {
        clearInterval(again);
      }
      const envelope = JSON.parse(out.stdout);
      expect(envelope).toMatchObject({ ok: false, exitCode: code, error: { code: "aborted" } });
      expect(out.stderr).toContain(`${signal} received, no longer waiting for the task on stdin`);
      expect(out.stderr).toMatch(/Interrupted by SIG[A-Z]+.*; nothing was started\./);
      expect(signals.listenerCount(signal)).toBe(0);
    }
  });

  it("says once that it waits for stdin to end, after 2 s without it; not with --quiet", async () => {
    const late = (ms: number) => new Promise<string>((resolve) => setTimeout(() => resolve(""), ms));
    const waited = io(late(2_300));
    await runCli(["--model", "scripted/x"], waited.cliIo, new EventEmitter());
    expect(waited.out.stderr).toContain("sandbox-run: reading the task from stdin until it ends (Ctrl-D)");
    expect(waited.out.stderr).toMatch(/No prompt given/);
    const quiet = io(late(2_300));
    await runCli(["--quiet", "--model", "scripted/x"], quiet.cliIo, new EventEmitter());
    expect(quiet.out.stderr).not.toContain("reading the task from stdin");
  });
});
