// --json and --record keep their shape when the run fails: the envelope says ok:false with the
// error's code and the CLI's exit code, and the record holds error.json instead of result.json.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  runBuiltCli,
  startModel,
} from "../support/harness.js";

describe.skipIf(!dockerAvailable())("--json and --record on a failed run", () => {
  let server: ScriptedModelServer;
  let modelsFile: string;

  beforeAll(async () => {
    server = await startModel({
      down: [{ httpStatus: 400, body: "model scripted/down does not exist" }],
      turns: (_request, turn) => ({
        toolCalls: [{ name: "bash", arguments: { command: `echo turn ${turn}; echo fund=false >> .npmrc` } }],
      }),
    });
    modelsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-models-")), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["down", "turns"])));
  });
  afterAll(async () => {
    await server?.close();
  });

  it("a model error: exit 1, an ok:false envelope with the error, and a record with error.json", async () => {
    const ws = makeWorkspace({ "a.txt": "a\n" });
    const record = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rec-")), "record");
    const run = await runBuiltCli([
      "-q",
      "--cwd",
      ws,
      "--models",
      modelsFile,
      "--model",
      "scripted/down",
      "--json",
      "--record",
      record,
      "go",
    ]);

    expect(run.status).toBe(1);
    const envelope = JSON.parse(run.stdout);
    expect(envelope).toMatchObject({ ok: false, result: null, exitCode: 1, model: "scripted/down" });
    expect(envelope.error.code).toBe("model-error");
    expect(envelope.error.message).toContain("model scripted/down does not exist");
    // Two exit codes, named apart: the CLI's (1) and the sandbox's (Pi exits 0 on a model error).
    expect(envelope.error.sandboxExitCode).toBe(0);
    expect(envelope.error).not.toHaveProperty("exitCode");
    expect(run.stderr).toContain("The model provider failed");

    expect(fs.existsSync(path.join(record, "result.json"))).toBe(false);
    const error = JSON.parse(fs.readFileSync(path.join(record, "error.json"), "utf8"));
    expect(error.code).toBe("model-error");
    const meta = JSON.parse(fs.readFileSync(path.join(record, "meta.json"), "utf8"));
    expect(meta).toMatchObject({ ok: false, exitCode: 1 });
    const events = fs
      .readFileSync(path.join(record, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(events.at(-1).type).toBe("container.removed");
    expect(events.some((e) => e.type === "run.failed" && e.data.code === "model-error")).toBe(true);
    expect(await containersOfRuns([meta.runId])).toEqual([]);
  });

  it("a turn budget: the run stops, the envelope names the budget, and -q still says which host-run files it changed", async () => {
    const ws = makeWorkspace();
    const run = await runBuiltCli([
      "-q",
      "--cwd",
      ws,
      "--models",
      modelsFile,
      "--model",
      "scripted/turns",
      "--max-turns",
      "2",
      "--json",
      "go",
    ]);

    expect(run.status).toBe(1);
    const envelope = JSON.parse(run.stdout);
    expect(envelope.ok).toBe(false);
    expect(envelope.error).toMatchObject({ code: "limit", limit: "turns" });
    expect(envelope.error.message).toContain("over the budget of 2 turns");
    // What the failed run left in the workspace, and what ran it (review, session 27: all null).
    expect(envelope.changedFiles).toMatchObject({ created: [".npmrc"], modified: [], deleted: [] });
    expect(envelope.hostRunFiles).toEqual([{ path: ".npmrc", change: "created", why: expect.any(String) }]);
    expect(envelope.hostRunCount).toBe(1);
    expect(envelope.policy).toBe("workspace-write");
    expect(envelope.image).toMatch(/^sandbox-run\/pi:/);
    expect(envelope.piVersion).toMatch(/^\d+\.\d+\.\d+/);
    // The gateway keeps the budget too: a third model request never reaches the upstream.
    expect(server.requests.filter((r) => r.body.model === "turns").length).toBe(2);
    // -q keeps the host-run note, a warning rather than progress (review, session 27: -q dropped it).
    expect(run.stderr).toMatch(
      /^sandbox-run: note: the run left files, links or names that tools on this machine read, follow or misread: \.npmrc;/m,
    );
    expect(await containersOfRuns([envelope.runId])).toEqual([]);
  });
});
