// The CLI's own output that cannot be written: a reader gone (`| head`, a closed terminal) is no
// failure and never ends a run early (EPIPE is dropped); a full disk behind `> file` is one (exit 1).
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const repo = path.resolve(import.meta.dirname, "../..");
const cli = ["--import", "tsx", path.join(repo, "src/cli/main.ts")];

describe("output the CLI cannot write", () => {
  it("> /dev/full (ENOSPC): the command fails with exit 1 instead of reporting success", () => {
    const full = fs.openSync("/dev/full", "w");
    try {
      const run = spawnSync(process.execPath, [...cli, "policy", "show", "read-only"], {
        cwd: repo,
        stdio: ["ignore", full, "pipe"],
        encoding: "utf8",
      });
      expect(run.status, run.stderr).toBe(1);
      expect(run.stderr).not.toMatch(/^\s+at /m);
    } finally {
      fs.closeSync(full);
    }
  });

  it("a reader that closes the pipe at once (EPIPE): no crash, no stack trace, exit 0", async () => {
    const child = spawn(process.execPath, [...cli, "policy", "show", "read-only"], {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, stderr).toBe(0);
    expect(stderr).not.toMatch(/EPIPE|^\s+at /m);
  });
});
