// What `import "sandbox-run"` loads before anything is called: no zod (the schemas of records, Pi's
// events, the relay's messages, engines files and the watch's state are built on first use), and
// never two copies of it (review, session 27: the import loaded zod's ESM and CommonJS builds, 0.5-0.8
// s of CPU). Read from a module tracer, not timed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { runProcess } from "../support/harness.js";

const repo = path.resolve(import.meta.dirname, "../..");
const tracer = pathToFileURL(path.join(repo, "tests/support/module-trace.mjs")).href;

describe("import sandbox-run", () => {
  it("loads no zod until a schema is needed", async () => {
    const trace = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-trace-")), "modules");
    const entry = pathToFileURL(path.join(repo, "src/index.ts")).href;
    const run = await runProcess(
      process.execPath,
      ["--import", "tsx", "--import", tracer, "--input-type=module", "-e", `await import(${JSON.stringify(entry)});`],
      {
        cwd: repo,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", SANDBOX_RUN_MODULE_TRACE: trace },
      },
    );
    expect(run.status, run.stderr).toBe(0);
    const loaded = fs.readFileSync(trace, "utf8").trim().split("\n");
    expect(loaded.some((line) => line.includes("/src/index.ts"))).toBe(true);
    expect(loaded.filter((line) => line.includes(`${path.sep}node_modules${path.sep}zod${path.sep}`))).toEqual([]);
  });
});
