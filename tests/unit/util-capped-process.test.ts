// A child process the host waits for: killed by its caller's stop (the run's signal), not only by
// its own time and output bounds.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
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

  it("a bounded command's deadline holds when its controller dies: the command does not outlive it by more than the grace (review, session 35: a git index-pack ran on for 675 s)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-capped-"));
    try {
      const script = path.join(dir, "controller.mts");
      fs.writeFileSync(
        script,
        `import { runCappedProcess } from ${JSON.stringify(path.resolve("src/util/capped-process.ts"))};
void runCappedProcess("sh", ["-c", "echo $$ > ${dir}/pid; exec sleep 600"], { cwd: "/", env: { PATH: process.env.PATH }, maxOutputBytes: 1024, timeoutMs: 1000 });
setInterval(() => {}, 1000);
`,
      );
      const controller = spawn(process.execPath, ["--import", "tsx", script], { stdio: "ignore" });
      const pidFile = path.join(dir, "pid");
      await vi.waitFor(() => expect(fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim()).toBeTruthy(), {
        timeout: 20_000,
        interval: 50,
      });
      const pid = Number(fs.readFileSync(pidFile, "utf8"));
      controller.kill("SIGKILL");
      const alive = () =>
        fs.existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
      expect(alive()).toBe(true);
      // Its deadline (1 s) plus the grace (5 s): gone well before the command's own 600 s.
      try {
        await vi.waitFor(() => expect(alive()).toBe(false), { timeout: 15_000, interval: 200 });
      } finally {
        if (alive()) process.kill(pid, "SIGKILL");
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it("a command that cannot be started under the bound rejects with the spawn error it would have had (the host's git missing is the host's trouble, not the pack's)", async () => {
    await expect(
      runCappedProcess("git", ["--version"], {
        cwd: "/",
        env: { PATH: "/nonexistent" },
        maxOutputBytes: 1024,
        timeoutMs: 5000,
      }),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });
});
