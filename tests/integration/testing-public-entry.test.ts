// sandbox-run/testing as a user's test suite uses it: this file imports only the package's public
// entry points ("sandbox-run", "sandbox-run/testing", resolved through package.json `exports` to
// the built dist/), never src/. A scripted model drives real Pi in a real sandbox; the same calls,
// recorded with `recordTo`, replay without it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ContainerPiAgent, type JsonSchema } from "sandbox-run";
import { replayRecord, scriptedModel } from "sandbox-run/testing";
import { describe, expect, inject, it } from "vitest";

const schema: JsonSchema = {
  type: "object",
  properties: { files: { type: "array", items: { type: "string" } } },
  required: ["files"],
};

function workspace(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-public-"));
  fs.writeFileSync(path.join(dir, "a.txt"), "a\n");
  fs.writeFileSync(path.join(dir, "b.txt"), "b\n");
  return dir;
}

describe.skipIf(!inject("dockerAvailable"))("sandbox-run/testing from a user's suite", () => {
  it("scriptedModel: Pi does what the script says, and the test sees what Pi sent", async () => {
    await using model = await scriptedModel([
      { toolCalls: [{ name: "bash", arguments: { command: "ls *.txt" } }] },
      { final: { files: ["a.txt", "b.txt"] } },
    ]);
    const agent = new ContainerPiAgent({ ...model.options });

    const files = await agent.run("List the text files.", { cwd: workspace(), schema, sandbox: "read-only" });

    expect(files).toEqual({ files: ["a.txt", "b.txt"] });
    expect(model.requests).toHaveLength(2);
    const toolResult = model.requests[1]!.conversation!.messages.flatMap((m) => m.parts).find(
      (p) => p.kind === "tool-result",
    );
    expect(toolResult).toMatchObject({ kind: "tool-result", text: "a.txt\nb.txt\n" });
  });

  it("a function script answers by the conversation; another API speaks its own wire format", async () => {
    await using model = await scriptedModel(
      (turn, conversation) =>
        turn === 0
          ? {
              text: `You asked: ${conversation.messages[0]!.parts.map((p) => (p.kind === "text" ? p.text : "")).join("")}`,
            }
          : { text: "Done." },
      { api: "anthropic-messages", id: "echo" },
    );
    expect(model.model).toBe("scripted/echo");
    const agent = new ContainerPiAgent({ ...model.options });
    expect(await agent.run("ping", { cwd: workspace(), sandbox: "read-only" })).toBe("You asked: ping");
  });

  it("record with recordTo, replay with replayRecord: the same answers with the model gone", async () => {
    const recordings = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-public-rec-"));
    const model = await scriptedModel([{ text: "first" }]);
    const recording = new ContainerPiAgent({ ...model.options, recordTo: recordings, workspacePath: "/workspace/app" });
    expect(await recording.run("one", { cwd: workspace() })).toBe("first");
    expect(await recording.run("two", { cwd: workspace() })).toBe("first");
    await model.close();
    expect(fs.readdirSync(recordings).sort()).toEqual(["1", "2"]);

    const replaying = new ContainerPiAgent({ replay: replayRecord(recordings) });
    const details = await replaying.runDetailed("one", { cwd: workspace() });
    expect(details.result).toBe("first");
    expect(details.replay).toMatchObject({ answered: 1, recorded: 1, divergences: [], outcome: { matches: true } });
    // A failed call is recorded too: the error instead of a result.
    const failing = await scriptedModel([{ httpStatus: 400, body: "no such model" }]);
    const failed = path.join(recordings, "failed");
    await expect(
      new ContainerPiAgent({ ...failing.options }).run("one", { cwd: workspace(), record: failed }),
    ).rejects.toMatchObject({
      code: "model-error",
    });
    await failing.close();
    expect(JSON.parse(fs.readFileSync(path.join(failed, "error.json"), "utf8")).code).toBe("model-error");
    expect(fs.existsSync(path.join(failed, "result.json"))).toBe(false);
    expect(fs.readFileSync(path.join(failed, "SHA256SUMS"), "utf8")).toContain("exchanges.jsonl");

    // The second record was made for the prompt "two": another prompt is a divergence.
    await expect(replaying.run("three", { cwd: workspace() })).rejects.toMatchObject({
      code: "replay-divergence",
      message: expect.stringContaining('message 1 (user) differs: recorded "two", now "three"'),
    });
  });
});
