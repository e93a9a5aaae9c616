// The built CLI as a user runs it (`node dist/cli/main.js`, after `npm run build`), on the real
// engine with the scripted model: stdout carries only the result, --events gets JSONL, and
// each kind of failure has its exit code.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import type { RunEvent } from "../../src/run/run-events.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  builtCli,
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const mainJs = path.join(repo, "dist/cli/main.js");
const sleepThenText = [
  { toolCalls: [{ name: "bash", arguments: { command: "sleep 30; echo woke" } }] },
  { text: "finished" },
];

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function startCli(args: string[], stdin?: string): { child: ChildProcess; exit: Promise<Exit> } {
  const env = { ...process.env };
  delete env.SANDBOX_RUN_MODEL;
  const child = spawn(process.execPath, [mainJs, ...args], { cwd: repo, env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  if (stdin !== undefined) child.stdin!.end(stdin);
  const exit = new Promise<Exit>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
  return { child, exit };
}

const readEvents = (file: string): RunEvent[] =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as RunEvent)
    : [];

/** Resolves once the events file shows an event of `type` (polls; bounded by the test timeout). */
async function waitForEvent(file: string, type: string, exited: () => boolean): Promise<void> {
  while (!exited()) {
    if (fs.existsSync(file) && fs.readFileSync(file, "utf8").includes(`"type":"${type}"`)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the CLI exited before writing a ${type} event`);
}

describe.skipIf(!dockerAvailable())("sandbox-run CLI", () => {
  let server: ScriptedModelServer;
  let dir: string;
  let ws: string;
  let modelsFile: string;
  const runIds = new Set<string>();

  beforeAll(async () => {
    if (!fs.existsSync(mainJs)) throw new Error(`${mainJs} is missing: run \`npm run build\` before these tests.`);
    server = await startModel({
      schema: [{ toolCalls: [{ name: FINAL_TOOL_NAME, arguments: { answer: "forty-two", confidence: 0.9 } }] }],
      events: [{ toolCalls: [{ name: "bash", arguments: { command: "echo from-bash" } }] }, { text: "all done" }],
      stdin: [{ text: "read your prompt" }],
      full: [{ text: "done on a full disk" }],
      broken: [{ httpStatus: 400, body: "this model does not exist on the upstream" }],
      slow: sleepThenText,
      interrupt: sleepThenText,
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-cli-it-"));
    ws = makeWorkspace({ "README.md": "# cli\n" });
    modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(
      modelsFile,
      JSON.stringify(modelsFor(server, ["schema", "events", "stdin", "full", "broken", "slow", "interrupt"])),
    );
  });

  afterEach(async () => {
    expect(await containersOfRuns([...runIds])).toEqual([]);
    runIds.clear();
  });

  afterAll(async () => {
    await server?.close();
    for (const d of [dir, ws]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  const base = (model: string) => ["--models", modelsFile, "--model", `scripted/${model}`, "--cwd", ws];

  it("--schema prints only the validated JSON object on stdout and exits 0", async () => {
    const schemaFile = path.join(dir, "s.json");
    fs.writeFileSync(
      schemaFile,
      JSON.stringify({
        type: "object",
        properties: { answer: { type: "string" }, confidence: { type: "number" } },
        required: ["answer"],
      }),
    );
    const eventsFile = path.join(dir, "schema-events.jsonl");
    const { exit } = startCli([
      "--schema",
      schemaFile,
      ...base("schema"),
      "--events",
      eventsFile,
      "What is the answer?",
    ]);
    const result = await exit;
    for (const e of readEvents(eventsFile)) runIds.add(e.runId);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ answer: "forty-two", confidence: 0.9 });
    expect(result.stdout).toBe(`${JSON.stringify({ answer: "forty-two", confidence: 0.9 }, null, 2)}\n`);
    expect(result.stderr).toContain("sandbox-run: done in");
  });

  it("an --events file the disk cannot take (/dev/full): the run goes on and succeeds, and the CLI says the file ends early (review, session 32)", async () => {
    const result = await startCli([...base("full"), "--events", "/dev/full", "--quiet", "Say done."]).exit;
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("done on a full disk\n");
    expect(result.stderr).toBe(
      "sandbox-run: warning: the events file /dev/full ends early: ENOSPC; the run goes on.\n",
    );
  });

  it("stdout on a full disk (/dev/full): exit 1, and stderr says the output was lost, not that the agent failed (review, session 33)", () => {
    const full = fs.openSync("/dev/full", "w");
    try {
      const result = spawnSync(process.execPath, [builtCli, "policy", "list"], {
        stdio: ["ignore", full, "pipe"],
        encoding: "utf8",
      });
      expect(result.status).toBe(1);
      expect(result.stderr).toBe(
        "sandbox-run: the output could not be written to stdout (the disk or file behind it is full, or it failed): exit 1\n",
      );
    } finally {
      fs.closeSync(full);
    }
  });

  it("--events writes the run's events as JSONL RunEvents", async () => {
    const eventsFile = path.join(dir, "events.jsonl");
    const result = await startCli([...base("events"), "--events", eventsFile, "--quiet", "Run a command."]).exit;
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("all done\n");
    expect(result.stderr).toBe(""); // --quiet

    const events = readEvents(eventsFile);
    for (const e of events) runIds.add(e.runId);
    expect(events.length).toBeGreaterThan(10);
    expect(new Set(events.map((e) => e.runId)).size).toBe(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    for (const e of events) {
      // Pi's step events (turn, tool start/end, model reply) also carry their normalised `progress`.
      const keys = ["data", "runId", "seq", "source", "time", "type"];
      expect(Object.keys(e).sort()).toEqual(e.progress ? [...keys.slice(0, 1), "progress", ...keys.slice(1)] : keys);
      expect(["pi", "sandbox"]).toContain(e.source);
      expect(typeof e.time).toBe("number");
    }
    const types = events.map((e) => `${e.source}:${e.type}`);
    expect(types).toEqual(
      expect.arrayContaining([
        "sandbox:container.started",
        "pi:tool_execution_start",
        "pi:agent_end",
        "sandbox:container.removed",
      ]),
    );
    const bashEnd = events.find((e) => e.type === "tool_execution_end");
    expect(JSON.stringify(bashEnd?.data)).toContain("from-bash");
  });

  it("reads the prompt from stdin when none is given", async () => {
    const eventsFile = path.join(dir, "stdin-events.jsonl");
    const result = await startCli(
      [...base("stdin"), "--events", eventsFile, "--quiet"],
      "the prompt came through stdin: banana\n",
    ).exit;
    for (const e of readEvents(eventsFile)) runIds.add(e.runId);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("read your prompt\n");
    const request = server.requests.find((r) => r.body.model === "stdin")!;
    expect(JSON.stringify(request.body.messages)).toContain("the prompt came through stdin: banana");
  });

  it("exit 2 on a usage error, with the message on stderr and nothing on stdout", async () => {
    const result = await startCli([...base("events"), "--sandbox", "yolo", "task"]).exit;
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^sandbox-run: --sandbox must be read-only, workspace-write or danger-full-access/);
  });

  it("exit 2 when there is no prompt at all (empty stdin)", async () => {
    const result = await startCli([...base("events")], "").exit;
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("No prompt given.");
  });

  it("exit 1 when the model provider fails, with its message", async () => {
    const eventsFile = path.join(dir, "broken-events.jsonl");
    const result = await startCli([...base("broken"), "--events", eventsFile, "Hello?"]).exit;
    for (const e of readEvents(eventsFile)) runIds.add(e.runId);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("sandbox-run: The model provider failed:");
    expect(result.stderr).toContain("this model does not exist on the upstream");
  });

  it("exit 124 on timeout", async () => {
    const eventsFile = path.join(dir, "slow-events.jsonl");
    const result = await startCli([...base("slow"), "--events", eventsFile, "--timeout", "4", "Sleep."]).exit;
    for (const e of readEvents(eventsFile)) runIds.add(e.runId);
    expect(result.code).toBe(124);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("did not finish within 4 s");
    expect(readEvents(eventsFile).some((e) => e.type === "container.removed")).toBe(true);
  });

  it("exit 130 on SIGINT mid-run, with the container removed", async () => {
    const eventsFile = path.join(dir, "interrupt-events.jsonl");
    const { child, exit } = startCli([...base("interrupt"), "--events", eventsFile, "Sleep."]);
    let exited = false;
    void exit.then(() => (exited = true));
    await waitForEvent(eventsFile, "tool_execution_start", () => exited);
    const runId = readEvents(eventsFile)[0]!.runId;
    runIds.add(runId);
    expect(await containersOfRuns([runId])).toHaveLength(1); // the sandbox is there while bash sleeps
    child.kill("SIGINT");
    const result = await exit;
    expect(result.code).toBe(130);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("SIGINT received");
    // The CLI's own words: no "caller's AbortSignal" at a terminal (review, session 27: F8).
    expect(result.stderr).toContain(
      "sandbox-run: Interrupted by SIGINT (Ctrl-C); the sandbox, if it had started, was stopped and removed.",
    );
    // What the run already wrote in a mounted workspace stays: the hint says so, not "start over".
    expect(result.stderr).toContain("stays there, checked like any run's");
    expect(result.stderr).not.toContain("AbortSignal");
    expect(await containersOfRuns([runId])).toEqual([]);
    expect(readEvents(eventsFile).some((e) => e.type === "tool_execution_end")).toBe(false);
  });
});
