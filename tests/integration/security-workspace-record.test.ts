// --record over a workspace the sandbox made hostile for it (built CLI, real engine, image, Pi):
// a FIFO, a 2 GB sparse file and a path deeper than PATH_MAX. The run's result, the --json
// envelope and the record are all still written; the patch holds the ordinary change, and the
// record's notes say what was left out and why.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

  it("a FIFO, a 2 GB sparse file and a too-deep path: result, envelope and record are written; notes say what was left out", async () => {
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
      expect(envelope.changedFiles.created).toEqual(expect.arrayContaining(["pipe", "sparse.bin"]));

      expect(JSON.parse(fs.readFileSync(path.join(record, "result.json"), "utf8"))).toBe("done");
      const patch = fs.readFileSync(path.join(record, "changes.patch"), "utf8");
      expect(patch).toContain("diff --git a/a.txt b/a.txt");
      expect(patch).toContain("-original\n+changed\n");
      expect(patch).not.toContain("sparse.bin");
      const notes = fs.readFileSync(path.join(record, "changes-notes.txt"), "utf8");
      expect(notes).toContain("after: pipe skipped: a fifo");
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
