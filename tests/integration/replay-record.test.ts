// Record a run against the scripted model, stop the model, replay the record: the real engine, image,
// Pi and gateway, with the model's replies given back from the record and nothing leaving the host.
// A workspace that makes a tool result differ stops a strict replay (exit 4, the message named) and
// is reported by a lenient one; another policy whose sandbox makes the recorded tool call fail is a
// divergence too; a record from other versions says so. No credential of the recording is in it.
import fs from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { SCRUBBED } from "../../src/record/credential-scrubber.js";
import { replayRecord } from "../../src/replay/replay-source.js";
import type { RunEvent } from "../../src/run/run-events.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { containersOfRuns, dockerAvailable, makeWorkspace, startModel } from "../support/harness.js";
import { copyRecord, rehash } from "../support/record-files.js";

const CANARY = `sk-canary-${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
const NOTES = "hello notes\n";
const PROMPT = "Summarise notes.txt.";
const final = { summary: "the notes say hello" };

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

function readEvents(file: string): RunEvent[] {
  return fs
    .readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as RunEvent);
}

/** Every file of the folder, read as bytes: the canary in any of them (or base64 of it) is a leak. */
function assertNoCanary(dir: string): void {
  for (const name of fs.readdirSync(dir)) {
    const bytes = fs.readFileSync(path.join(dir, name));
    expect(bytes.includes(CANARY), name).toBe(false);
    expect(bytes.includes(Buffer.from(CANARY).toString("base64").slice(0, 20)), name).toBe(false);
  }
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

describe.skipIf(!dockerAvailable())("replay: a recorded run played back offline", () => {
  let dir: string;
  let server: ScriptedModelServer;
  let serverPort: number;
  let record: string;
  let recorded: { result: unknown; changedFiles: unknown; runId: string };
  let schemaFile: string;
  const runIds: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-replay-"));
    server = await startModel({
      notes: [
        { toolCalls: [{ name: "bash", arguments: { command: "cat notes.txt; echo done > out.txt" } }] },
        { toolCalls: [{ name: FINAL_TOOL_NAME, arguments: final }] },
      ],
    });
    serverPort = Number(new URL(server.baseUrl).port);
    const modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(
      modelsFile,
      JSON.stringify({
        providers: {
          scripted: { baseUrl: server.baseUrl, api: "openai-completions", apiKey: CANARY, models: [{ id: "notes" }] },
        },
      }),
    );
    schemaFile = path.join(dir, "schema.json");
    fs.writeFileSync(
      schemaFile,
      JSON.stringify({ type: "object", properties: { summary: { type: "string" } }, required: ["summary"] }),
    );
    record = path.join(dir, "record");
    const ws = makeWorkspace({ "notes.txt": NOTES });
    const run = await cli([
      "-q",
      "--cwd",
      ws,
      "--models",
      modelsFile,
      "--model",
      "scripted/notes",
      "--schema",
      schemaFile,
      "--record",
      record,
      "--json",
      PROMPT,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const envelope = JSON.parse(run.stdout);
    recorded = { result: envelope.result, changedFiles: envelope.changedFiles, runId: envelope.runId };
    runIds.push(envelope.runId);
    // The key was in play: the model server got it from the gateway.
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${CANARY}`, `Bearer ${CANARY}`]);
    await server.close();
  });

  afterAll(async () => {
    expect(await containersOfRuns(runIds)).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the record holds the model traffic and not the key", () => {
    const names = fs.readdirSync(record);
    expect(names).toContain("exchanges.jsonl");
    expect(names).toContain("replay.json");
    const lines = fs.readFileSync(path.join(record, "exchanges.jsonl"), "utf8").trim().split("\n");
    expect(lines.map((l) => JSON.parse(l).seq)).toEqual([1, 2]);
    expect(JSON.parse(fs.readFileSync(path.join(record, "meta.json"), "utf8"))).toMatchObject({
      format: 2,
      versions: { pi: "1.6.0" },
    });
    assertNoCanary(record);
  });

  it("with the model gone: the same result and changed files, every reply from the record, nothing leaves", async () => {
    expect(await refusesConnections(serverPort)).toBe(true);
    const ws = makeWorkspace({ "notes.txt": NOTES });
    const eventsFile = path.join(dir, "replay-events.jsonl");
    const run = await cli(["replay", record, "-q", "--cwd", ws, "--json", "--events", eventsFile]);
    expect(run.code, run.stderr).toBe(0);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(envelope.result).toEqual(recorded.result);
    expect(envelope.result).toEqual(final);
    expect(envelope.changedFiles).toEqual(recorded.changedFiles);
    expect(fs.readFileSync(path.join(ws, "out.txt"), "utf8")).toBe("done\n");
    expect(envelope.replay).toMatchObject({ mode: "strict", answered: 2, recorded: 2, matchesRecording: true });
    expect(envelope.replay.divergences).toEqual([]);

    const forwarded = readEvents(eventsFile).filter(
      (e) => e.type === "gateway.request" && e.data.upstreamUrl !== undefined,
    );
    expect(forwarded).toHaveLength(2);
    for (const event of forwarded) {
      const upstream = new URL(String(event.data.upstreamUrl));
      expect(upstream.hostname).toBe("127.0.0.1");
      expect(upstream.pathname).toMatch(/^\/replay-[0-9a-f]{32}\//); // the replay server's secret base path
      expect(Number(upstream.port)).not.toBe(serverPort);
    }
    // The replay server lived only as long as the run.
    expect(await refusesConnections(Number(new URL(String(forwarded[0]!.data.upstreamUrl)).port))).toBe(true);
    expect(await refusesConnections(serverPort)).toBe(true);
  });

  it("strict: a workspace file that makes a tool result differ stops the run with exit 4, naming the message", async () => {
    const ws = makeWorkspace({ "notes.txt": "goodbye notes\n" });
    const run = await cli(["replay", record, "-q", "--cwd", ws, "--json"]);
    expect(run.code).toBe(4);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(envelope.error.code).toBe("replay-divergence");
    expect(envelope.error.message).toContain(
      'model request 2: tool result of call 1 (bash) differs: recorded "hello notes\\n", now "goodbye notes\\n"',
    );
    expect(run.stderr).toContain("tool result of call 1 (bash) differs");
    expect(fs.existsSync(path.join(ws, "out.txt"))).toBe(true); // the tool really ran; the model's next reply was withheld
  });

  it("lenient (library): the run completes with the recorded result and reports the difference", async () => {
    const ws = makeWorkspace({ "notes.txt": "goodbye notes\n" });
    const events: RunEvent[] = [];
    const agent = new ContainerPiAgent({
      replay: replayRecord(record, { mode: "lenient" }),
      onEvent: (e) => void events.push(e),
    });
    const details = await agent.runDetailed(PROMPT, {
      cwd: ws,
      schema: JSON.parse(fs.readFileSync(schemaFile, "utf8")),
    });
    runIds.push(details.runId);
    expect(details.result).toEqual(final);
    expect(details.replay).toMatchObject({ mode: "lenient", answered: 2, recorded: 2 });
    expect(details.replay!.divergences).toEqual([
      {
        generation: 2,
        difference: 'tool result of call 1 (bash) differs: recorded "hello notes\\n", now "goodbye notes\\n"',
        fatal: false,
      },
    ]);
    expect(details.replay!.outcome.matches).toBe(true);
    const reported = events.filter((e) => e.type === "replay.divergence");
    expect(reported).toHaveLength(1);
    expect(reported[0]!.data).toMatchObject({ generation: 2, mode: "lenient" });
  });

  it("another policy (read-only) than the recorded writable one: refused before anything starts, naming the difference", async () => {
    const ws = makeWorkspace({ "notes.txt": NOTES });
    const run = await cli(["replay", record, "-q", "--cwd", ws, "--policy", "read-only", "--json"]);
    expect(run.code).toBe(2);
    // --json: the usage error's envelope on stdout, the message on stderr too.
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, exitCode: 2, runId: null, error: { code: "usage" } });
    expect(run.stderr).toContain("asks for more than this replay's policy (read-only) gives");
    expect(run.stderr).toContain("policy.workspace: recorded read-write, now read-only");
    expect(fs.existsSync(path.join(ws, "out.txt"))).toBe(false);
  });

  it("another policy that grants as much (a protected out.txt): the recorded write now fails, that is the divergence, and the differences are listed", async () => {
    const ws = makeWorkspace({ "notes.txt": NOTES, "out.txt": "kept\n" });
    const policyFile = path.join(dir, "protect-out.json");
    const policy = JSON.parse(fs.readFileSync(path.join(record, "policy.json"), "utf8"));
    fs.writeFileSync(policyFile, JSON.stringify({ ...policy, name: "protect-out", protectedPaths: ["out.txt"] }));
    const run = await cli(["replay", record, "-q", "--cwd", ws, "--policy", policyFile, "--json"]);
    expect(run.code).toBe(4);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(envelope.error.message).toMatch(
      /model request 2: tool result of call 1 \(bash\) differs: recorded "hello notes\\n", now "hello notes\\n.*Read-only file syste/,
    );
    expect(envelope.replay.recordDifferences).toEqual(
      expect.arrayContaining([
        { field: "policy.name", recorded: "workspace-write", now: "protect-out" },
        expect.objectContaining({ field: "policy.protectedPaths" }),
      ]),
    );
    expect(fs.readFileSync(path.join(ws, "out.txt"), "utf8")).toBe("kept\n");
  });

  it("a record from other versions replays with a warning naming both, and a divergence says Pi may be why", async () => {
    const copy = copyRecord(record, dir);
    const metaFile = path.join(copy, "meta.json");
    const meta = JSON.parse(fs.readFileSync(metaFile, "utf8"));
    meta.versions = { ...meta.versions, sandboxRun: "0.0.9", pi: "1.5.0" };
    fs.writeFileSync(metaFile, JSON.stringify(meta, null, 2));
    rehash(copy);
    const ws = makeWorkspace({ "notes.txt": "goodbye notes\n" });
    const run = await cli(["replay", copy, "--cwd", ws, "--json"]);
    runIds.push(JSON.parse(run.stdout).runId);
    expect(run.stderr).toContain(
      "warning: the record was made by sandbox-run 0.0.9 with Pi 1.5.0; this is sandbox-run 0.1.0 with Pi 1.6.0",
    );
    expect(run.code).toBe(4);
    expect(run.stderr).toContain("Pi's request shape may have changed between these versions");
  });
});

describe.skipIf(!dockerAvailable())("a record never holds the provider's key", () => {
  it("not even when the upstream echoes it back in an error that Pi then reports", async () => {
    const seen: string[] = [];
    const echo = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        seen.push(String(req.headers.authorization));
        const body = JSON.stringify({
          error: { message: `Incorrect API key provided: ${req.headers.authorization}`, type: "invalid_request_error" },
        });
        res.writeHead(400, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      });
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const port = (echo.address() as AddressInfo).port;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-canary-"));
    const modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(
      modelsFile,
      JSON.stringify({
        providers: {
          echo: {
            baseUrl: `http://127.0.0.1:${port}/v1`,
            api: "openai-completions",
            apiKey: CANARY,
            models: [{ id: "m" }],
          },
        },
      }),
    );
    const record = path.join(dir, "record");
    try {
      const run = await cli([
        "-q",
        "--cwd",
        makeWorkspace(),
        "--models",
        modelsFile,
        "--model",
        "echo/m",
        "--record",
        record,
        "--json",
        "hi",
      ]);
      const envelope = JSON.parse(run.stdout);
      expect(await containersOfRuns([envelope.runId])).toEqual([]);
      expect(envelope.error.code).toBe("model-error");
      expect(seen[0]).toBe(`Bearer ${CANARY}`);
      assertNoCanary(record);
      // What the upstream said is kept, with the key cut out.
      expect(fs.readFileSync(path.join(record, "exchanges.jsonl"), "utf8")).toContain(
        `Incorrect API key provided: ${SCRUBBED}`,
      );
    } finally {
      await new Promise<void>((resolve) => echo.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
