// A child process the host waits for: killed by its caller's stop (the run's signal), not only by
// its own time and output bounds.
import { describe, expect, it, vi } from "vitest";
import { runCappedProcess } from "../../src/util/capped-process.js";

describe("runCappedProcess", () => {
  it("kills the command when the caller's signal aborts, and rejects saying so", async () => {
    const stop = new AbortController();
    const running = runCappedProcess("sleep", ["600"], {
      cwd: "/",
      env: { PATH: process.env.PATH },
      maxOutputBytes: 1024,
      signal: stop.signal,
    });
    setTimeout(() => stop.abort(), 100);
    await expect(running).rejects.toThrow("sleep was stopped");
  });

  it("does not start a command once the signal has aborted", async () => {
    await expect(
      runCappedProcess(
        "touch",
        ["/nonexistent-dir/never"],
        { cwd: "/", env: { PATH: process.env.PATH }, maxOutputBytes: 1024, signal: AbortSignal.abort() },
        "touch",
      ),
    ).rejects.toThrow("touch was stopped before it started");
  });

  it("answers an ordinary command as before (its exit status, stdout, stderr)", async () => {
    const done = await runCappedProcess("sh", ["-c", "echo out; echo err >&2; exit 3"], {
      cwd: "/",
      env: { PATH: process.env.PATH },
      maxOutputBytes: 1024,
      signal: new AbortController().signal,
    });
    expect(done).toEqual({ status: 3, stdout: Buffer.from("out\n"), stderr: "err\n" });
  });

  it("fails a command that ran past its deadline even when its exit was handled before the timer fired", async () => {
    // The timer is held back (a busy loop can see the child's exit first); the clock still says it ran too long.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const late = runCappedProcess("sleep", ["0.1"], {
        cwd: "/",
        env: { PATH: process.env.PATH },
        maxOutputBytes: 1024,
        timeoutMs: 20,
      });
      await expect(late).rejects.toThrow("sleep took longer than 0 s");
    } finally {
      vi.useRealTimers();
    }
  });
});
