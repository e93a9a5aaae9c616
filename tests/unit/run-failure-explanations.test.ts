// What a failed run's exit and stderr are taken to mean, and what the error then tells the user to do.
import { describe, expect, it } from "vitest";
import { limitFromExit, limitHint } from "../../src/run/failure-explanations.js";

describe("limitFromExit and limitHint", () => {
  it("a fork that failed with EAGAIN is a process limit; the hint names the engine's per-user one too (a daemon's default-ulimits nproc, which no policy field changes: review, session 33)", () => {
    const found = limitFromExit(
      { exitCode: 1, oomKilled: false },
      "exec /usr/bin/perl: resource temporarily unavailable",
    );
    expect(found?.limit).toBe("pids");
    const hint = limitHint(found?.limit);
    expect(hint).toContain("limits.pids");
    expect(hint).toMatch(/default-ulimits \(daemon\.json\)/);
  });

  it("stderr names a limit only for a run that failed by its exit", () => {
    expect(limitFromExit({ exitCode: 0, oomKilled: false }, "fork: retry: Resource temporarily unavailable")).toBe(
      undefined,
    );
    expect(limitFromExit({ exitCode: 137, oomKilled: true }, "")?.limit).toBe("memory");
  });
});
