// --record over a workspace the sandbox made hostile for it (built CLI, real engine, image, Pi):
// a FIFO, a 2 GB sparse file and a path deeper than PATH_MAX. The run's result, the --json
// envelope and the record are all still written; the patch holds the ordinary change, and the
// record's notes say what was left out and why.
//
// And a record folder inside the workspace (issue 17, part 4): the sandbox plants symlinks where
// the record's files will go (result.json, changes.patch, SHA256SUMS) pointing at stand-ins for a
// root-only host file and a shell rc file; the controller, running as root, writes nothing through
// them, in bind and in copy mode: the record is staged in the run's private folder and moved into
// place only when the sandbox left its path alone, otherwise kept where the message says,
// complete. An untouched record folder inside the workspace works in both modes. An --events file
// inside the workspace is refused, and a link planted there never written through.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRecord } from "../../src/replay/load-record.js";
import { runDirsParent } from "../../src/run/run-dirs.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { containersOfRuns, makeWorkspace, modelsFor, runBuiltCli, startModel } from "../support/harness.js";

describe("--record over a hostile workspace", () => {
  let server: ScriptedModelServer;
  let modelsFile: string;

  beforeAll(async () => {
    server = await startModel({
      hostile: [
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command:
                  "set -e; mkfifo pipe; truncate -s 2G sparse.bin; echo changed > a.txt; d=$(printf 'd%.0s' $(seq 200)); for i in $(seq 30); do mkdir $d && cd $d; done; echo deep > deep.txt; echo planted",
              },
            },
          ],
        },
        { text: "done" },
      ],
    });
    modelsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-models-")), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["hostile"])));
  });
  afterAll(async () => {
    await server?.close();
  });

  it("a FIFO (removed), a 2 GB sparse file and a too-deep path: result, envelope and record are written; notes say what was left out", async () => {
    const ws = makeWorkspace({ "a.txt": "original\n" });
    const record = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rec-")), "record");
    try {
      const run = await runBuiltCli([
        "-q",
        "--cwd",
        ws,
        "--models",
        modelsFile,
        "--model",
        "scripted/hostile",
        "--json",
        "--record",
        record,
        "go",
      ]);
      expect(run.status, run.stderr).toBe(0);
      const envelope = JSON.parse(run.stdout);
      expect(envelope).toMatchObject({ ok: true, result: "done" });
      // The FIFO the host removed is not listed as made (session 29); the sparse file is.
      expect(envelope.changedFiles.created).toEqual(expect.arrayContaining(["sparse.bin"]));
      expect(envelope.changedFiles.created).not.toContain("pipe");

      expect(JSON.parse(fs.readFileSync(path.join(record, "result.json"), "utf8"))).toBe("done");
      const patch = fs.readFileSync(path.join(record, "changes.patch"), "utf8");
      expect(patch).toContain("diff --git a/a.txt b/a.txt");
      expect(patch).toContain("-original\n+changed\n");
      expect(patch).not.toContain("sparse.bin");
      const notes = fs.readFileSync(path.join(record, "changes-notes.txt"), "utf8");
      // The FIFO is gone before the record reads the tree: the host removes what the run left of that kind.
      expect(notes).not.toContain("pipe");
      expect(fs.existsSync(path.join(ws, "pipe"))).toBe(false);
      const events = fs
        .readFileSync(path.join(record, "events.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(events.find((e) => e.type === "workspace.special-removed")?.data).toMatchObject({
        count: 1,
        files: [{ path: "pipe", kind: "fifo" }],
      });
      expect(notes).toMatch(/after: sparse\.bin skipped: 2147483648 bytes, sparse: \d+ bytes allocated/);
      expect(notes).toMatch(/after: d{80}\.\.\. skipped: path longer than 3000 bytes/);
      expect(fs.readFileSync(path.join(record, "SHA256SUMS"), "utf8")).toContain("changes-notes.txt");
      const meta = JSON.parse(fs.readFileSync(path.join(record, "meta.json"), "utf8"));
      expect(meta.ok).toBe(true);
      expect(await containersOfRuns([meta.runId])).toEqual([]);
    } finally {
      spawnSync("rm", ["-rf", ws]);
    }
  });
});

describe("--record and --events inside the workspace: the controller writes nothing through what the sandbox planted", () => {
  let server: ScriptedModelServer;
  let modelsFile: string;
  let outside: string;
  const runIds: string[] = [];
  const ROOT_ONLY = "root-only host file\n";
  const RC = "# a shell rc file\n";

  beforeAll(async () => {
    outside = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-outside-")));
    const plant = (target: string) =>
      `mkdir -p ${target} && ln -s ${outside}/root-only ${target}/result.json && ln -s ${outside}/bashrc ${target}/changes.patch && ln -s ${outside}/root-only ${target}/SHA256SUMS && ln -s ${outside}/bashrc ${target}/error.json; ls -la ${target}`;
    server = await startModel({
      planter: [{ toolCalls: [{ name: "bash", arguments: { command: plant("rec") } }] }, { text: "done" }],
      planterNested: [
        { toolCalls: [{ name: "bash", arguments: { command: plant("test/records/review") } }] },
        { text: "done" },
      ],
      ordinary: [{ toolCalls: [{ name: "bash", arguments: { command: "echo changed > a.txt" } }] }, { text: "done" }],
    });
    modelsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-models-")), "models.json");
    fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, ["planter", "planterNested", "ordinary"])));
  });
  afterAll(async () => {
    await server?.close();
    expect(await containersOfRuns(runIds)).toEqual([]);
  });

  /** Fresh stand-ins outside the workspace: a root-only file and a shell rc file. */
  function standIns(): void {
    fs.rmSync(path.join(outside, "root-only"), { force: true });
    fs.writeFileSync(path.join(outside, "root-only"), ROOT_ONLY, { mode: 0o600 });
    fs.writeFileSync(path.join(outside, "bashrc"), RC);
  }
  function expectStandInsUntouched(): void {
    expect(fs.readFileSync(path.join(outside, "root-only"), "utf8")).toBe(ROOT_ONLY);
    expect(fs.readFileSync(path.join(outside, "bashrc"), "utf8")).toBe(RC);
    expect(fs.statSync(path.join(outside, "root-only")).mode & 0o777).toBe(0o600);
  }
  async function run(model: string, ws: string, mode: "bind" | "copy", extra: string[], env?: NodeJS.ProcessEnv) {
    const result = await runBuiltCli(
      [
        "-q",
        "--cwd",
        ws,
        "--workspace",
        mode,
        "--models",
        modelsFile,
        "--model",
        `scripted/${model}`,
        "--json",
        ...extra,
        "go",
      ],
      env ? { env: { ...process.env, ...env } } : {},
    );
    const envelope = result.stdout ? JSON.parse(result.stdout) : undefined;
    if (envelope?.runId) runIds.push(envelope.runId);
    return { ...result, envelope };
  }
  /** The folder the message says the record was kept in; it must hold the complete record. */
  function keptRecord(stderr: string, target: string): string {
    const match = /the run record was not written to (\S+): (.*)\. The complete record is kept at (\S+);/.exec(stderr);
    expect(match, stderr).not.toBeNull();
    expect(match![1]).toBe(target);
    const kept = match![3]!;
    expect(path.basename(kept)).toMatch(/^record-[0-9a-f]+$/);
    const loaded = loadRecord(kept); // SHA256SUMS checks out: every file is there, whole
    expect(loaded.outcome).toMatchObject({ ok: true, result: "done" });
    return kept;
  }

  for (const mode of ["bind", "copy"] as const) {
    it(`${mode}: links planted in a record folder the sandbox made are never written through; the record is kept, complete`, async () => {
      standIns();
      const ws = makeWorkspace({ "a.txt": "original\n" });
      const target = path.join(ws, "rec");
      const result = await run("planter", ws, mode, ["--record", target]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.envelope).toMatchObject({ ok: true, result: "done" });
      expectStandInsUntouched();
      const kept = keptRecord(result.stderr, target);
      expect(result.stderr).toContain("did not exist before the run and does now: the sandbox made it");
      expect(result.envelope.recordNotes).toEqual([expect.stringContaining(`kept at ${kept}`)]);
      expect(fs.existsSync(path.join(runDirsParent(), `run-${result.envelope.runId}-record`))).toBe(false);
      fs.rmSync(kept, { recursive: true });
    });

    it(`${mode}: links planted in an empty record folder the caller made are never written through`, async () => {
      standIns();
      const ws = makeWorkspace({ "a.txt": "original\n" });
      const target = path.join(ws, "test", "records", "review");
      fs.mkdirSync(target, { recursive: true });
      const result = await run("planterNested", ws, mode, ["--record", target]);
      expect(result.status, result.stderr).toBe(0);
      expectStandInsUntouched();
      const kept = keptRecord(result.stderr, target);
      expect(result.stderr).toMatch(/is no longer empty|was replaced during the run|is not a plain folder/);
      fs.rmSync(kept, { recursive: true });
    });

    it(`${mode}: a record folder inside the workspace that the sandbox leaves alone is written there, complete`, async () => {
      const ws = makeWorkspace({ "a.txt": "original\n" });
      const target = path.join(ws, "test", "records", "review");
      const result = await run("ordinary", ws, mode, ["--record", target]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stderr).not.toContain("run record");
      expect(result.envelope.changedFiles).toEqual({ created: [], modified: ["a.txt"], deleted: [] });
      const loaded = loadRecord(target);
      expect(loaded.outcome).toMatchObject({ ok: true, result: "done" });
      expect(fs.readFileSync(path.join(target, "changes.patch"), "utf8")).toContain("-original\n+changed\n");
      expect(fs.readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("changed\n");
      // Nothing of the staging is left behind.
      expect(fs.existsSync(path.join(runDirsParent(), `run-${result.envelope.runId}-record`))).toBe(false);
    });
  }

  it("--events inside the workspace is refused, and a link planted there (by an earlier run) is not written through", async () => {
    standIns();
    const ws = makeWorkspace({ "a.txt": "original\n" });
    fs.symlinkSync(path.join(outside, "bashrc"), path.join(ws, "events.jsonl"));
    // A TMPDIR of its own: the record this refusal drops must leave nothing in it.
    const tmpdir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-events-tmp-"));
    const record = path.join(outside, "record");
    const result = await run("ordinary", ws, "bind", ["--events", path.join(ws, "events.jsonl"), "--record", record], {
      TMPDIR: tmpdir,
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(`Cannot write the events file ${path.join(ws, "events.jsonl")}`);
    expect(result.stderr).toContain("which the sandbox holds");
    expectStandInsUntouched();
    expect(fs.readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("original\n");
    expect(fs.existsSync(record)).toBe(false);
    expect(fs.readdirSync(runDirsParent(tmpdir))).toEqual([]);
  });
});
