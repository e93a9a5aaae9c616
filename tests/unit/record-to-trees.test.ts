// The agent's recordTo folder and a call's trees (review of isolation between runs): a call whose
// sandbox may write where later calls' records go could plant `<recordTo>/<n>` as a link, owned by
// the caller after the hand-back, and the later record would be written where it points.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { refuseRecordToInsideTrees } from "../../src/run/plan/held-trees.js";
import { preparePlan } from "../../src/run/plan/prepare-plan.js";
import { resolveRun } from "../../src/run/plan/resolve-options.js";
import { makeWorkspace } from "../support/harness.js";

const planFor = (cwd: string, policy = "workspace-write") =>
  preparePlan(
    resolveRun("go", {}, { model: "anthropic/x", cwd, policy: loadPolicy(policy) }, { ANTHROPIC_API_KEY: "k" }),
    { image: "i", perUserLimits: { epollWatches: 1e12 } },
  );

describe("recordTo and a call's trees", () => {
  it("refuses a recordTo inside a tree the call's sandbox may write, also through the caller's own link; elsewhere it passes", () => {
    const ws = makeWorkspace();
    const planned = planFor(ws);
    expect(() => refuseRecordToInsideTrees(path.join(ws, "rec"), planned)).toThrow(
      /recordTo .*rec lies inside .*, which this call's sandbox may write/,
    );
    expect(() => refuseRecordToInsideTrees(ws, planned)).toThrow(/lies inside/);
    const alias = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rec-alias-")), "alias");
    fs.symlinkSync(ws, alias);
    expect(() => refuseRecordToInsideTrees(path.join(alias, "rec"), planned)).toThrow(/lies inside/);
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-rec-out-"));
    expect(() => refuseRecordToInsideTrees(path.join(outside, "rec"), planned)).not.toThrow();
    // A read-only workspace: the sandbox writes nothing there.
    expect(() => refuseRecordToInsideTrees(path.join(ws, "rec"), planFor(ws, "read-only"))).not.toThrow();
  });
});
