// The workflow's own test: both agent calls replayed from the committed recordings, in a real
// sandbox with real Pi, without a model provider or a key. It imports only the package's public
// entry points, as a user's test would.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bindAgent, ContainerPiAgent, isSandboxRunError, type RunEvent } from "sandbox-run";
import { replayRecord } from "sandbox-run/testing";
import { describe, expect, inject, it } from "vitest";
import { demoRepo, triageAndFix } from "./triage-and-fix.js";

const recordings = path.join(path.dirname(fileURLToPath(import.meta.url)), "recordings");

// This repository's test set-up says whether a Docker engine answers (on CI it must).
describe.skipIf(!inject("dockerAvailable"))("triage-and-fix, replayed from its recordings", () => {
  it("finds the bug read-only, then fixes it: the recorded outcome, offline", async () => {
    const events: RunEvent[] = [];
    const agent = new ContainerPiAgent({ replay: replayRecord(recordings), onEvent: (e) => void events.push(e) });
    const repo = demoRepo();

    const outcome = await triageAndFix(bindAgent(agent), repo);

    expect(outcome.finding).toEqual({
      test: "add",
      file: "calc.sh",
      cause: "add() subtracts its arguments instead of adding them",
    });
    expect(outcome.report).toContain("ok 1 add");
    // The fix really ran in the sandbox: the replayed edit changed the repository.
    expect(fs.readFileSync(path.join(repo, "calc.sh"), "utf8")).toBe("add() { echo $(( $1 + $2 )); }\n");
    // Every model request was answered from the recordings, and none differed from them.
    expect(events.filter((e) => e.type === "replay.divergence")).toEqual([]);
    const upstreams = events.flatMap((e) =>
      e.type === "gateway.request" && e.data.upstreamUrl !== undefined ? [String(e.data.upstreamUrl)] : [],
    );
    expect(upstreams.length).toBeGreaterThan(0);
    // The replay's own server, at its secret base path.
    for (const url of upstreams) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/replay-[0-9a-f]{32}\//);
  });

  it("a regression in the repository stops the replay at the tool result that differs", async () => {
    const agent = new ContainerPiAgent({ replay: replayRecord(recordings) });
    const repo = demoRepo();
    fs.writeFileSync(path.join(repo, "calc.sh"), "add() { echo $(( $1 * $2 )); }\n");

    const error = await triageAndFix(bindAgent(agent), repo).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(isSandboxRunError(error) && error.code).toBe("replay-divergence");
    expect((error as Error).message).toMatch(/tool result of call 1 \(bash\) differs/);
  });
});
