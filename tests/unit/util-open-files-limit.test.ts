// Fd caches size themselves by the process's soft limit of open files (review, session 32: copy
// mode's apply held a fixed 128 and failed with EMFILE under `ulimit -n 128`). A child process
// started under a lower limit reads its own.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const MODULE = new URL("../../src/util/open-files-limit.ts", import.meta.url).pathname;

function underLimit(limit: number): { limit: number; budget: number } {
  const script = `import { openFilesLimit, fdBudget } from ${JSON.stringify(MODULE)}; console.log(JSON.stringify({ limit: openFilesLimit(), budget: fdBudget(128) }));`;
  const run = spawnSync(
    "bash",
    ["-c", `ulimit -n ${limit} && exec "${process.execPath}" --import tsx --input-type=module -e '${script}'`],
    { encoding: "utf8" },
  );
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as { limit: number; budget: number };
}

describe("openFilesLimit and fdBudget", () => {
  it("read the soft limit: a quarter of it where that is under what a cache wants, the want otherwise", () => {
    expect(underLimit(128)).toEqual({ limit: 128, budget: 32 });
    expect(underLimit(4096)).toEqual({ limit: 4096, budget: 128 });
  });

  it("never below 8, however low the limit", () => {
    expect(underLimit(40)).toEqual({ limit: 40, budget: 10 });
    expect(underLimit(30)).toEqual({ limit: 30, budget: 8 });
  });
});
