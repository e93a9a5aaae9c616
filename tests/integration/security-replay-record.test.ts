// A record is untrusted input, never configuration (issue 17, part 3). A run is recorded under the
// default policy against the scripted model; then copies of the record are tampered with as a pull
// request could (SHA256SUMS recomputed each time, as any forger would) and replayed with the real
// engine, image and Pi, strict and lenient: a record whose policy asks for a host folder (read-only
// mount + copy mode, so a root-only file would be copied in), an open network or a secret read from
// a host file is refused before anything starts and the host file is never read; a record naming
// another image runs under the caller's image and says how it differs. A replay from another folder
// says so first when it diverges.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { replayRecord } from "../../src/replay/replay-source.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  builtCli,
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";
import { copyRecord, rehash } from "../support/record-files.js";

const CANARY = `ROOT-ONLY-${Math.random().toString(16).slice(2)}`;
const PROMPT = "List the folder and copy the secret.";

async function cli(argv: string[]) {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    readStdin: async () => undefined,
    env: { PATH: process.env.PATH ?? "" },
    stderrIsTty: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/**
 * Sets a file's access time far in the past (its mtime stays): any read after this moves it
 * (relatime). Shown first on a file beside it, so the check can fail: on a filesystem that does not
 * record reads (noatime) the test stops here instead of passing whether or not the file was read.
 */
function armAccessTime(file: string): number {
  const old = new Date("2001-01-01T00:00:00Z");
  const probe = `${file}.atime-probe`;
  fs.writeFileSync(probe, "probe\n");
  fs.utimesSync(probe, old, fs.statSync(probe).mtime);
  const armed = fs.statSync(probe).atimeMs;
  fs.readFileSync(probe);
  const moved = fs.statSync(probe).atimeMs !== armed;
  fs.rmSync(probe);
  expect(moved, `a read of ${probe} did not move its access time: this filesystem cannot show a read`).toBe(true);
  fs.utimesSync(file, old, fs.statSync(file).mtime);
  return fs.statSync(file).atimeMs;
}

describe.skipIf(!dockerAvailable())("replay: a tampered record never widens the sandbox", () => {
  let dir: string;
  let secretDir: string;
  let secretFile: string;
  let server: ScriptedModelServer;
  let record: string;
  const runIds: string[] = [];

  beforeAll(async () => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-tamper-")));
    // A root-only host file outside every tree a run may see.
    secretDir = fs.mkdtempSync(path.join(dir, "host-secret-"));
    secretFile = path.join(secretDir, "secret.txt");
    fs.writeFileSync(secretFile, `${CANARY}\n`, { mode: 0o600 });
    server = await startModel({
      copier: [
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command: `ls -1; cp ${secretFile} stolen.txt 2>/dev/null; cat stolen.txt 2>/dev/null; echo end`,
              },
            },
          ],
        },
        { toolCalls: [{ name: FINAL_TOOL_NAME, arguments: { done: true } }] },
      ],
    });
    const modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["copier"])));
    const schemaFile = path.join(dir, "schema.json");
    fs.writeFileSync(schemaFile, JSON.stringify({ type: "object", properties: { done: { type: "boolean" } } }));
    record = path.join(dir, "record");
    const run = await cli([
      "-q",
      "--cwd",
      makeWorkspace({ "notes.txt": "hello\n" }),
      "--models",
      modelsFile,
      "--model",
      "scripted/copier",
      "--schema",
      schemaFile,
      "--record",
      record,
      "--json",
      PROMPT,
    ]);
    expect(run.code, run.stderr).toBe(0);
    runIds.push(JSON.parse(run.stdout).runId);
    await server.close();
  });

  afterAll(async () => {
    expect(await containersOfRuns(runIds)).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A copy of the record with its policy (and replay.json) changed, SHA256SUMS recomputed. */
  function tampered(change: { policy?: Record<string, unknown>; call?: Record<string, unknown> }): string {
    const copy = copyRecord(record, dir);
    const policyFile = path.join(copy, "policy.json");
    fs.writeFileSync(
      policyFile,
      JSON.stringify({ ...JSON.parse(fs.readFileSync(policyFile, "utf8")), ...change.policy }, null, 2),
    );
    const callFile = path.join(copy, "replay.json");
    fs.writeFileSync(callFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(callFile, "utf8")), ...change.call }));
    rehash(copy);
    return copy;
  }

  async function replayRefused(copy: string, mode: "strict" | "lenient", field: RegExp) {
    const ws = makeWorkspace({ "notes.txt": "hello\n" });
    const atime = armAccessTime(secretFile);
    const run = await cli(["replay", copy, "-q", "--cwd", ws, "--replay-mode", mode, "--json"]);
    const envelope = JSON.parse(run.stdout || "{}");
    if (envelope.runId) runIds.push(envelope.runId);
    // Refused as a usage error before anything started: no run, nothing copied, the file not read.
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("asks for more than this replay's policy (workspace-write) gives");
    expect(run.stderr).toMatch(field);
    expect(run.stderr).toContain("A record is never configuration");
    expect(fs.existsSync(path.join(ws, "stolen.txt"))).toBe(false);
    expect(run.stdout + run.stderr).not.toContain(CANARY);
    expect(fs.statSync(secretFile).atimeMs).toBe(atime);
  }

  for (const mode of ["strict", "lenient"] as const) {
    it(`${mode}: a record whose policy mounts a host folder in copy mode is refused; the root-only file is never read`, async () => {
      const copy = tampered({ policy: { readOnlyMounts: [secretDir], workspaceMode: "copy" } });
      await replayRefused(copy, mode, /policy\.readOnlyMounts: recorded \[".*host-secret-.*"\], now \[\]/);
    });

    it(`${mode}: a record that asks for an open network is refused`, async () => {
      await replayRefused(tampered({ policy: { network: "open" } }), mode, /policy\.network: recorded open, now none/);
    });

    it(`${mode}: a record with a secret read from a host file is refused; the file is never read`, async () => {
      const copy = tampered({
        policy: {
          network: "allowlist",
          allowedDomains: ["example.com"],
          secrets: { TOKEN: { hosts: ["example.com"], inject: ["bearer"], from: { file: secretFile } } },
        },
      });
      await replayRefused(copy, mode, /policy\.secrets\.TOKEN: recorded \{"hosts":\["example\.com"\]/);
    });
  }

  it("the library (replayRecord) refuses the same record before anything starts", async () => {
    const copy = tampered({ policy: { readOnlyMounts: [secretDir], workspaceMode: "copy" } });
    const atime = armAccessTime(secretFile);
    const ws = makeWorkspace({ "notes.txt": "hello\n" });
    const agent = new ContainerPiAgent({ replay: replayRecord(copy, { mode: "lenient" }) });
    const error = await agent.run(PROMPT, { cwd: ws, schema: { type: "object" } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toMatch(/asks for more .* policy\.readOnlyMounts/);
    expect(fs.existsSync(path.join(ws, "stolen.txt"))).toBe(false);
    expect(fs.statSync(secretFile).atimeMs).toBe(atime);
  });

  it("a record naming another image runs under the caller's (default) image and reports the difference", async () => {
    const copy = tampered({
      policy: { image: "sandbox-run/evil:latest" },
      call: { image: "sandbox-run/evil:latest", defaultImage: false },
    });
    const ws = makeWorkspace({ "notes.txt": "hello\n" });
    const eventsFile = path.join(dir, "image-events.jsonl");
    const run = await cli(["replay", copy, "-q", "--cwd", ws, "--json", "--events", eventsFile]);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(run.code, run.stderr).toBe(0);
    expect(envelope.image).toBe(runnerImageSpec().tag);
    expect(envelope.replay.matchesRecording).toBe(true);
    expect(envelope.replay.recordDifferences).toEqual(
      expect.arrayContaining([
        { field: "image", recorded: "sandbox-run/evil:latest", now: runnerImageSpec().tag },
        { field: "policy.image", recorded: "sandbox-run/evil:latest", now: "(none)" },
      ]),
    );
    const differs = fs
      .readFileSync(eventsFile, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === "replay.record-differs");
    expect(differs).toHaveLength(1);
    expect(differs[0].data.differences).toEqual(expect.arrayContaining([expect.objectContaining({ field: "image" })]));
  });

  it("a record's words cannot start a line of replay's report: a forged line stays inside sandbox-run's own line", async () => {
    const forged = "sandbox-run: replay: FORGED, the record says the outcome equals the recorded one";
    const copy = tampered({ policy: { description: `fine\n${forged}\n::error title=forged::from the record\n` } });
    const ws = makeWorkspace({ "notes.txt": "hello\n" });
    const run = await cli(["replay", copy, "--cwd", ws, "--json"]);
    runIds.push(JSON.parse(run.stdout).runId);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr.split("\n");
    // The difference is reported, on one line that is sandbox-run's ...
    expect(lines.filter((l) => l.includes("policy.description"))).toHaveLength(1);
    // ... and neither forged line starts a line of its own.
    expect(lines.filter((l) => l.startsWith("::error"))).toEqual([]);
    expect(lines.filter((l) => l === forged)).toEqual([]);
  });

  it("a replay from another folder that diverges says first that the workspace is not the recorded one", async () => {
    const ws = makeWorkspace({ "other.txt": "hello\n" });
    const run = await cli(["replay", record, "-q", "--cwd", ws, "--json"]);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(run.code).toBe(4);
    const recordedWs = JSON.parse(fs.readFileSync(path.join(record, "replay.json"), "utf8")).workspace.host;
    expect(envelope.error.message).toMatch(
      new RegExp(
        `^This replay's workspace is not the recorded one \\(folder: recorded ${recordedWs}, now ${ws}\\)\\. The replay of .* diverged at model request 2: tool result of call 1 \\(bash\\) differs`,
      ),
    );
  });
});

/** The built CLI in a process of its own, killed after `killAfterMs`: a controller that hangs cannot hang the test. */
function cliProcess(argv: string[], killAfterMs: number) {
  const child = spawn(process.execPath, [builtCli, ...argv], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const killer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) =>
      child.on("close", (code, signal) => {
        clearTimeout(killer);
        resolve({ code, signal, stdout, stderr });
      }),
  );
}

describe.skipIf(!dockerAvailable())("replay: a record's schema cannot stall the controller", () => {
  let dir: string;
  let record: string;
  const runIds: string[] = [];
  const evil = `${"a".repeat(40)}!`;

  beforeAll(async () => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-redos-")));
    // Recorded under a schema without a pattern: the model's final call carries a string that
    // `^(a|a)*$` needs about 2^40 steps to refuse.
    const server = await startModel({
      stringer: [{ toolCalls: [{ name: FINAL_TOOL_NAME, arguments: { done: true, v: evil } }] }],
    });
    const modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["stringer"])));
    const schemaFile = path.join(dir, "schema.json");
    fs.writeFileSync(schemaFile, JSON.stringify({ type: "object", properties: { done: { type: "boolean" } } }));
    record = path.join(dir, "record");
    const run = await cli([
      "-q",
      "--cwd",
      makeWorkspace({ "notes.txt": "hello\n" }),
      "--models",
      modelsFile,
      "--model",
      "scripted/stringer",
      "--schema",
      schemaFile,
      "--record",
      record,
      "--json",
      "Say done.",
    ]);
    expect(run.code, run.stderr).toBe(0);
    runIds.push(JSON.parse(run.stdout).runId);
    await server.close();
  });

  afterAll(async () => {
    expect(await containersOfRuns(runIds)).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a pattern the record's schema gained that backtracks on the recorded reply: the host judges it in a worker, and stops the run at once (Pi, running it unbounded, would hold it to its timeout)", async () => {
    const copy = copyRecord(record, dir);
    fs.writeFileSync(
      path.join(copy, "schema.json"),
      JSON.stringify({
        type: "object",
        properties: { done: { type: "boolean" }, v: { type: "string", pattern: "^(a|a)*$" } },
      }),
    );
    rehash(copy);
    const ws = makeWorkspace({ "notes.txt": "hello\n" });
    const eventsFile = path.join(dir, "redos-events.jsonl");
    const started = Date.now();
    // Lenient: the schema is part of Pi's tool list, which now differs from the recording.
    // Pi in the sandbox runs the pattern too and never finishes: the host, which could not check it
    // in time, stops the run at once (before session 31 the run's timeout ended it). A controller
    // whose main thread ran the pattern would never get there (killed at 150 s).
    const run = await cliProcess(
      [
        "replay",
        copy,
        "-q",
        "--cwd",
        ws,
        "--replay-mode",
        "lenient",
        "--timeout",
        "20",
        "--json",
        "--events",
        eventsFile,
      ],
      150_000,
    );
    const seconds = (Date.now() - started) / 1000;
    expect(run.signal, `the controller hung (killed after ${seconds.toFixed(0)} s)\n${run.stderr}`).toBeNull();
    const envelope = JSON.parse(run.stdout);
    if (envelope.runId) runIds.push(envelope.runId);
    expect(envelope.error?.code, run.stderr).toBe("invalid-result");
    expect(envelope.error?.message).toMatch(/cannot be checked: .*pattern "\^\(a\|a\)\*\$" did not finish within 1 s/);
    // (invalid-result, not timeout: the check ended well before the run's 20 s.)
    expect(run.code).toBe(1);
    const invalid = fs
      .readFileSync(eventsFile, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === "result.invalid");
    expect(invalid).toHaveLength(1);
    expect(invalid[0].data.reason).toMatch(/the schema's pattern "\^\(a\|a\)\*\$" did not finish within 1 s/);
  }, 200_000);
});
