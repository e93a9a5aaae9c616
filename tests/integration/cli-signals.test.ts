// Ctrl-C (SIGINT) during `sandbox-run demo` and `sandbox-run doctor`, through the built CLI: both stop
// like a run does (review, session 27: F19, where Node's default handler ended them mid-run). The
// demo's sandbox is stopped and removed, its run folder and its scratch folder (the workspace and
// host-secret.txt) removed, exit 130; doctor removes the container a check started, exit 130.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LABEL_OWNER_PID } from "../../src/sandbox-contract.js";
import { builtCli, docker, dockerAvailable } from "../support/harness.js";

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The built CLI with its own TMPDIR (so what it leaves there is seen), stderr read as it comes. */
function startCli(args: string[], tmp: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  delete env.SANDBOX_RUN_MODEL;
  delete env.SANDBOX_RUN_WARM;
  const child: ChildProcess = spawn(process.execPath, [builtCli, ...args], {
    cwd: tmp,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let exited = false;
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  const exit = new Promise<Exit>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      exited = true;
      resolve({ code, signal, stdout, stderr });
    });
  });
  /** Resolves with stderr once it matches `pattern` (polls; bounded by the test timeout). */
  const stderrMatches = async (pattern: RegExp): Promise<RegExpExecArray> => {
    for (;;) {
      const match = pattern.exec(stderr);
      if (match) return match;
      if (exited) throw new Error(`the CLI exited before its stderr matched ${pattern}:\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  return { child, exit, stderrMatches };
}

// Short: a run folder's socket paths under it must stay within unix sockets' 107 bytes.
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sig-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** Everything under `dir`, as paths relative to it (the private run-folder parent included). */
function tree(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort();
}

describe.skipIf(!dockerAvailable())("Ctrl-C during demo and doctor", () => {
  it("demo: SIGINT once its sandbox is up stops it; no container, run folder or demo folder is left; exit 130", async () => {
    if (!fs.existsSync(builtCli)) throw new Error(`${builtCli} is missing: run \`npm run build\` first.`);
    const tmp = fs.mkdtempSync(path.join(scratch, "d"));
    const { child, exit, stderrMatches } = startCli(["demo"], tmp);
    const started = await stderrMatches(/sandbox started \(([0-9a-f]{12})\)/);
    const containerId = started[1]!;
    // The demo's scratch folder and its run folder exist while its sandbox runs.
    expect(tree(tmp).some((p) => /^sandbox-run-demo-[^/]+\/host-secret\.txt$/.test(p))).toBe(true);
    expect(tree(tmp).some((p) => /^sandbox-run-\d+\/run-[0-9a-f]{12}$/.test(p))).toBe(true);
    child.kill("SIGINT");
    const result = await exit;
    expect(result.signal, result.stderr).toBeNull();
    expect(result.code, result.stderr).toBe(130);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("SIGINT received, stopping the demo's sandbox ...");
    expect(result.stderr).toContain("sandbox-run: Interrupted by SIGINT (Ctrl-C);");
    expect(result.stderr).not.toContain("AbortSignal");
    expect(await docker.listContainers({ all: true, filters: { id: [containerId] } })).toEqual([]);
    // Nothing left in its TMPDIR but the (empty) private parent of run folders.
    expect(tree(tmp).filter((p) => !/^sandbox-run-\d+$/.test(p))).toEqual([]);
  });

  it("doctor: SIGINT during its container check removes that container; exit 130", async () => {
    const tmp = fs.mkdtempSync(path.join(scratch, "c"));
    const { child, exit, stderrMatches } = startCli(["doctor"], tmp);
    // The line before the check that starts a container from the runner image.
    await stderrMatches(/ok {4}runner image \S+ \(Pi /);
    child.kill("SIGINT");
    const result = await exit;
    expect(result.signal, result.stderr).toBeNull();
    expect(result.code, result.stderr).toBe(130);
    expect(result.stderr).toContain("SIGINT received, stopping the checks ...");
    expect(result.stderr).toContain("sandbox-run: Interrupted by SIGINT (Ctrl-C);");
    expect(result.stderr).not.toContain("Ready.");
    const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER_PID}=${child.pid}`] } });
    expect(left).toEqual([]);
  });
});
