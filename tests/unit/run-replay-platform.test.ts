// A replay runs on the caller's platform (a record is never obeyed); when the record names another,
// a divergence says so and how to replay as it ran (review, session 33: an arm64 record replayed on
// amd64 diverged at `uname -m` with "record the run again").
import { describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { compareRecord } from "../../src/replay/compare-record.js";
import { platformDifference } from "../../src/run/replay-upstream.js";

const side = (platform?: "linux/arm64" | "linux/amd64") => ({
  policy: { ...loadPolicy("workspace-write"), ...(platform ? { platform } : {}) },
  image: "sandbox-run/pi:x",
  workspace: { host: "/w", sandbox: "/w" },
  writableRoots: [],
  extraArgs: [],
});

describe("a replay on another platform than the record's", () => {
  it("is said with the flag that replays as it ran; the same platform says nothing", () => {
    expect(platformDifference(compareRecord(side("linux/arm64"), side()))).toBe(
      "The record ran on platform linux/arm64, this replay on the engine's own (replay with --platform linux/arm64 to run as it did).",
    );
    expect(platformDifference(compareRecord(side(), side("linux/arm64")))).toBe(
      "The record ran on platform the engine's own, this replay on linux/arm64 (leave --platform out to run as it did).",
    );
    expect(platformDifference(compareRecord(side("linux/arm64"), side("linux/arm64")))).toBeUndefined();
  });
});
