// The policy's default turn budget: a model that never finishes (it reads the same file forever)
// is stopped at 250 turns without the caller asking. Pi counts the turns and the gateway counts the
// requests that reach it, both on the host's side of any workspace mode, so this 250-turn run is
// made once, in bind mode; the gateway's count reached through copy mode's relay is checked in every
// mode by security-network › model calls that bypass Pi….
import { describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/policy/load-policy.js";
import {
  describeOutcome,
  hostilePolicy,
  hostileWorkspace,
  readFile,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

describe("turn budget", () => {
  it("without a turn budget of the caller's, the policy's default (250 in every built-in policy) stops a model that never finishes", async () => {
    // A model that reads the same file forever (issue 17: a broken model did 4,369 turns in 15 min).
    const builtIn = loadPolicy("workspace-write").limits.maxTurns;
    expect(builtIn).toBe(250);
    const outcome = await runHostile(server, () => readFile("a.txt"), {
      cwd: hostileWorkspace({ "a.txt": "again" }),
      policy: hostilePolicy({ limits: { timeoutSeconds: 110 } }),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("turns");
    expect(outcome.error?.shortMessage).toMatch(/over the budget of 250 turns\.$/);
    // Pi's own count or the gateway's stops it first; no 251st response is ever asked of the upstream.
    expect(outcome.requests.length).toBeLessThanOrEqual(builtIn);
    expect(outcome.requests.length).toBeGreaterThanOrEqual(builtIn - 1);
  });
});
