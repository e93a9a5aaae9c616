// The workflow's own test: both agent calls replayed from the committed recordings, in a real
// sandbox with real Pi, without a model provider or a key. It imports only the package's public
// entry points, as a user's test would.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bindAgent, ContainerPiAgent, isSandboxRunError, type RunEvent } from "sandbox-run";
import { replayRecord } from "sandbox-run/testing";
import { afterEach, describe, expect, it } from "vitest";
import { demoRepo, triageAndFix } from "./triage-and-fix.js";

const recordings = path.join(path.dirname(fileURLToPath(import.meta.url)), "recordings");

// Each call starts a sandbox and Pi (1-5 s on a quiet two-core machine, more under load): far past
// vitest's default 5 s. A test cut short by its timeout leaves its run to `sandbox-run gc`.
const CALLS_TIMEOUT_MS = 120_000;
const repos: string[] = [];
const repo = () => {
  const made = demoRepo();
  repos.push(made);
  return made;
};
afterEach(() => {
  for (const made of repos.splice(0)) fs.rmSync(made, { recursive: true, force: true });
});

// Needs a Docker engine with the runner image (`npx sandbox-run doctor` says whether it has one).
describe("triage-and-fix, replayed from its recordings", { timeout: CALLS_TIMEOUT_MS }, () => {
  it("finds the bug read-only, then fixes it: the recorded outcome, offline", async () => {
    const events: RunEvent[] = [];
    const agent = new ContainerPiAgent({ replay: replayRecord(recordings), onEvent: (e) => void events.push(e) });
    const dir = repo();

    const outcome = await triageAndFix(bindAgent(agent), dir);

    expect(outcome.finding).toEqual({
      test: "add",
      file: "calc.sh",
      cause: "add() subtracts its arguments instead of adding them",
    });
    expect(outcome.report).toContain("ok 1 add");
    // The fix really ran in the sandbox: the replayed edit changed the repository.
    expect(fs.readFileSync(path.join(dir, "calc.sh"), "utf8")).toBe("add() { echo $(( $1 + $2 )); }\n");
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
    const dir = repo();
    fs.writeFileSync(path.join(dir, "calc.sh"), "add() { echo $(( $1 * $2 )); }\n");

    const error = await triageAndFix(bindAgent(agent), dir).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(isSandboxRunError(error) && error.code).toBe("replay-divergence");
    expect((error as Error).message).toMatch(/tool result of call 1 \(bash\) differs/);
  });
});
